"""Qwen3-MoE through the one decoder: logits equal transformers' Qwen3MoeForCausalLM on tiny
random checkpoints (both expert layouts, sharded files, 8 devices, scanned layers), gradients
reach the input embeddings, and bad expert tensors raise errors that name them."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch
from flax import nnx

from activemem_jax.models import BackboneWeight, CheckpointError, ModelConfig, forward, load_pretrained
from activemem_jax.sharding import make_mesh
from tests.models.tiny_hf import MOE_FAMILIES, hf_logits, left_padded_batch, make_tiny

TOL = 1e-4
E4 = "qwen3_moe_e4_top2"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """family -> (directory, torch model), each saved once for the module."""
    made = {}

    def get(family):
        if family not in made:
            d = tmp_path_factory.mktemp(family)
            made[family] = (d, make_tiny(d, family))
        return made[family]

    return get


def assert_matches(model, torch_model, lengths=(24, 17, 5), seed=1):
    ids, mask = left_padded_batch(np.random.default_rng(seed), model.config.vocab_size, list(lengths), max(lengths))
    ours, ref = model.logits(ids, mask), hf_logits(torch_model, ids, mask)
    real = mask.astype(bool)
    assert np.abs(ref[real]).max() > 0.5  # the comparison is not between near-zero logits
    np.testing.assert_allclose(ours[real], ref[real], atol=TOL, rtol=0)
    return float(np.abs(ours[real] - ref[real]).max())


@pytest.mark.parametrize("family,sparse", [
    (E4, (True, True)),
    ("qwen3_moe_e8_top3_step2", (False, True, False)),
    ("qwen3_moe_e6_top1_mlp_only", (False, True, True)),
])
def test_logits_match_transformers(tiny, family, sparse, one_device_mesh):
    d, torch_model = tiny(family)
    model = load_pretrained(str(d), mesh=one_device_mesh)
    assert model.config.moe_layers == sparse
    assert model.config.num_experts == MOE_FAMILIES[family][1]["num_experts"]
    ids, mask = left_padded_batch(np.random.default_rng(1), model.config.vocab_size, [24, 17, 5], 24)
    with torch.no_grad():  # tokens go to many experts in every sparse layer: the grouping is exercised
        routers = torch_model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                              output_router_logits=True).router_logits
    assert len(routers) == sum(sparse)
    k, e = model.config.num_experts_per_tok, model.config.num_experts
    for logits in routers:
        picked = torch.topk(logits[torch.tensor(mask).reshape(-1).bool()], k, dim=-1).indices
        print(family, "experts picked:", len(picked.unique()), "of", e)
        assert len(picked.unique()) >= min(e, k + 2)
    print(family, "max |logit difference|:", assert_matches(model, torch_model))


def test_fused_expert_layout_loads(tiny, tmp_path, one_device_mesh):
    """transformers 5 holds experts fused ([E, 2F, D] gate_up_proj, [E, D, F] down_proj) in
    memory; a checkpoint written from its state_dict loads to the same model."""
    _, torch_model = tiny(E4)
    state = {k: v.contiguous() for k, v in torch_model.state_dict().items()}
    assert "model.layers.0.mlp.experts.gate_up_proj" in state
    safetensors.torch.save_file(state, str(tmp_path / "model.safetensors"))
    torch_model.config.save_pretrained(tmp_path)
    assert_matches(load_pretrained(str(tmp_path), mesh=one_device_mesh), torch_model, lengths=(9, 4))


def test_sharded_files_on_eight_devices(tmp_path):
    """Experts spread over several shard files, weights sharded over data x fsdp x tensor."""
    torch_model = make_tiny(tmp_path, E4, max_shard_size="40KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 2
    model = load_pretrained(str(tmp_path), mesh=make_mesh(data=2, fsdp=2, tensor=2))
    gate = model.state["layers"][0]["mlp"]["experts"]["gate_proj"].get_value()
    assert gate.shape == (4, 32, 64) and tuple(gate.sharding.spec) == (None, "tensor", "fsdp")
    assert_matches(model, torch_model, lengths=(12, 7))


def test_scanned_layers_match_and_mixed_layers_refuse_scan(tiny, one_device_mesh):
    d, torch_model = tiny(E4)
    scanned = load_pretrained(str(d), mesh=one_device_mesh, scan_layers=True)
    assert scanned.state["layers"]["mlp"]["experts"]["down_proj"].get_value().shape == (2, 4, 64, 32)
    assert_matches(scanned, torch_model, lengths=(10, 6))
    mixed, _ = tiny("qwen3_moe_e8_top3_step2")
    with pytest.raises(NotImplementedError, match="scan_layers=True .* mixes dense and sparse"):
        load_pretrained(str(mixed), mesh=one_device_mesh, scan_layers=True)


def test_norm_topk_prob_is_applied(tiny, tmp_path, one_device_mesh):
    """Dropping the renormalization changes the logits (so the matching test can fail)."""
    d, _ = tiny(E4)
    cfg = json.loads((d / "config.json").read_text())
    normed = load_pretrained(str(d), mesh=one_device_mesh)
    for f in ("config.json", "model.safetensors"):
        (tmp_path / f).write_bytes((d / f).read_bytes())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "norm_topk_prob": False}))
    plain = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    ids = np.arange(3, 30)[None]
    assert np.abs(normed.logits(ids) - plain.logits(ids)).max() > 1e-3


def test_frozen_yet_gradients_reach_input_embeddings(tiny, one_device_mesh):
    d, torch_model = tiny("qwen3_moe_e6_top1_mlp_only")
    model = load_pretrained(str(d), mesh=one_device_mesh)
    module = model.module
    assert len(jax.tree.leaves(nnx.state(module, nnx.Param))) == 0
    frozen = jax.tree.leaves(nnx.state(module, BackboneWeight))
    assert sum(x.size for x in frozen) == model.config.num_params == sum(p.numel() for p in torch_model.parameters())
    embeds = module.embed_tokens(jnp.arange(3, 15)[None])

    def scalar(e):
        logits, _ = forward(model.graphdef, model.state, embeds=e)
        return jnp.sum(logits[:, -1, :7] ** 2)

    g = np.asarray(jax.jit(jax.grad(scalar))(embeds))
    assert g.shape == embeds.shape and np.isfinite(g).all()
    assert np.abs(g[0, 0]).max() > 0  # the first token influences the last one's logits


# ----------------------------------------------------------------- bad checkpoints
def _rewrite(directory, edit):
    """Apply `edit` to the checkpoint's {name: array} and write it back."""
    path = str(directory / "model.safetensors")
    tensors = dict(safetensors.numpy.load_file(path))
    edit(tensors)
    safetensors.numpy.save_file(tensors, path)


