"""Ahead-of-time compilation for a TPU slice on this CPU machine (libtpu from the test
extra): the tiny model's update step and decode step compile for v5e-4 with fsdp 2 x
tensor 2, and the compiled programs keep the weights (and the KV cache) sharded. The
update's splash attention calls are found and their counts modelled; a scanned model's
counts scaled to all its layers match an unrolled compile."""

import re

import numpy as np
import pytest
from jax.sharding import NamedSharding

from activemem_jax.tooling import aot, topologies
from activemem_jax.models import ModelConfig
from activemem_jax.models.kernel_costs import splash_cost, splash_tag

# tests/rl/conftest.py's tiny Llama, as config.json fields (no weights are needed to compile)
TINY = dict(model_type="llama", vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, rms_norm_eps=1e-5,
            tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)
SLICE = "v5e-4"


@pytest.fixture(scope="module")
def setup():
    from configs.activemem_tiny_cpu import get_config

    cfg = get_config()
    cfg.mesh.update(data=1, fsdp=2, tensor=2)
    cfg.train.update(mini_batch_rows=8, micro_batch_rows=4)
    cfg.engine.update(max_slots=8, max_len=256)
    model_cfg = ModelConfig.from_hf_dict(TINY, **aot.runtime_options(cfg.model))
    devices = topologies.slice_devices(SLICE)
    mesh = topologies.slice_mesh(SLICE, devices, 1, 2, 2)
    return cfg, model_cfg, mesh, dict(cfg.sharding.rules)


def _compile(c, mesh):
    return aot.compile_report(c.name, c.jitted, c.args, c.kwargs, c.work, mesh, topologies.get_slice(SLICE).chip)


def _not_replicated(sharding) -> bool:
    return isinstance(sharding, NamedSharding) and not sharding.is_fully_replicated


def test_slice_devices_are_tpus(setup):
    _, _, mesh, _ = setup
    assert mesh.devices.size == 4 and dict(mesh.shape) == {"data": 1, "fsdp": 2, "tensor": 2}
    assert all(d.platform == "tpu" for d in mesh.devices.flat)


@pytest.fixture(scope="module")
def update(setup):
    cfg, model_cfg, mesh, rules = setup
    step = aot.train_functions(cfg, model_cfg, mesh, rules, length=128, algos=("grpo",))[0]
    return (step,) + _compile(step, mesh)


def test_update_step_compiles_with_sharded_weights(setup, update):
    update, report, compiled = update
    assert report.fits and report.temp > 0 and report.flops > 0 and report.bytes_accessed > 0
    state_shardings = compiled.input_shardings[0][2]  # (params, opt_state, backbone state, batch)
    flat = {".".join(map(str, p)): s for p, s in _leaves_with_path(state_shardings)}
    for name in ("embedding", "layers.0.attn.q_proj.kernel", "layers.1.mlp.down_proj.kernel"):
        key = next((k for k in flat if k.startswith(name)), None)
        assert key is not None, (name, sorted(flat)[:8])
        assert _not_replicated(flat[key]), (key, flat[key])
    # each device holds a part of the weights: less than the whole backbone's bytes
    whole = sum(int(np.prod(a.shape)) * a.dtype.itemsize for a in _leaves(update.args[2]))
    on_device = sum(_device_bytes(a) for a in _leaves(update.args[2]))
    assert on_device < 0.6 * whole, (on_device, whole)


def test_splash_calls_are_found_and_modelled(setup, update):
    """"auto" is splash on the TPU slice. Per device and micro-batch of 4 rows: 2 rows
    (fsdp 2), 2 of 4 query heads and 1 of 2 KV heads (tensor 2), 128 tokens, head_dim 16;
    each of the 2 layers runs the forward (saving residuals; no remat), dq and dkv."""
    _, model_cfg, _, _ = setup
    _, report, _ = update
    assert model_cfg.attention == "auto" and not model_cfg.remat
    tag = splash_tag(2, 2, 1, 128, 128, 16, 2, 0)
    parts = [splash_cost(tag, "fwd", residuals=True), splash_cost(tag, "dq"), splash_cost(tag, "dkv")]
    k = report.kernels
    assert k.phases == {"fwd": 2, "dq": 2, "dkv": 2}
    assert k.flops == 2 * sum(p.flops for p in parts) == 2 * 2 * 2 * (2 + 3 + 4) * (2 * 128 * 128 * 16)
    assert k.bytes == 2 * sum(p.bytes for p in parts)
    assert report.modelled and 0 < report.modelled_share < 1
    assert report.estimate == pytest.approx(report.xla_seconds + k.seconds)
    assert report.total_flops == report.flops + k.flops


