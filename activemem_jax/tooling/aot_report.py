"""What one ahead-of-time compile says about a jitted step, with the two corrections XLA's
own counts need (`activemem_jax/tooling/aot.py` builds the steps; `print_table` prints these for `launch/aot.py`).

1. Custom kernels. XLA's cost analysis does not look inside a Pallas call (flops -1, a
   time near zero). Every splash call in the compiled program is found by its named
   scope and its FLOPs, bytes and roofline time are modelled (`models/kernel_costs.py`)
   and added: `Report.kernels`. A row with modelled time gives an upper bound on MFU.
2. Scanned layers. XLA counts a loop body once, so a program whose layers run under one
   `lax.scan` is counted for one layer, and its loop body is not even counted like the
   same layer unrolled (the tiny model's log-prob pass: 5% fewer FLOPs per layer, 40% of
   the bytes, and no time estimate for the scanned program). `whole_model` takes the
   counts of the same step with its layers unrolled, compiled at 1 and 2 layers
   (`layer_configs`), and extends them linearly: whole = one + (L - 1) x (two - one),
   exact for unrolled layers (the test compiles 3); the memory stays the scanned
   program's own. A loop over micro-batches stays counted once (an update row is one
   micro-batch's work).

XLA's time is its `optimal_seconds`, else (when it gives none) the roofline of its own
counts; a kernel's time is its roofline; the row's estimate is their sum.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from activemem_jax.tooling import topologies
from activemem_jax.models.kernel_costs import ModelledKernels, modelled_kernels


@dataclasses.dataclass
class Work:
    tokens: int            # tokens one call processes (0: not a token step)
    model_flops: float     # useful FLOPs of one call, whole slice
    # the layers run under one scan: XLA's cost analysis counts the loop body once, so its
    # FLOPs, bytes and time estimate cover one layer until `whole_model` scales them
    scanned: bool = False


@dataclasses.dataclass
class Report:
    name: str
    devices: int
    args: int
    temp: int
    out: int
    alias: int
    flops: float            # per device, compiler's count (kernels excluded)
    bytes_accessed: float   # per device, compiler's count
    seconds: float          # compiler's estimate (0 when it gives none)
    compile_s: float
    work: Work
    hbm: float              # chip HBM bytes
    peak: float             # chip peak FLOP/s
    bandwidth: float        # chip HBM bytes/s
    note: str = ""
    kernels: ModelledKernels = dataclasses.field(default_factory=ModelledKernels)  # modelled, per device
    layers: int = 0         # > 0: whole-model counts scaled from one scanned layer of `layers`

    @property
    def total(self) -> int:
        return self.args + self.temp + self.out - self.alias

    @property
    def fits(self) -> bool:
        return self.total <= self.hbm

    @property
    def compiler_estimate(self) -> bool:
        return self.seconds > 0

    @property
    def xla_seconds(self) -> float:
        """The compiler's estimate, else the roofline of its counts."""
        if self.seconds > 0:
            return self.seconds
        return max(self.flops / self.peak, self.bytes_accessed / self.bandwidth)

    @property
    def estimate(self) -> float:
        """Seconds per call: XLA's part plus the kernels' modelled rooflines."""
        return self.xla_seconds + self.kernels.seconds

    @property
    def total_flops(self) -> float:
        return self.flops + self.kernels.flops

    @property
    def total_bytes(self) -> float:
        return self.bytes_accessed + self.kernels.bytes

    @property
    def modelled(self) -> bool:
        """Part of the time is a kernel's roofline: MFU is an upper bound."""
        return self.kernels.calls > 0

    @property
    def modelled_share(self) -> float:
        return self.kernels.seconds / self.estimate if self.estimate else 0.0

    @property
    def per_layer(self) -> bool:
        """Counts of one scanned layer only (no whole-model scaling)."""
        return self.work.scanned and not self.layers

    @property
    def mfu(self) -> float:
        if not self.estimate or not self.work.model_flops or self.per_layer:
            return float("nan")
        return self.work.model_flops / self.devices / (self.estimate * self.peak)

    @property
    def tokens_per_s(self) -> float:
        if self.per_layer or not self.estimate or not self.work.tokens:
            return float("nan")
        return self.work.tokens / self.estimate

    def to_json(self) -> dict:
        return {"name": self.name, "args": self.args, "temp": self.temp, "out": self.out, "alias": self.alias,
                "total": self.total, "hbm": self.hbm, "fits": self.fits, "flops": self.flops,
                "bytes_accessed": self.bytes_accessed, "compiler_seconds": self.seconds,
                "xla_seconds": self.xla_seconds, "kernel_calls": self.kernels.calls,
                "kernel_phases": dict(self.kernels.phases), "kernel_flops": self.kernels.flops,
                "kernel_bytes": self.kernels.bytes, "kernel_seconds": self.kernels.seconds,
                "total_flops": self.total_flops, "estimate_seconds": self.estimate, "mfu": self.mfu,
                "mfu_upper_bound": self.modelled, "modelled_share": self.modelled_share,
                "tokens_per_s": self.tokens_per_s, "compile_s": self.compile_s, "scanned": self.work.scanned,
                "whole_model_layers": self.layers, "model_flops": self.work.model_flops, "note": self.note}