@pytest.fixture
def e4_copy(tiny, tmp_path):
    d, _ = tiny(E4)
    for f in ("config.json", "model.safetensors"):
        (tmp_path / f).write_bytes((d / f).read_bytes())
    return tmp_path


def test_missing_expert_tensor_is_named(e4_copy, one_device_mesh):
    _rewrite(e4_copy, lambda t: t.pop("model.layers.1.mlp.experts.2.up_proj.weight"))
    with pytest.raises(CheckpointError, match=r"model\.safetensors: missing tensor "
                                              r"'model\.layers\.1\.mlp\.experts\.2\.up_proj\.weight'"):
        load_pretrained(str(e4_copy), mesh=one_device_mesh)


def test_missing_router_is_named(e4_copy, one_device_mesh):
    _rewrite(e4_copy, lambda t: t.pop("model.layers.0.mlp.gate.weight"))
    with pytest.raises(CheckpointError, match=r"missing tensor\(s\) \['model\.layers\.0\.mlp\.gate\.weight'\]"):
        load_pretrained(str(e4_copy), mesh=one_device_mesh)


def test_experts_of_different_shapes_are_named(e4_copy, one_device_mesh):
    def widen(t):
        t["model.layers.0.mlp.experts.3.gate_proj.weight"] = np.zeros((48, 64), np.float32)

    _rewrite(e4_copy, widen)
    with pytest.raises(CheckpointError, match=r"tensor 'model\.layers\.0\.mlp\.experts\.3\.gate_proj\.weight' "
                                              r"has shape \(48, 64\), but .*experts\.0\.gate_proj.* \(32, 64\)"):
        load_pretrained(str(e4_copy), mesh=one_device_mesh)