def test_scanned_counts_scale_to_the_unrolled_model(setup):
    """The log-prob pass of a 3-layer scanned model: XLA counts its layer body once;
    whole_model's counts (the pass unrolled at 1 and 2 layers, extended to 3) equal a
    3-layer unrolled compile's, splash calls included."""
    cfg, model_cfg, mesh, rules = setup
    three = model_cfg.replace(num_layers=3)
    one, two = aot.layer_configs(three.replace(scan_layers=True))
    reports = {}
    for name, mc in (("scanned", three.replace(scan_layers=True)), ("one", one), ("two", two), ("three", three)):
        step = aot.train_functions(cfg, mc, mesh, rules, length=128, algos=("grpo",))[1]
        reports[name] = _compile(step, mesh)[0]
    scanned, three = reports["scanned"], reports["three"]
    assert scanned.per_layer and scanned.mfu != scanned.mfu  # no MFU from one layer's counts
    assert scanned.kernels.phases == {"fwd": 1}  # the loop body, once
    whole = aot.whole_model(scanned, reports["one"], reports["two"], 3)
    assert whole.kernels.phases == three.kernels.phases == {"fwd": 3}
    assert whole.kernels.flops == three.kernels.flops
    assert whole.flops == pytest.approx(three.flops, rel=1e-3)
    assert whole.bytes_accessed == pytest.approx(three.bytes_accessed, rel=1e-3)
    assert whole.xla_seconds == pytest.approx(three.xla_seconds, rel=1e-3)
    assert whole.temp == scanned.temp and whole.layers == 3 and whole.mfu == whole.mfu


@pytest.mark.parametrize("decode_attention", ["xla", "auto"])
def test_decode_step_compiles_for_the_slice(setup, decode_attention):
    """The tiny model with head_dim 128 (a paper model's; at 16 the compiler pads the
    minor dimension and relays every block out whatever the layout): the cache stays
    sharded, and the decode step writes and reads the cache blocks in their own layout,
    with no copy of a whole block (keys stored [head_dim, n] were copied to head_dim minor
    and back in every step: docs/attention_kernels.md). "auto" is the paged kernel on
    the TPU slice: the cache is one page array each for keys and values, and each layer's
    kernel call is found and counted as reading its pages once."""
    cfg, _, mesh, rules = setup
    model_cfg = ModelConfig.from_hf_dict(dict(TINY, hidden_size=256, num_attention_heads=2),
                                         **{**aot.runtime_options(cfg.model), "decode_attention": decode_attention})
    assert model_cfg.head_dim == 128
    prefill, decode = aot.engine_functions(cfg, model_cfg, mesh, rules)
    report, compiled = _compile(decode, mesh)
    assert report.fits and report.work.tokens == cfg.engine.max_slots
    paged = decode.args[1].cache.pages is not None
    assert paged == (decode_attention == "auto")
    if paged:  # 2 layers unrolled; per device: the slots of its data x fsdp share, 1 of 2 KV heads
        kv_len = decode.kwargs["kv_len"]
        assert report.kernels.phases == {"decode": model_cfg.num_layers}
        cache = decode.args[1].cache
        local = cache.k.sharding.shard_shape(cache.k.shape)  # [KV, pages, size, head_dim] on one device
        rows = local[1] // (model_cfg.num_layers * cache.pages.per_row)
        assert rows < cfg.engine.max_slots and local[0] == 1  # the pages are split by rows and heads
        keys = rows * local[0] * kv_len * 128 * cache.k.dtype.itemsize  # one layer's keys up to kv_len
        assert 2 * keys * model_cfg.num_layers <= report.kernels.bytes <= 2.2 * keys * model_cfg.num_layers
    else:
        assert report.kernels.calls == 0
    weights = {".".join(map(str, p)): s for p, s in _leaves_with_path(compiled.input_shardings[0][0])}
    assert _not_replicated(weights[next(k for k in weights if "q_proj" in k)])
    cache = compiled.input_shardings[0][1].cache
    k_blocks = [s for s in _leaves(cache) if isinstance(s, NamedSharding)]
    assert k_blocks and all(_not_replicated(s) for s in k_blocks), k_blocks[:2]
    blocks = _leaves(decode.args[1].cache.k) + _leaves(decode.args[1].cache.v)
    per_device = {tuple(b.sharding.shard_shape(b.shape)) for b in blocks}
    copied = [line.strip()[:160] for line in compiled.as_text().splitlines()
              if (m := re.match(r"\s*(?:ROOT )?%\S+ = \w+\[([0-9,]*)\]\{[^}]*\} copy\(", line))
              and tuple(int(d) for d in m.group(1).split(",") if d) in per_device]
    assert not copied, copied


