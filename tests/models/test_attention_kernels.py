"""`model.attention`: the kernel paths against the XLA path on a tiny random model.

splash runs the TPU kernel through Pallas interpret mode; cudnn runs
jax.nn.dot_product_attention through the same code path with implementation="xla" (no
GPU here: the cuDNN kernel itself is never executed by these tests). Compared at the real
(unpadded) positions: padding tokens see other keys on each path (see models/attention.py).
"""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

from activemem_jax import sharding as shd
from activemem_jax.activemem.inject import policy_forward, splice
from activemem_jax.models import ModelConfig, load_from_config, load_pretrained
from activemem_jax.models.attention import AttentionPlan, padded_lengths, resolve
from activemem_jax.models.decoder import Decoder
from activemem_jax.models.decoder import positions_from_mask

D = 32


def tiny(attention: str, mesh=None, rules=None, **kw):
    """(graphdef, state) of a 2-layer GQA decoder (4 query heads, 2 KV heads, scanned
    layers) with random weights, the same weights for every `attention`."""
    cfg = ModelConfig(model_type="qwen2", vocab_size=64, hidden_size=D, intermediate_size=64, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=8, qkv_bias=True, attention=attention,
                      scan_layers=True, **kw)  # one layer body: the interpreted kernel compiles once
    graphdef, state = nnx.split(Decoder(cfg, mesh, rules))
    leaves, tree = jax.tree.flatten(state)
    keys = jax.random.split(jax.random.PRNGKey(0), len(leaves))
    leaves = [0.3 * jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)]
    return graphdef, jax.tree.unflatten(tree, leaves)