@pytest.mark.parametrize("changes,error,match", [
    ({"num_experts": 3}, CheckpointError, r"'model\.layers\.0\.mlp\.experts\.3\.gate_proj\.weight' names an expert past .*num_experts=3"),
    ({"moe_intermediate_size": 16}, CheckpointError,
     r"tensor 'model\.layers\.0\.mlp\.experts\.\*\.(gate|up|down)_proj\.weight' has shape \(4, .*32.*16"),
    ({"shared_expert_intermediate_size": 64}, NotImplementedError, "shared experts"),
])
def test_config_that_disagrees_with_the_experts(e4_copy, one_device_mesh, changes, error, match):
    path = e4_copy / "config.json"
    cfg = {k: v for k, v in json.loads(path.read_text()).items() if k != "num_local_experts"}
    path.write_text(json.dumps({**cfg, "num_experts": 4, **changes}))
    with pytest.raises(error, match=match):
        load_pretrained(str(e4_copy), mesh=one_device_mesh)


def test_config_fields_are_read_and_checked():
    base = dict(model_type="qwen3_moe", vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=4,
                num_attention_heads=2, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=8)
    cfg = ModelConfig.from_hf_dict({**base, "decoder_sparse_step": 2, "mlp_only_layers": [3]})
    assert cfg.moe_layers == (False, True, False, False) and cfg.qk_norm and cfg.num_experts == 4
    assert ModelConfig.from_hf_dict({**base, "num_local_experts": 0}).moe_layers == ()  # no experts: dense
    with pytest.raises(Exception, match=r"num_experts_per_tok=5 must lie in \[1, num_experts=4\]"):
        ModelConfig.from_hf_dict({**base, "num_experts_per_tok": 5})
    with pytest.raises(NotImplementedError, match="quant='int8' is not implemented for mixture-of-experts"):
        ModelConfig.from_hf_dict(base, quant="int8")


def test_active_params_count_the_router_and_the_chosen_experts():
    """Layers 1 and 2 sparse (4 experts of width 8, top 2), layers 0 and 3 dense (width 32), by hand."""
    cfg = ModelConfig.from_hf_dict(dict(model_type="qwen3_moe", vocab_size=32, hidden_size=16, intermediate_size=32,
                                        num_hidden_layers=4, num_attention_heads=2, num_local_experts=4,
                                        num_experts_per_tok=2, moe_intermediate_size=8, mlp_only_layers=[0, 3]))
    assert cfg.moe_layers == (False, True, True, False) and cfg.head_dim == 8 and cfg.num_kv_heads == 2
    attention = 4 * 16 * 16 + 2 * 8  # q, k, v, o [16, 16] and the q / k norms
    norms = 2 * 16
    dense = 3 * 16 * 32
    router, expert = 16 * 4, 3 * 16 * 8
    outside = 32 * 16 + 32 * 16 + 16  # embeddings, untied lm_head, final norm
    assert cfg.num_params == 4 * (attention + norms) + 2 * dense + 2 * (router + 4 * expert) + outside == 11600
    assert cfg.num_active_params == 4 * (attention + norms) + 2 * dense + 2 * (router + 2 * expert) + outside == 10064
    assert [cfg.mlp_matmul_params(i) for i in range(4)] == [dense, router + 2 * expert, router + 2 * expert, dense]
    plain = cfg.replace(moe_layers=(), num_experts=0, num_experts_per_tok=0, moe_intermediate_size=0)
    assert plain.num_active_params == plain.num_params == 4 * (attention + norms + dense) + outside


