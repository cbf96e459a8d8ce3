"""Time a config's own jitted steps on the devices at hand (a lent GPU, a TPU VM), at the
config's shapes, mesh and rules: the functions `aot.py` compiles for a slice, run for real.

    cfg = config_flags...                       # e.g. configs/activemem_qwen2_5_1_5b.py
    model_cfg, fns = config_functions(cfg, ("update_grpo", "logprobs", "decode"), length=2048)
    peak, bandwidth = device_peaks(jax.devices()[0].device_kind)
    print(format_rows([time_function(f, model_cfg, peak, bandwidth) for f in fns]))

Weights and inputs are random (or zero where they index): a step's time does not depend
on the values, so a paper-size model needs no checkpoint here. MFU is the model's useful
FLOPs (`aot.forward_flops`) per device over the measured time against the device's dense
bf16 peak; the decode step's roofline is the HBM bytes it must read each step (its
weights and the KV rows it attends to) over the device's bandwidth.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from activemem_jax.tooling import aot

FUNCTIONS = ("update_grpo", "update_sft", "logprobs", "prefill", "decode")

# dense bf16 peak FLOP/s and HBM bytes/s per device, by device kind (vendor figures)
DEVICES = {"H200": (989e12, 4.8e12), "H100": (989e12, 3.35e12), "A100": (312e12, 2.0e12),
           "L4": (121e12, 0.3e12), "TPU v4": (275e12, 1.23e12), "TPU v5 lite": (197e12, 0.82e12),
           "TPU v5e": (197e12, 0.82e12), "TPU v5p": (459e12, 2.77e12), "TPU v5": (459e12, 2.77e12),
           "TPU v6": (918e12, 1.64e12)}


def device_peaks(kind: str) -> tuple[Optional[float], Optional[float]]:
    """(peak FLOP/s, HBM bytes/s) of a device kind, or (None, None) when unknown (CPU)."""
    for name, peaks in sorted(DEVICES.items(), key=lambda kv: -len(kv[0])):
        if name.lower() in kind.lower():
            return peaks
    return None, None


@dataclasses.dataclass
class Timing:
    name: str
    seconds: float              # per call, median of the timed calls
    tokens: int                 # tokens one call processes
    model_flops: float          # useful FLOPs of one call, all devices
    devices: int
    read_bytes: float = 0.0     # HBM bytes one call must read, per device (decode roofline)
    peak_flops: Optional[float] = None
    hbm_bytes_per_s: Optional[float] = None
    note: str = ""

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds

    @property
    def mfu(self) -> Optional[float]:
        if not self.peak_flops or not self.model_flops:
            return None
        return self.model_flops / self.devices / self.seconds / self.peak_flops

    @property
    def roofline_tokens_per_s(self) -> Optional[float]:
        if not self.hbm_bytes_per_s or not self.read_bytes:
            return None
        return self.tokens * self.hbm_bytes_per_s / self.read_bytes


@functools.lru_cache(maxsize=None)
def _maker(shape: tuple, dtype, sharding):
    """One jitted generator per (shape, dtype, placement): layers that share a shape
    share its compile."""
    def make(key):
        if jnp.issubdtype(dtype, jnp.floating):
            return (0.02 * jax.random.normal(key, shape, jnp.float32)).astype(dtype)
        if dtype == jnp.bool_:
            return jnp.ones(shape, bool)
        return jnp.zeros(shape, dtype)

    return jax.jit(make, out_shardings=sharding)


def materialize(tree, seed: int = 0):
    """Concrete arrays for abstract ones (each placed by its sharding): floats small random
    normals, integers zero (they index), booleans true."""
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(jax.random.PRNGKey(seed), max(len(leaves), 1))
    out = []
    for x, key in zip(leaves, keys):
        if isinstance(x, jax.ShapeDtypeStruct):
            x = _maker(tuple(x.shape), jnp.dtype(x.dtype), getattr(x, "sharding", None))(key)
        out.append(x)
    return jax.tree.unflatten(treedef, out)


def _materialize_state(state, seed: int):
    """An nnx State of abstract variables -> the same with concrete random values."""
    from flax import nnx

    flat = []
    for i, (path, var) in enumerate(nnx.to_flat_state(state)):
        flat.append((path, var.replace(materialize(var.get_value(), seed + i))))
    return nnx.from_flat_state(flat)


def _concrete_args(fn: aot.Compilable, seed: int):
    from flax import nnx

    out = []
    for i, a in enumerate(fn.args):
        if isinstance(a, nnx.State):
            out.append(_materialize_state(a, seed + 1000 * i))
        elif isinstance(a, dict) and set(a) == {"controller", "lora"}:
            out.append({k: _materialize_state(v, seed + 1000 * i) if isinstance(v, nnx.State) else materialize(v)
                        for k, v in a.items()})
        else:
            out.append(materialize(a, seed + 1000 * i))
    return tuple(out)


def decode_read_bytes(model_cfg, slots: int, kv_len: int, devices: int) -> float:
    """HBM bytes one decode step must read per device: every weight once and the K and V
    rows of every slot up to kv_len (spread evenly over the devices). A mixture of experts
    counts every expert (`num_params`, not `num_active_params`): a step of 64 slots picking
    8 of 128 experts each leaves about 2 of a layer's experts unread."""
    weight_bytes = model_cfg.num_params * jnp.dtype(model_cfg.dtype).itemsize
    act = jnp.dtype(model_cfg.act_dtype).itemsize
    kv = 2 * slots * kv_len * model_cfg.num_layers * model_cfg.num_kv_heads * model_cfg.head_dim * act
    return (weight_bytes + kv) / devices


