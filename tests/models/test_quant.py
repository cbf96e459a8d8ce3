"""int8 weights with W8A8 matmuls (`quant="int8"`): the matmul tracks the dequantized
weights (also with outlier channels), loading quantizes every matmul weight, sharded equals
unsharded, and the embedded model stays close to float32 through the engine."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from activemem_jax import sharding as shd
from activemem_jax.activemem import init_lora
from activemem_jax.models import load_pretrained
from activemem_jax.models.quant import matmul_int8, quantize_rows
from tests.models.tiny_hf import make_tiny


def test_quantize_rows_bounds():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 40)).astype(np.float32) * np.array([1, 10, 1e-3, 0, 5, 1])[:, None]
    q, scale = quantize_rows(w)
    assert q.dtype == np.int8 and scale.dtype == np.float32 and scale.shape == (6,)
    assert np.abs(q).max() == 127
    err = np.abs(q * scale[:, None] - w)
    assert (err <= scale[:, None] / 2 + 1e-7).all()  # half a step per row, at most
    assert scale[3] == 1 and not q[3].any()  # an all-zero row
    with pytest.raises(ValueError, match="2-D"):
        quantize_rows(np.zeros(4))


def test_int8_matmul_tracks_the_dequantized_weights():
    rng = np.random.default_rng(1)
    q, scale = quantize_rows(rng.standard_normal((24, 64)).astype(np.float32))
    dequant = q.astype(np.float32) * scale[:, None]
    x = rng.standard_normal((3, 5, 64)).astype(np.float32)
    x[..., 7] *= 300.0  # one huge channel, like LLM hidden states carry
    ref = x @ dequant.T
    got = np.asarray(matmul_int8(jnp.asarray(x), jnp.asarray(q), jnp.asarray(scale)))
    assert got.shape == (3, 5, 24)
    # two int8 rows per input row: ~15 bits of the row's range; one row would keep ~7
    np.testing.assert_allclose(got, ref, atol=2e-4 * np.abs(ref).max(), rtol=0)
    one_level = np.round(x / (np.abs(x).max(-1, keepdims=True) / 127)) * (np.abs(x).max(-1, keepdims=True) / 127)
    assert np.abs(got - ref).max() < 0.05 * np.abs(one_level @ dequant.T - ref).max()

    single = np.asarray(matmul_int8(jnp.asarray(x[0, :1]), jnp.asarray(q), jnp.asarray(scale)))
    np.testing.assert_allclose(single, got[0, :1], atol=1e-5, rtol=0)  # the one-row path

    g = rng.standard_normal((3, 5, 24)).astype(np.float32)
    dx = jax.grad(lambda x: jnp.sum(matmul_int8(x, jnp.asarray(q), jnp.asarray(scale)) * g))(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(dx), g @ dequant, atol=1e-4, rtol=1e-5)  # straight-through


def _kl(ref_logits, logits):
    a, b = jax.nn.log_softmax(ref_logits, -1), jax.nn.log_softmax(logits, -1)
    return float((np.exp(a) * (a - b)).sum(-1).mean())


@pytest.mark.parametrize("family", ["llama_tied_mha", "qwen2_bias_gqa3", "llama_gqa3_llama3rope"])
def test_int8_loading_quantizes_every_matmul_weight(tmp_path, one_device_mesh, family):
    make_tiny(tmp_path, family)
    f32 = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    q8 = load_pretrained(str(tmp_path), quant="int8", mesh=one_device_mesh)
    layer = q8.state["layers"][0]
    for lin in (layer["attn"]["q_proj"], layer["attn"]["v_proj"], layer["mlp"]["down_proj"]):
        assert lin["kernel"].get_value().dtype == jnp.int8
        assert lin["kernel_scale"].get_value().shape == lin["kernel"].get_value().shape[:1]
    assert q8.state["embedding"].get_value().dtype == jnp.int8
    assert layer["input_norm"]["scale"].get_value().dtype == jnp.float32  # norms stay float
    if q8.config.qkv_bias:
        assert layer["attn"]["q_proj"]["bias"].get_value().dtype == jnp.float32
    if not q8.config.tie_word_embeddings:
        assert q8.state["lm_head"]["kernel"].get_value().dtype == jnp.int8

    # the stored weights are exactly quantize_rows of the float ones
    w = np.asarray(f32.state["layers"][0]["mlp"]["up_proj"]["kernel"].get_value())
    q, scale = quantize_rows(w)
    np.testing.assert_array_equal(np.asarray(layer["mlp"]["up_proj"]["kernel"].get_value()), q)
    np.testing.assert_array_equal(np.asarray(layer["mlp"]["up_proj"]["kernel_scale"].get_value()), scale)

    ids = np.random.default_rng(2).integers(3, f32.config.vocab_size, size=(2, 24))
    a, b = f32.logits(ids), q8.logits(ids)
    assert 0 < np.abs(a - b).max() < 0.05 * np.abs(a).max()
    assert _kl(a, b) < 1e-3


def test_int8_sharded_equals_unsharded(tmp_path):
    make_tiny(tmp_path, "mistral_gqa3", vocab_size=512)
    ids = np.random.default_rng(3).integers(3, 512, size=(8, 16))
    unsharded = load_pretrained(str(tmp_path), quant="int8", mesh=shd.make_mesh(devices=jax.devices()[:1]))
    sharded = load_pretrained(str(tmp_path), quant="int8", mesh=shd.make_mesh(fsdp=2, tensor=4))
    scale = sharded.state["layers"][0]["attn"]["q_proj"]["kernel_scale"].get_value()
    assert len(scale.sharding.device_set) == 8
    f32 = load_pretrained(str(tmp_path), mesh=shd.make_mesh(devices=jax.devices()[:1])).logits(ids)
    # a different reduction order may flip an activation's rounding (one int8 step of the
    # first row, which the second row takes back to 1/254 of it): far below int8's own error
    got, want = sharded.logits(ids), unsharded.logits(ids)
    assert np.abs(got - want).max() < 0.05 * np.abs(want - f32).max()


def test_bad_quant_and_lora_on_int8_are_refused(tmp_path, one_device_mesh):
    make_tiny(tmp_path, "llama_tied_mha")
    with pytest.raises(ValueError, match="quant='int4'"):
        load_pretrained(str(tmp_path), quant="int4", mesh=one_device_mesh)
    q8 = load_pretrained(str(tmp_path), quant="int8", mesh=one_device_mesh)
    with pytest.raises(ValueError, match="LoRA needs float backbone weights"):
        init_lora(q8.state, rank=2)


@pytest.mark.slow
def test_int8_embedded_model_stays_close_and_decodes_consistently(embedded_model, one_device_mesh):
    """Next-token distributions over real text stay close to float32, and the engine's
    cached greedy decode equals the argmax of a full int8 forward over its own output."""
    from activemem_jax.engine import Engine, SamplingParams

    q8 = load_pretrained("embedded", quant="int8", mesh=one_device_mesh)
    tok = embedded_model.tokenizer
    ids = tok("The lighthouse keeper climbed the stairs every night, counting the steps as the "
              "storm rolled in over the grey sea. He had done this for thirty years.")["input_ids"]
    a, b = embedded_model.logits(ids), q8.logits(ids)
    assert _kl(a, b) < 0.02  # measured 0.005; one int8 row per token gives ~0.06
    assert (a.argmax(-1) == b.argmax(-1)).mean() >= 0.8

    prompt = q8.encode_chat([{"role": "user", "content": "Name three colors."}])
    with Engine(q8, max_slots=2, max_len=256) as eng:
        out = eng.generate([prompt], SamplingParams(temperature=0, max_tokens=12, ignore_eos=True))[0]
    full = q8.logits(prompt + out.token_ids)
    assert out.token_ids == full[len(prompt) - 1:-1].argmax(-1).tolist()


def test_training_on_int8_weights_is_refused(tmp_path):
    from activemem_jax.rl.trainer import Trainer
    from tests.rl import train_config

    cfg = train_config.get_config()
    cfg.out_dir = str(tmp_path)
    cfg.model.quant = "int8"
    with pytest.raises(ValueError, match="int8 weights are for evaluation and serving"):
        Trainer(cfg)
