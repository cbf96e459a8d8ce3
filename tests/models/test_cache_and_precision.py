"""The blocked KV cache equals a full recompute across block boundaries, and bf16 weights
with float32 activations (the fast CPU decode mode) track float32 in value and gradient."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from activemem_jax.models import KVCache, forward, load_pretrained
from activemem_jax.models.decoder import matmul
from activemem_jax.models.kv_cache import KV_BLOCK
from tests.models.tiny_hf import make_tiny


def test_cached_steps_across_blocks_equal_full_forward(tmp_path, one_device_mesh):
    """Prefill 510 tokens in two chunks into a 600-row cache (blocks 256, 256, 88), then
    decode 4 tokens one at a time across the 512-row block boundary; and the same after a
    one-call prefill from row 0."""
    make_tiny(tmp_path, "llama_gqa3_llama3rope", max_position_embeddings=1024)
    model = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    module = model.module
    rng = np.random.default_rng(0)
    seq = rng.integers(3, model.config.vocab_size, size=514).astype(np.int32)
    full, _ = forward(model.graphdef, model.state, tokens=jnp.asarray(seq)[None])

    cache = KVCache.init(model.config, 1, 600)
    assert [b.shape[-2] for b in cache.k[0]] == [KV_BLOCK, KV_BLOCK, 88]
    got = []
    for lo, hi in [(0, 256), (256, 510), (510, 511), (511, 512), (512, 513), (513, 514)]:
        at = jnp.arange(lo, hi, dtype=jnp.int32)[None]
        logits, _, cache = module(jnp.asarray(seq[lo:hi])[None], positions=at, cache=cache, slots=at,
                                  kv_len=512 if hi <= 512 else None)
        got.append(np.asarray(logits[0]))
    got = np.concatenate(got)
    np.testing.assert_allclose(got, np.asarray(full[0]), atol=1e-4, rtol=0)
    assert np.asarray(cache.mask).sum() == 514

    # a prompt starting at row 0 (slots=None) attends only to itself, yet fills the cache
    fresh = KVCache.init(model.config, 1, 600)
    logits, _, fresh = module(jnp.asarray(seq[:510])[None], cache=fresh)
    np.testing.assert_allclose(np.asarray(logits[0]), np.asarray(full[0, :510]), atol=1e-4, rtol=0)
    at = jnp.arange(510, 514, dtype=jnp.int32)[None]
    logits, _, _ = module(jnp.asarray(seq[510:])[None], positions=at, cache=fresh, slots=at)
    np.testing.assert_allclose(np.asarray(logits[0]), np.asarray(full[0, 510:]), atol=1e-4, rtol=0)


@pytest.mark.parametrize("transpose_w", [False, True])
def test_matmul_gradients(transpose_w):
    """float32: equal to plain autodiff. bf16 weights: equal to autodiff of the same product
    on bf16-rounded inputs, up to the bf16 rounding of the cotangent."""
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal((2, 5, 24)), jnp.float32)
    w32 = jnp.asarray(rng.standard_normal((16, 24) if transpose_w else (24, 16)), jnp.float32)
    target = jnp.asarray(rng.standard_normal((2, 5, 16)), jnp.float32)

    def ref(x, w):
        return jnp.sum((x @ (w.T if transpose_w else w) - target) ** 2)

    def ours(x, w):
        return jnp.sum((matmul(x, w, transpose_w) - target) ** 2)

    for a, b in zip(jax.grad(ours, (0, 1))(x, w32), jax.grad(ref, (0, 1))(x, w32)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)

    w16 = w32.astype(jnp.bfloat16)
    x16 = x.astype(jnp.bfloat16).astype(jnp.float32)
    dx, dw = jax.grad(ours, (0, 1))(x, w16)
    assert dx.dtype == jnp.float32 and dw.dtype == jnp.bfloat16
    rx, rw = jax.grad(ref, (0, 1))(x16, w16.astype(jnp.float32))
    for a, b in [(dx, rx), (dw, rw)]:
        a, b = np.asarray(a, np.float32), np.asarray(b)
        assert np.abs(a - b).max() < 0.02 * np.abs(b).max()


def test_bf16_weights_f32_activations(tmp_path, one_device_mesh):
    make_tiny(tmp_path, "qwen3_odd_head_dim")
    f32 = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    mixed = load_pretrained(str(tmp_path), dtype="bfloat16", activation_dtype="float32",
                            mesh=one_device_mesh)
    assert str(mixed.state["layers"][0]["mlp"]["up_proj"]["kernel"].get_value().dtype) == "bfloat16"
    assert KVCache.init(mixed.config, 1, 8).k[0][0].dtype == jnp.float32
    ids = np.arange(3, 40)[None]
    a, b = f32.logits(ids), mixed.logits(ids)
    assert (a.argmax(-1) == b.argmax(-1)).mean() > 0.9
    assert 0 < np.abs(a - b).max() < 0.1

    embeds = f32.module.embed_tokens(jnp.arange(3, 15)[None])
    assert embeds.dtype == jnp.float32 and mixed.module.embed_tokens(jnp.arange(3, 15)[None]).dtype == jnp.float32

    def grad(model):
        def scalar(e):
            logits, _ = forward(model.graphdef, model.state, embeds=e)
            return jnp.sum(logits[:, -1, :7] ** 2)
        return np.asarray(jax.jit(jax.grad(scalar))(embeds))

    g32, g16 = grad(f32), grad(mixed)
    assert np.abs(g16 - g32).max() < 0.1 * np.abs(g32).max()


def test_unknown_activation_dtype_is_refused(tmp_path, one_device_mesh):
    make_tiny(tmp_path, "llama_tied_mha")
    with pytest.raises(ValueError, match="activation_dtype='float16'"):
        load_pretrained(str(tmp_path), activation_dtype="float16", mesh=one_device_mesh)