def config_functions(cfg, names: Sequence[str], length: int, mesh=None):
    """(the backbone's ModelConfig, the config's jitted steps that `aot.py` compiles) over
    the local devices."""
    from activemem_jax import build

    unknown = sorted(set(names) - set(FUNCTIONS))
    if unknown:
        raise ValueError(f"functions {unknown}: choose from {', '.join(FUNCTIONS)}")
    mesh = mesh or build.mesh(cfg)
    rules = build.rules(cfg)
    model_cfg = aot.model_config(cfg.model.path, aot.runtime_options(cfg.model, platform=None))
    out = aot.named_train_functions(cfg, model_cfg, mesh, rules, length, set(names))
    if {"prefill", "decode"} & set(names):
        out += [c for c in aot.engine_functions(cfg, model_cfg, mesh, rules) if c.name.split()[0] in names]
    return model_cfg, out


def _deleted(tree) -> bool:
    return any(isinstance(x, jax.Array) and x.is_deleted() for x in jax.tree.leaves(tree))


def time_function(fn: aot.Compilable, model_cfg, peak_flops: Optional[float] = None,
                  hbm_bytes_per_s: Optional[float] = None, calls: int = 5, seed: int = 0) -> Timing:
    """Run `fn` once (compiling it), then time `calls` calls (median). Arguments a call
    donated are made afresh, untimed, before the next."""
    args = list(_concrete_args(fn, seed))
    times = []
    for i in range(calls + 1):
        if i:
            fresh = _concrete_args(fn, seed) if any(_deleted(a) for a in args) else None
            args = [f if _deleted(a) else a for a, f in zip(args, fresh or args)]
        jax.block_until_ready(args)
        t0 = time.perf_counter()
        jax.block_until_ready(fn.jitted(*args, **fn.kwargs))
        if i:
            times.append(time.perf_counter() - t0)
    timing = Timing(fn.name, float(np.median(times)), fn.work.tokens, fn.work.model_flops, fn.mesh.size,
                    peak_flops=peak_flops, hbm_bytes_per_s=hbm_bytes_per_s, note=fn.note)
    if fn.name.startswith("decode"):
        timing.read_bytes = decode_read_bytes(model_cfg, int(fn.work.tokens), int(fn.kwargs["kv_len"]),
                                              fn.mesh.size)
    return timing


