"""`activemem_jax/tooling/measure.py`: a config's own jitted steps run for real on the local
devices (here 2 of the 8 fake CPU devices, fsdp 2) with random weights at the
config's shapes, timed, with MFU and the decode roofline from the device's peaks."""

import jax
import numpy as np
import pytest

from activemem_jax.tooling import measure
from tests.models.tiny_hf import make_tiny


def test_device_peaks_by_kind():
    assert measure.device_peaks("NVIDIA H200") == (989e12, 4.8e12)
    assert measure.device_peaks("TPU v5 lite") == measure.DEVICES["TPU v5e"]
    assert measure.device_peaks("TPU v5p")[0] == 459e12
    assert measure.device_peaks("cpu") == (None, None)


def test_materialize_keeps_shapes_and_shardings():
    from jax.sharding import NamedSharding, PartitionSpec

    from activemem_jax import sharding as shd

    mesh = shd.make_mesh(data=1, fsdp=2, tensor=2)
    row = NamedSharding(mesh, PartitionSpec("fsdp"))
    tree = {"w": jax.ShapeDtypeStruct((8, 6), np.float32, sharding=row),
            "ids": jax.ShapeDtypeStruct((8,), np.int32), "ok": jax.ShapeDtypeStruct((3,), np.bool_)}
    got = measure.materialize(tree)
    assert got["w"].shape == (8, 6) and got["w"].sharding == row and float(np.std(got["w"])) > 0.005
    assert not np.asarray(got["ids"]).any() and np.asarray(got["ok"]).all()


@pytest.fixture(scope="module")
def tiny_cfg(tmp_path_factory):
    from configs.activemem_tiny_cpu import get_config

    path = tmp_path_factory.mktemp("tiny")
    make_tiny(path, "llama_tied_mha")
    cfg = get_config()
    cfg.model.update(path=str(path), dtype="float32", remat=False)
    cfg.mesh.update(data=1, fsdp=2, tensor=1)
    cfg.train.update(mini_batch_rows=4, micro_batch_rows=2)
    cfg.policy.update(max_tokens=16, capacity=32)
    cfg.engine.update(max_slots=4, max_len=64)
    return cfg


def test_config_steps_run_and_are_timed(tiny_cfg):
    model_cfg, fns = measure.config_functions(tiny_cfg, ("update_grpo", "decode"), length=64)
    assert [f.name.split()[0] for f in fns] == ["update", "decode"]
    assert all(f.mesh.size == 2 for f in fns)
    # two timed calls: the second remakes the arguments the first donated
    timings = [measure.time_function(f, model_cfg, peak_flops=1e12, hbm_bytes_per_s=1e11, calls=2) for f in fns]
    for t in timings:
        assert t.seconds > 0 and t.tokens_per_s > 0 and t.mfu is not None and 0 < t.mfu < 1
    update, decode = timings
    assert update.tokens == 2 * 64  # one micro-batch of 2 rows x 64 tokens
    # the decode step reads every weight and all 4 slots' K/V rows up to its bucket, per device
    kv_len = fns[1].kwargs["kv_len"]
    weights = model_cfg.num_params * 4
    kv = 2 * 4 * kv_len * model_cfg.num_layers * model_cfg.num_kv_heads * model_cfg.head_dim * 4
    assert decode.read_bytes == pytest.approx((weights + kv) / 2)
    assert decode.roofline_tokens_per_s == pytest.approx(4 * 1e11 / decode.read_bytes)
    table = measure.format_rows(timings)
    assert table.count("\n") == 2 and "MFU" in table and "%" in table


def test_unknown_function_is_named(tiny_cfg):
    with pytest.raises(ValueError, match="'generate'"):
        measure.config_functions(tiny_cfg, ("generate",), length=64)