def _cost(compiled) -> dict:
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else {}
    return dict(cost or {})


def compile_report(name: str, jitted, args, kwargs, work: Work, mesh, chip: topologies.Chip,
                   note: str = "") -> tuple[Report, Any]:
    t0 = time.perf_counter()
    compiled = jitted.lower(*args, **kwargs).compile()
    compile_s = time.perf_counter() - t0
    mem = compiled.memory_analysis()
    cost = _cost(compiled)
    peak, bandwidth = chip.peak_tflops * 1e12, chip.hbm_gbps * 1e9
    report = Report(
        name=name, devices=mesh.size, args=int(mem.argument_size_in_bytes), temp=int(mem.temp_size_in_bytes),
        out=int(mem.output_size_in_bytes), alias=int(getattr(mem, "alias_size_in_bytes", 0)),
        flops=max(float(cost.get("flops", 0.0)), 0.0), bytes_accessed=float(cost.get("bytes accessed", 0.0)),
        seconds=float(cost.get("optimal_seconds", 0.0)), compile_s=compile_s, work=work,
        hbm=chip.hbm_gib * 2 ** 30, peak=peak, bandwidth=bandwidth, note=note,
        kernels=modelled_kernels(compiled.as_text(), peak, bandwidth))
    return report, compiled


def layer_configs(model_cfg):
    """The model unrolled with 1 and with 2 layers (NoPE and sparse-MLP flags cut to match):
    what `whole_model` measures a layer by."""
    def cut(n):
        return model_cfg.replace(num_layers=n, scan_layers=False, rope_layers=tuple(model_cfg.rope_layers[:n]),
                                 moe_layers=tuple(model_cfg.moe_layers[:n]))
    return cut(1), cut(2)


def whole_model(scanned: Report, one: Report, two: Report, layers: int) -> Report:
    """`scanned`'s memory with the counts of all `layers` layers: one + (layers - 1) x
    (two - one), where `one` and `two` are the same step compiled by `layer_configs`."""
    def grow(a: float, b: float) -> float:
        return a + (layers - 1) * (b - a)

    k1, k2 = one.kernels, two.kernels
    kernels = ModelledKernels(calls=int(grow(k1.calls, k2.calls)), flops=grow(k1.flops, k2.flops),
                              bytes=grow(k1.bytes, k2.bytes), seconds=grow(k1.seconds, k2.seconds),
                              phases={p: int(grow(k1.phases.get(p, 0), n)) for p, n in k2.phases.items()})
    # XLA's time in one unit: its estimates where both compiles give one, else (seconds 0)
    # the roofline of the scaled counts, as for any program without an estimate
    both = one.compiler_estimate and two.compiler_estimate
    return dataclasses.replace(scanned, flops=grow(one.flops, two.flops),
                               bytes_accessed=grow(one.bytes_accessed, two.bytes_accessed),
                               seconds=grow(one.seconds, two.seconds) if both else 0.0, kernels=kernels,
                               layers=layers, compile_s=scanned.compile_s + one.compile_s + two.compile_s)


__all__ = ["Report", "Work", "compile_report", "layer_configs", "whole_model"]


def fmt_gib(b: float) -> str:
    return f"{b / 2**30:.2f}"


def print_table(reports, chip, header: str) -> None:
    print(header)
    cols = ("function", "args", "temp", "out", "total GiB", "of HBM", "TFLOP", "GB acc", "est ms", "MFU",
            "tok/s", "kernels", "compile s", "note")
    rows = []
    for r in reports:
        if isinstance(r, tuple):  # (name, error): did not compile
            rows.append((r[0],) + ("-",) * 12 + (r[1],))
            continue
        bound = "<=" if r.modelled else ""
        mfu = "-" if r.mfu != r.mfu or not r.work.model_flops else f"{bound}{100 * r.mfu:.0f}%"
        tps = "-" if r.tokens_per_s != r.tokens_per_s else f"{bound}{r.tokens_per_s:,.0f}"
        fit = f"{100 * r.total / r.hbm:.0f}%" + ("" if r.fits else " NO FIT")
        # ¹: XLA's counts cover one scanned layer; L: scaled to the whole model
        mark = "¹" if r.per_layer else ("L" if r.layers else "")
        kern = f"{100 * r.modelled_share:.0f}% modelled" if r.modelled else "-"
        rows.append((r.name, fmt_gib(r.args), fmt_gib(r.temp), fmt_gib(r.out), fmt_gib(r.total), fit,
                     f"{r.total_flops / 1e12:.2f}{mark}", f"{r.total_bytes / 1e9:.1f}{mark}",
                     ("" if r.compiler_estimate else "~") + f"{1e3 * r.estimate:.1f}{mark}", mfu, tps, kern,
                     f"{r.compile_s:.0f}", r.note))
    widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
    for row in (cols, *rows):
        print("  ".join(str(x).ljust(w) if i in (0, 13) else str(x).rjust(w)
                        for i, (x, w) in enumerate(zip(row, widths))))
