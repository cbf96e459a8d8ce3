"""The backbone is frozen, yet gradients flow through it to its input embeddings."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from activemem_jax.models import BackboneWeight, forward, load_pretrained
from tests.models.tiny_hf import make_tiny


def _embeds_grad(model, embeds):
    def scalar(e):
        logits, _ = forward(model.graphdef, model.state, embeds=e)
        return jnp.sum(logits[:, -1, :7] ** 2)

    return jax.jit(jax.grad(scalar))(embeds)


def test_grad_wrt_input_embeddings_is_finite_and_nonzero(tmp_path, one_device_mesh):
    make_tiny(tmp_path, "qwen3_odd_head_dim")
    model = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    embeds = model.module.embed_tokens(jnp.arange(3, 15)[None])
    g = np.asarray(_embeds_grad(model, embeds))
    assert g.shape == embeds.shape
    assert np.isfinite(g).all()
    assert np.abs(g[0, 0]).max() > 0  # the first token influences the last one's logits


def test_no_backbone_weight_is_trainable(tmp_path, one_device_mesh):
    torch_model = make_tiny(tmp_path, "qwen2_bias_gqa3")
    model = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    module = model.module
    assert len(jax.tree.leaves(nnx.state(module, nnx.Param))) == 0
    frozen = jax.tree.leaves(nnx.state(module, BackboneWeight))
    n_torch = sum(p.numel() for p in torch_model.parameters())  # shared tied weights once
    assert sum(x.size for x in frozen) == model.config.num_params == n_torch


def test_remat_gives_the_same_gradient(tmp_path, one_device_mesh):
    make_tiny(tmp_path, "llama_tied_mha")
    plain = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    remat = load_pretrained(str(tmp_path), mesh=one_device_mesh, remat=True)
    embeds = plain.module.embed_tokens(jnp.arange(3, 13)[None])
    np.testing.assert_allclose(_embeds_grad(plain, embeds), _embeds_grad(remat, embeds), atol=1e-6)

    def jaxpr(m):
        return str(jax.make_jaxpr(lambda e: forward(m.graphdef, m.state, embeds=e))(embeds))

    assert "remat" in jaxpr(remat) and "remat" not in jaxpr(plain)
