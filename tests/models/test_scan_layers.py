"""Stacked layers under a scan (`scan_layers`) against today's unrolled layers: the same
logits (and transformers'), the stacked weights filled from the same per-layer tensors,
the same cached decode, the same gradients under every remat policy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from activemem_jax import sharding as shd
from activemem_jax.models import KVCache, CheckpointError, ModelConfig, forward, load_pretrained
from activemem_jax.models.generate import greedy_generate
from tests.models.tiny_hf import hf_logits, left_padded_batch, make_tiny


@pytest.mark.parametrize("family", ["qwen2_bias_gqa3", "qwen3_odd_head_dim", "llama_gqa3_llama3rope",
                                    "smollm3_nope"])
def test_scanned_logits_equal_unrolled_and_transformers(tmp_path, family, one_device_mesh):
    layers = dict(no_rope_layers=[0, 1, 1]) if family.startswith("smollm3") else {}
    torch_model = make_tiny(tmp_path, family, num_hidden_layers=3, **layers)
    unrolled = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    scanned = load_pretrained(str(tmp_path), mesh=one_device_mesh, scan_layers=True)
    ids, mask = left_padded_batch(np.random.default_rng(1), unrolled.config.vocab_size, [24, 17, 5], 24)
    real = mask.astype(bool)
    a, b = unrolled.logits(ids, mask), scanned.logits(ids, mask)
    np.testing.assert_allclose(b[real], a[real], atol=1e-5, rtol=0)
    np.testing.assert_allclose(b[real], hf_logits(torch_model, ids, mask)[real], atol=1e-4, rtol=0)

    # the stacked weights are the per-layer weights, layer by layer, with a "layers" axis
    stacked = scanned.state["layers"]["attn"]["q_proj"]["kernel"]
    assert stacked.get_metadata()["axes"] == ("layers", "heads", "embed")
    assert stacked.get_value().shape[0] == 3
    for i in range(3):
        np.testing.assert_array_equal(np.asarray(stacked.get_value()[i]),
                                      np.asarray(unrolled.state["layers"][i]["attn"]["q_proj"]["kernel"].get_value()))


def test_stacked_weights_load_sharded(tmp_path):
    """On 8 fake devices (fsdp 2 x tensor 4): the stacked kernels are split like the
    unrolled ones (the layer axis whole), and the logits equal one device's."""
    make_tiny(tmp_path, "mistral_gqa3", vocab_size=512)
    ids, mask = left_padded_batch(np.random.default_rng(0), 512, [16, 9, 12, 3], 16)
    one = load_pretrained(str(tmp_path), mesh=shd.make_mesh(devices=jax.devices()[:1]))
    model = load_pretrained(str(tmp_path), mesh=shd.make_mesh(fsdp=2, tensor=4), scan_layers=True)
    q = model.state["layers"]["attn"]["q_proj"]["kernel"].get_value()
    assert q.sharding.spec == P(None, "tensor", "fsdp")
    assert q.addressable_shards[0].data.shape == (2, q.shape[1] // 4, q.shape[2] // 2)
    real = mask.astype(bool)
    np.testing.assert_allclose(model.logits(ids, mask)[real], one.logits(ids, mask)[real], atol=1e-5, rtol=0)


def test_int8_stacked_equals_int8_unrolled(tmp_path, one_device_mesh):
    """The same int8 weights and scales; logits equal up to activation-quantization
    rounding (each matmul rounds its input rows to int8, so float noise of the last bit
    can move one step: measured 2.5e-4, against int8's own 0.11 from float32)."""
    make_tiny(tmp_path, "qwen2_bias_gqa3")
    a = load_pretrained(str(tmp_path), mesh=one_device_mesh, quant="int8")
    b = load_pretrained(str(tmp_path), mesh=one_device_mesh, quant="int8", scan_layers=True)
    for i in range(2):
        for mod, name in [("attn", "q_proj"), ("attn", "o_proj"), ("mlp", "up_proj")]:
            for part in ("kernel", "kernel_scale"):
                np.testing.assert_array_equal(np.asarray(b.state["layers"][mod][name][part].get_value()[i]),
                                              np.asarray(a.state["layers"][i][mod][name][part].get_value()))
    ids = np.random.default_rng(3).integers(3, 256, (2, 12)).astype(np.int32)
    np.testing.assert_allclose(b.logits(ids), a.logits(ids), atol=1e-3, rtol=0)


def test_missing_layer_tensor_is_named(tmp_path, one_device_mesh):
    import safetensors.numpy

    make_tiny(tmp_path, "llama_tied_mha")
    path = tmp_path / "model.safetensors"
    tensors = safetensors.numpy.load_file(str(path))
    del tensors["model.layers.1.mlp.up_proj.weight"]
    safetensors.numpy.save_file(tensors, str(path), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"model\.layers\.1\.mlp\.up_proj\.weight"):
        load_pretrained(str(tmp_path), mesh=one_device_mesh, scan_layers=True)


def test_scanned_cache_steps_equal_full_forward(tmp_path, one_device_mesh):
    """A stacked cache ([L, B, ...] blocks carried through the scan): chunked prefill and
    one-token steps across the 256-row block boundary equal the full forward."""
    make_tiny(tmp_path, "llama_gqa3_llama3rope", max_position_embeddings=1024)
    model = load_pretrained(str(tmp_path), mesh=one_device_mesh, scan_layers=True)
    module = model.module
    seq = np.random.default_rng(0).integers(3, model.config.vocab_size, size=260).astype(np.int32)
    full, _ = forward(model.graphdef, model.state, tokens=jnp.asarray(seq)[None])
    cache = KVCache.init(model.config, 2, 300)  # row 1 stays empty
    assert cache.stacked and cache.k[0].shape[:2] == (model.config.num_layers, 2)
    got = []
    for lo, hi in [(0, 200), (200, 255), (255, 256), (256, 257), (257, 260)]:
        at = jnp.arange(lo, hi, dtype=jnp.int32)[None]
        logits, _, cache = module(jnp.asarray(seq[lo:hi])[None], positions=at, cache=cache, slots=at,
                                  cache_rows=jnp.asarray([0]))
        got.append(np.asarray(logits[0]))
    np.testing.assert_allclose(np.concatenate(got), np.asarray(full[0]), atol=1e-4, rtol=0)
    assert np.asarray(cache.mask).sum(axis=1).tolist() == [260, 0]
    assert not np.asarray(cache.k[0][:, 1]).any()


@pytest.mark.slow
def test_embedded_model_scanned_decode_matches_unrolled(embedded_model, one_device_mesh):
    scanned = load_pretrained("embedded", dtype="float32", mesh=one_device_mesh, scan_layers=True)
    prompts = [embedded_model.encode_chat("What is the capital of France?"),
               embedded_model.tokenizer("The history of Rome begins")["input_ids"]]
    want = greedy_generate(embedded_model, prompts, max_new_tokens=12, eos_token_ids=())
    assert greedy_generate(scanned, prompts, max_new_tokens=12, eos_token_ids=()) == want
    ids = np.asarray([prompts[1] + want[1]])
    np.testing.assert_allclose(scanned.logits(ids), embedded_model.logits(ids), atol=1e-4, rtol=0)


@pytest.mark.parametrize("scan_layers", [False, True], ids=["unrolled", "scan"])
def test_remat_policies_keep_values_and_gradients(tmp_path, one_device_mesh, scan_layers):
    make_tiny(tmp_path, "qwen3_odd_head_dim")
    ids = np.random.default_rng(2).integers(3, 256, (2, 10)).astype(np.int32)
    results, flops = {}, {}
    for policy in ("none", "full", "dots_saveable", "dots_with_no_batch_dims_saveable"):
        model = load_pretrained(str(tmp_path), mesh=one_device_mesh, scan_layers=scan_layers,
                                remat_policy=policy)
        assert model.config.remat_mode == policy
        embeds = model.module.embed_tokens(jnp.asarray(ids))

        def loss(e, model=model):
            logits, _ = forward(model.graphdef, model.state, embeds=e)
            return jnp.sum(jax.nn.log_softmax(logits)[..., 7])

        results[policy] = jax.jit(jax.value_and_grad(loss))(embeds)
        cost = jax.jit(jax.value_and_grad(loss)).lower(embeds).compile().cost_analysis()
        flops[policy] = (cost[0] if isinstance(cost, (list, tuple)) else cost)["flops"]
        remat_in_graph = "remat" in str(jax.make_jaxpr(loss)(embeds))  # jax.checkpoint's primitive
        assert remat_in_graph == (policy != "none")
    value, grad = results["none"]
    assert float(jnp.abs(grad).max()) > 1e-3
    # the dots policies keep the projections (named; the matmul is a custom_vjp): less is
    # recomputed than under "full", more than under "none"
    assert flops["none"] < flops["dots_saveable"] < flops["full"], flops
    assert flops["dots_with_no_batch_dims_saveable"] < flops["full"], flops
    for policy, (v, g) in results.items():
        np.testing.assert_allclose(float(v), float(value), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(g), np.asarray(grad), atol=1e-5, rtol=1e-5)  # |grad| up to ~20: float32 rounding


def test_remat_policy_is_checked():
    base = dict(model_type="llama", vocab_size=8, hidden_size=8, intermediate_size=8, num_layers=1,
                num_heads=2, num_kv_heads=2, head_dim=4)
    with pytest.raises(ValueError, match="remat_policy='most'"):
        ModelConfig(**base, remat_policy="most")
    with pytest.raises(ValueError, match="contradicts"):
        ModelConfig(**base, remat=True, remat_policy="none")
    assert ModelConfig(**base, remat=True).remat_mode == "full"
    assert ModelConfig(**base).remat_mode == "none"