def test_bad_topology_and_mesh_are_one_line_errors():
    with pytest.raises(topologies.TopologyError, match="unknown topology 'v5p-7'"):
        topologies.get_slice("v5p-7")
    with pytest.raises(topologies.TopologyError, match="3 does not divide the 8 devices of v5e-8"):
        topologies.mesh_sizes("v5e-8", 8, 1, -1, 3)
    with pytest.raises(topologies.TopologyError, match="= 2 devices; v5p-8 has 4"):
        topologies.mesh_sizes("v5p-8", 4, 1, 2, 1)
    assert topologies.mesh_sizes("v5p-16", 8, 1, -1, 4) == (1, 2, 4)


def _leaves(tree):
    import jax

    return jax.tree.leaves(tree)


def _leaves_with_path(tree):
    import jax

    return [(tuple(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k))) for k in path), leaf)
            for path, leaf in jax.tree_util.tree_leaves_with_path(tree)]


def _device_bytes(a) -> int:
    shard = a.sharding.shard_shape(a.shape)
    return int(np.prod(shard)) * a.dtype.itemsize


def test_table_marks_modelled_and_whole_model_rows(capsys):
    """launch/aot.py's table: a row with kernels shows MFU as an upper bound and the
    kernels' share of its time; a scaled scanned row is marked L, an unscaled one ¹."""
    from activemem_jax.models.kernel_costs import ModelledKernels
    from activemem_jax.tooling.aot_report import print_table

    chip = topologies.get_slice(SLICE).chip
    base = dict(devices=4, args=2 ** 30, temp=2 ** 30, out=0, alias=0, flops=100e12, bytes_accessed=1e9,
                seconds=1.0, compile_s=1.0, hbm=16 * 2 ** 30, peak=100e12, bandwidth=1e12)
    modelled = aot.Report(name="update", work=aot.Work(1000, 400e12, scanned=True), layers=28,
                          kernels=ModelledKernels(calls=3, flops=50e12, bytes=1e9, seconds=1.0,
                                                  phases={"fwd": 1, "dq": 1, "dkv": 1}), **base)
    per_layer = aot.Report(name="logprobs", work=aot.Work(1000, 400e12, scanned=True), **base)
    assert modelled.mfu == pytest.approx(400e12 / 4 / (2.0 * 100e12)) and modelled.modelled_share == 0.5
    print_table([modelled, per_layer], chip, "header")
    update_line, logp_line = [line for line in capsys.readouterr().out.splitlines()
                              if line.startswith(("update", "logprobs"))]
    assert "<=50%" in update_line and "150.00L" in update_line and "50% modelled" in update_line
    cells = logp_line.split()  # one layer's counts: no MFU, tok/s or kernels
    assert cells[6] == "100.00¹" and cells[9:12] == ["-", "-", "-"], cells


def test_the_moe_backbone_counts_its_active_weights_and_cuts_to_one_and_two_layers():
    """Qwen3-30B-A3B from `ARCHITECTURES`: 30.5B parameters, 3.35B active; its model FLOPs
    count the router and 8 of 128 experts a layer; whole_model's 1- and 2-layer copies keep
    their sparse MLPs."""
    cfg = aot.model_config("/nowhere/Qwen3-30B-A3B-Instruct-2507", {})
    assert cfg.moe_layers == (True,) * 48 and cfg.rope.theta == 1e7
    assert round(cfg.num_params / 1e9, 2) == 30.53 and round(cfg.num_active_params / 1e9, 2) == 3.35
    d, e, k, f = 2048, 128, 8, 768
    projections = d * 32 * 128 * 2 + d * 4 * 128 * 2
    assert aot.forward_flops(cfg, 1, 0, 0) == 2.0 * 48 * (projections + d * e + k * 3 * d * f)
    one, two = aot.layer_configs(cfg.replace(scan_layers=True))
    assert one.moe_layers == (True,) and two.moe_layers == (True, True) and not two.scan_layers
