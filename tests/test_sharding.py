"""On 8 fake CPU devices, sharded loading and forward equal the unsharded result."""

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from activemem_jax import sharding as shd
from activemem_jax.models import load_pretrained
from tests.models.tiny_hf import left_padded_batch, make_tiny


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny_mistral")
    make_tiny(d, "mistral_gqa3", vocab_size=512)
    return str(d)


def test_a_minus_one_axis_takes_the_remaining_devices():
    mesh = shd.make_mesh(data=2, fsdp=-1, tensor=2)
    assert dict(mesh.shape) == {"data": 2, "fsdp": 2, "tensor": 2}
    assert sorted(d.id for d in mesh.devices.flat) == sorted(d.id for d in jax.devices())
    assert dict(shd.host_mesh().shape) == {"data": 1, "fsdp": len(jax.local_devices()), "tensor": 1}
    with pytest.raises(ValueError, match="at most one mesh axis may be -1"):
        shd.make_mesh(data=-1, fsdp=-1)


@pytest.mark.parametrize("axes", [dict(fsdp=2, tensor=4), dict(data=8)])
def test_sharded_forward_equals_unsharded(tiny_dir, axes):
    ids, mask = left_padded_batch(np.random.default_rng(0), 512, [16, 9, 12, 3, 16, 7, 1, 10], 16)
    unsharded = load_pretrained(tiny_dir, mesh=shd.make_mesh(devices=jax.devices()[:1]))
    expected = unsharded.logits(ids, mask)

    mesh = shd.make_mesh(**axes)
    model = load_pretrained(tiny_dir, mesh=mesh)
    q = model.state["layers"][0]["attn"]["q_proj"]["kernel"].get_value()
    emb = model.state["embedding"].get_value()
    if axes.get("tensor") == 4:
        assert q.sharding.spec == P("tensor", "fsdp")  # kernels are [out, in]
        assert emb.sharding.spec == P("tensor", "fsdp")
        assert q.addressable_shards[0].data.shape == (q.shape[0] // 4, q.shape[1] // 2)
    else:
        assert q.sharding.spec == P(None, None)  # no fsdp/tensor axis: weights replicated
    assert len(q.sharding.device_set) == 8
    got = model.logits(ids, mask)
    real = mask.astype(bool)
    np.testing.assert_allclose(got[real], expected[real], atol=1e-5, rtol=0)


def test_rules_drop_mesh_axes_that_do_not_divide():
    mesh = shd.make_mesh(fsdp=2, tensor=4)
    assert shd.logical_to_spec((576, 576), ("embed", "heads"), mesh) == P("fsdp", "tensor")
    assert shd.logical_to_spec((9, 64), ("heads", None), mesh) == P(None, None)
    assert shd.logical_to_spec((8, 3), ("batch", None), mesh) == P("fsdp", None)
    custom = {"heads": None, "embed": ["fsdp", "tensor"]}
    assert shd.logical_to_spec((576, 576), ("embed", "heads"), mesh, custom) == P(("fsdp", "tensor"), None)


def test_mesh_needs_enough_devices():
    with pytest.raises(ValueError, match="needs 16 devices"):
        shd.make_mesh(data=2, fsdp=8)