def test_engine_greedy_decode_equals_transformers_generate(tmp_path, one_device_mesh):
    """The engine's batched prefill and cached decode steps (one token per slot through the
    router) give transformers' generate's greedy tokens."""
    from activemem_jax.engine import Engine, SamplingParams
    from tests.models.tiny_hf import save_word_tokenizer

    torch_model = make_tiny(tmp_path, "qwen3_moe_e8_top3_step2", max_position_embeddings=256)
    save_word_tokenizer(tmp_path, 256)
    model = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    prompts = [[int(t) for t in np.random.default_rng(n).integers(3, 256, n)] for n in (7, 19)]
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    with Engine(model, max_slots=2, max_len=256) as engine:
        with engine.batch():
            handles = [engine.submit(p, params) for p in prompts]
        outs = [h.result(300).token_ids for h in handles]
    for prompt, out in zip(prompts, outs):
        with torch.no_grad():
            ref = torch_model.generate(torch.tensor([prompt]), max_new_tokens=6, do_sample=False,
                                       min_new_tokens=6, pad_token_id=0)
        assert list(out) == ref[0, len(prompt):].tolist()


def test_the_openai_server_serves_it_over_http(tmp_path, one_device_mesh):
    """The OpenAI-compatible server over real HTTP on 127.0.0.1, on the engine over a tiny
    Qwen3-MoE checkpoint: four concurrent greedy completions (batched in the engine's slots)
    each continue their prompt as transformers' generate does; the engine's prefix cache and
    latent splice act on it as on the dense families (tests/engine/test_engine.py)."""
    import concurrent.futures

    import openai
    import transformers

    from activemem_jax.engine import Engine, SamplingParams
    from activemem_jax.server import make_app
    from tests.models.tiny_hf import save_word_tokenizer
    from tests.serving import running

    torch_model = make_tiny(tmp_path, "qwen3_moe_e4_top2", max_position_embeddings=256)
    save_word_tokenizer(tmp_path, 256)
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    model = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    prompts = [" ".join(f"t{t}" for t in np.random.default_rng(n).integers(3, 256, n)) for n in (7, 19, 11, 5)]
    with Engine(model, max_slots=4, max_len=256) as engine, running(make_app(engine, "tiny-moe")) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused")
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            outs = list(pool.map(lambda p: client.completions.create(model="tiny-moe", prompt=p, max_tokens=6,
                                                                     temperature=0), prompts))
        # the prefix cache: a long shared prefix is reused and changes nothing
        params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
        prefix = np.random.default_rng(1).integers(3, 256, 150).tolist()
        first = engine.generate([prefix + [7, 8]], params)[0]
        second = engine.generate([prefix + [9]], params)[0]
        again = engine.generate([prefix + [7, 8]], params)[0]
        assert second.cached_tokens >= 128 and again.cached_tokens >= 128 and again.token_ids == first.token_ids
        # the latent splice: the model's own embeddings spliced in change nothing, other vectors do
        ids, at = prefix[:20], [5, 6]
        own = np.asarray(model.module.embed_tokens(np.asarray([ids])))[0, at]
        plain = engine.generate([ids], params)[0]
        assert engine.submit(ids, params, latents=own, latent_positions=at).result().token_ids == plain.token_ids
        other = np.random.default_rng(0).standard_normal(own.shape) * 3
        assert engine.submit(ids, params, latents=other, latent_positions=at).result().token_ids != plain.token_ids
    seen = set()
    for prompt, out in zip(prompts, outs):
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        assert out.usage.prompt_tokens == len(ids)  # the server tokenized the text as transformers does
        with torch.no_grad():  # the ids hold the pad id 0: generate must not mask them out
            ref = torch_model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                       max_new_tokens=6, do_sample=False, pad_token_id=0)
        want = tok.convert_ids_to_tokens(ref[0, len(ids):].tolist())
        got = out.choices[0].text.split()
        assert got and got == want[:len(got)], (prompt, got, want)  # (an end-of-text token may stop it early)
        assert out.usage.completion_tokens >= len(got)
        seen.add(tuple(got))
    assert len(seen) == len(prompts)  # each prompt its own continuation: the check sees the prompt