def format_rows(timings: Sequence[Timing]) -> str:
    cols = ("function", "ms/call", "tokens/s", "TFLOP/s/device", "MFU", "roofline tok/s", "note")
    rows = []
    for t in timings:
        achieved = t.model_flops / t.devices / t.seconds / 1e12 if t.model_flops else 0.0
        rows.append((t.name, f"{1e3 * t.seconds:.1f}", f"{t.tokens_per_s:,.0f}", f"{achieved:.2f}",
                     "-" if t.mfu is None else f"{100 * t.mfu:.1f}%",
                     "-" if t.roofline_tokens_per_s is None else f"{t.roofline_tokens_per_s:,.0f}", t.note))
    widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
    return "\n".join("  ".join(str(x).ljust(w) if i in (0, 6) else str(x).rjust(w)
                               for i, (x, w) in enumerate(zip(row, widths))) for row in (cols, *rows))


def run_config(config_path: str, overrides, names: Sequence[str], length: int, calls: int,
               peak_tflops: float = 0.0, hbm_gbps: float = 0.0) -> dict:
    """What `bench_train --config` / `bench_decode --config` print and write."""
    from activemem_jax import schema
    from activemem_jax.config_files import load_config

    cfg = load_config(config_path, overrides)
    schema.load(cfg)  # every field checked before a model is built
    length = length or int(cfg.engine.max_len)
    kind = jax.devices()[0].device_kind
    peak, bandwidth = device_peaks(kind)
    peak = peak_tflops * 1e12 if peak_tflops else peak
    bandwidth = hbm_gbps * 1e9 if hbm_gbps else bandwidth
    model_cfg, fns = config_functions(cfg, names, length)
    print(f"{os.path.basename(cfg.model.path)} ({model_cfg.num_params / 1e9:.2f}B, {model_cfg.dtype}, "
          f"scan_layers={model_cfg.scan_layers}, remat={model_cfg.remat_mode}), random weights, "
          f"{len(jax.devices())} x {kind}, mesh {dict(fns[0].mesh.shape) if fns else {}}; rows of {length} tokens",
          flush=True)
    timings = []
    for f in fns:
        timings.append(time_function(f, model_cfg, peak, bandwidth, calls=calls))
        print(f"  {f.name}: {1e3 * timings[-1].seconds:.1f} ms/call", flush=True)
    print(format_rows(timings))
    if peak is None:
        print("MFU: unknown device kind; pass --peak-tflops (and --hbm-gbps for the decode roofline)")
    return {"config": config_path, "overrides": list(overrides), "device_kind": kind, "devices": len(jax.devices()),
            "length": length, "rows": [dict(dataclasses.asdict(t), tokens_per_s=t.tokens_per_s, mfu=t.mfu,
                                            roofline_tokens_per_s=t.roofline_tokens_per_s) for t in timings]}


def add_config_args(ap) -> None:
    """The `--config` mode's flags, shared by bench_train and bench_decode."""
    ap.add_argument("--config", default="", help="a training config (configs/*.py): time its own jitted steps "
                    "at its shapes, mesh and rules, random weights (a paper-size model needs no checkpoint)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="with --config: override a config field (repeatable)")
    ap.add_argument("--length", type=int, default=0, help="with --config: tokens per row (0: engine.max_len)")
    ap.add_argument("--calls", type=int, default=5, help="with --config: timed calls per function")
    ap.add_argument("--hbm-gbps", type=float, default=0.0,
                    help="with --config: the device's HBM bandwidth, for the decode roofline (known kinds are looked up)")


__all__ = ["DEVICES", "FUNCTIONS", "Timing", "config_functions", "decode_read_bytes", "device_peaks",
           "format_rows", "materialize", "run_config", "time_function"]