def batch():
    """Three rows of 20: left padding, right padding and a full row; two latent slots each."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 64, (3, 20)).astype(np.int32)
    mask = np.ones((3, 20), np.int32)
    mask[0, :6] = 0
    mask[1, 14:] = 0
    latent_pos = np.array([[8, 9], [3, 4], [10, 11]], np.int32)
    latents = jnp.asarray(rng.normal(size=(3, 2, D)), jnp.float32)
    return ids, mask, latent_pos, latents


def hidden_fn(graphdef):
    def run(state, latents, ids, mask, latent_pos):
        model = nnx.merge(graphdef, state)
        embeds = splice(model.embed_tokens(ids), latents, latent_pos)
        _, hidden, _ = model(embeds=embeds, positions=positions_from_mask(mask), attention_mask=mask,
                             return_logits=False)
        return hidden
    return run


@pytest.mark.parametrize("attention", ["splash", "cudnn"])
def test_kernel_hidden_states_and_gradients_equal_xla(attention):
    ids, mask, latent_pos, latents = batch()
    real = mask.astype(bool)
    weights = jnp.asarray(np.random.default_rng(1).normal(size=(3, 20, D)), jnp.float32) * real[..., None]
    out = {}
    for impl in ("xla", attention):
        graphdef, state = tiny(impl)
        run = hidden_fn(graphdef)

        def loss(lat, run=run, state=state):
            hidden = run(state, lat, ids, mask, latent_pos)
            return jnp.sum(hidden * weights), hidden

        (_, hidden), grad = jax.jit(jax.value_and_grad(loss, has_aux=True))(latents)
        out[impl] = np.asarray(hidden), np.asarray(grad)
    np.testing.assert_allclose(out[attention][0][real], out["xla"][0][real], atol=2e-5, rtol=0)
    np.testing.assert_allclose(out[attention][1], out["xla"][1], atol=2e-4, rtol=1e-4)
    assert np.abs(out["xla"][1]).max() > 1e-2  # the latents do reach the loss


class _Stub:
    """A controller whose latents are its input h [B, K * D] reshaped (gradient to h)."""

    def shared(self, h, p_bar):
        return h + 0 * p_bar

    def latents(self, u):
        return u.reshape(u.shape[0], 2, D)


def test_split_prefix_chunks_through_splash():
    """policy_forward's split (a shared one-row prefix, a per-row forward-only chunk, then
    the differentiated chunk reading the cached prefix) with splash equals XLA, values
    and gradients; the chunks use the kernel (query_start), not the XLA fallback."""
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 64, (2, 40)).astype(np.int32)
    ids[1, :16] = ids[0, :16]
    mask = np.ones((2, 40), np.int32)
    mask[0, 20:24] = 0  # a gap after the row's own prefix
    mask[1, 36:] = 0
    latent_pos = np.array([[24, 25], [24, 25]], np.int32)
    h = jnp.asarray(rng.normal(size=(2, 2 * D)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(2, 16, D)), jnp.float32) * mask[:, 24:, None]
    out = {}
    for impl in ("xla", "splash"):
        graphdef, state = tiny(impl)

        def loss(h, state=state, graphdef=graphdef):
            hidden, _ = policy_forward(nnx.merge(graphdef, state), _Stub(), ids, mask, latent_pos, h,
                                       jnp.zeros_like(h), split=(16, 24))
            return jnp.sum(hidden * w), hidden

        (_, hidden), grad = jax.jit(jax.value_and_grad(loss, has_aux=True))(h)
        out[impl] = np.asarray(hidden), np.asarray(grad)
        if impl == "splash":  # the prefix, the middle chunk and the last chunk each call the kernel
            assert str(jax.make_jaxpr(loss)(h)).count("pallas_call") == 3
    real = mask[:, 24:].astype(bool)
    np.testing.assert_allclose(out["splash"][0][real], out["xla"][0][real], atol=2e-5, rtol=0)
    np.testing.assert_allclose(out["splash"][1], out["xla"][1], atol=2e-4, rtol=1e-4)


def test_sharded_splash_equals_unsharded():
    """On 8 fake devices (fsdp 4 x tensor 2): rows over fsdp, heads over tensor inside
    the kernel's shard_map; the same hidden states as one device's."""
    mesh = shd.make_mesh(fsdp=4, tensor=2)
    ids, mask, latent_pos, latents = batch()
    ids, mask = np.concatenate([ids, ids[:1]]), np.concatenate([mask, mask[:1]])
    latent_pos, latents = np.concatenate([latent_pos, latent_pos[:1]]), jnp.concatenate([latents, latents[:1]])
    graphdef, state = tiny("splash")
    one = jax.jit(hidden_fn(graphdef))(state, latents, ids, mask, latent_pos)
    sharded_gd, _ = tiny("splash", mesh=mesh)
    assert sharded_gd != graphdef  # the mesh is part of the plan
    rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("fsdp"))
    put = lambda x: jax.device_put(x, rows)  # noqa: E731
    run = jax.jit(hidden_fn(sharded_gd))
    assert "shard_map" in str(jax.make_jaxpr(hidden_fn(sharded_gd))(state, latents, ids, mask, latent_pos))
    many = run(state, put(latents), put(ids), put(mask), put(latent_pos))
    real = mask.astype(bool)
    np.testing.assert_allclose(np.asarray(many)[real], np.asarray(one)[real], atol=2e-5, rtol=0)


def test_padding_keeps_every_padded_query_a_key():
    assert padded_lengths(128, 256) == (128, 256)
    assert padded_lengths(20, 20) == (128, 128)
    assert padded_lengths(16, 40) == (128, 128)
    assert padded_lengths(100, 128) == (128, 256)  # queries padded, keys full: one more key tile


def test_auto_picks_by_platform_and_bad_values_are_one_line_errors():
    assert resolve("auto", "tpu") == "splash"
    assert resolve("auto", "gpu") == "cudnn"
    assert resolve("auto", "gpu", "float32") == "xla"
    assert resolve("auto", "cpu") == "xla"
    assert resolve("splash", "cpu") == "splash"  # interpret mode
    assert AttentionPlan.build("auto").impl == "xla"  # this CPU process
    with pytest.raises(ValueError, match=r"^model\.attention='flash': use one of auto, xla, splash, cudnn$"):
        ModelConfig(model_type="llama", vocab_size=8, hidden_size=8, intermediate_size=8, num_layers=1,
                    num_heads=1, num_kv_heads=1, head_dim=8, attention="flash")
    with pytest.raises(ValueError, match=r"model\.attention='flash'"):
        load_from_config(ml_collections.ConfigDict(dict(path="embedded", attention="flash")))
    with pytest.raises(ValueError, match=r"^model\.attention='cudnn' needs a GPU; this run's devices are cpu"):
        load_pretrained("embedded", attention="cudnn")


def test_base_config_carries_the_switch():
    from configs.activemem_base import base_config

    assert base_config().model.attention == "auto"
