"""What a custom kernel costs, since XLA's cost analysis does not look inside one.

A Pallas kernel is a `tpu_custom_call` to XLA: `cost_analysis()` gives it flops -1 and a
time near zero (seen compiling for TPU slices on this CPU machine). Each splash call and
each paged decode call (`decode_kernel.paged_tag`, `paged_cost`) therefore runs under a
named scope that spells out its shape (`splash_tag`); the compiled
program's text names that scope in the custom call's metadata, with the splash phase
(fwd, dq, dkv) in splash's own scope. `modelled_kernels(hlo_text)` finds every such call
and counts it the way XLA counts everything else: once per instruction, so a loop body
(a scan over layers or micro-batches) counts once.

The count per call is analytic, per device (the shapes are the shard_map's local ones):
- FLOPs: the matmuls over the key blocks the causal mask does not skip (a block runs
  whole when any of its pairs is visible): forward QK^T and PV (2 matmuls of
  2 * bq * bkv * D each per block and head); dq recomputes QK^T and forms dP = dO V^T and
  dQ = dS K (3); dkv recomputes QK^T and forms dV, dP, dK (4). So a backward is 3.5x its
  forward, and a forward recomputed under remat counts again (it is another call).
- bytes: what the kernel streams from HBM: its q-side rows once per head (q and o; q, dO
  and dQ; ...) and the other side's block once per visited block (a key and value block
  per query block in the forward and dq; a query, dO, logsumexp and di block per key
  block in dkv); 4-byte logsumexp / di rows where they are read or written.
- time: the roofline max(FLOPs / peak, bytes / HBM bandwidth) of each call: what the chip
  could do at best, so a row whose time includes it gives an upper bound on MFU.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

_PAGED = re.compile(r"pageddecode_b(\d+)_h(\d+)_kv(\d+)_p(\d+)_s(\d+)_d(\d+)_e(\d+)")
_TAG = re.compile(r"splash_b(\d+)_h(\d+)_kv(\d+)_tq(\d+)_tk(\d+)_d(\d+)_e(\d+)_off(\d+)")
_PHASE = re.compile(r"splash_m[hq]a_(fwd|dq|dkv)(?:_segmented)?(_residuals|_no_residuals)?")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
LSE_BYTES = 4  # float32 logsumexp / di per query row


def splash_tag(rows: int, heads: int, kv_heads: int, tq: int, tk: int, head_dim: int, itemsize: int,
               offset: int) -> str:
    """The named scope of one splash call (per-device shapes)."""
    return f"splash_b{rows}_h{heads}_kv{kv_heads}_tq{tq}_tk{tk}_d{head_dim}_e{itemsize}_off{offset}"


def _block(n: int) -> int:
    return next(b for b in (512, 256, 128) if n % b == 0)


def causal_blocks(tq: int, tk: int, bq: int, bkv: int, offset: int) -> int:
    """Blocks (query block i, key block j) holding at least one visible pair (key <= query +
    offset): the blocks splash runs."""
    i = np.arange(tq // bq)[:, None]
    j = np.arange(tk // bkv)[None, :]
    return int(np.sum(j * bkv <= (i + 1) * bq - 1 + offset))


@dataclasses.dataclass(frozen=True)
class KernelCost:
    flops: float
    bytes: float

    def seconds(self, peak: float, bandwidth: float) -> float:
        return max(self.flops / peak, self.bytes / bandwidth)


def splash_cost(tag: str, phase: str, residuals: bool = False) -> KernelCost:
    """FLOPs and HBM bytes of one splash call in `phase` ("fwd", "dq", "dkv")."""
    m = _TAG.fullmatch(tag)
    if m is None:
        raise ValueError(f"not a splash tag: {tag!r}")
    b, h, _, tq, tk, d, e, offset = map(int, m.groups())
    bq, bkv = _block(tq), _block(tk)
    n = causal_blocks(tq, tk, bq, bkv, offset)
    pair = 2.0 * bq * bkv * d  # one bq x bkv x d matmul
    if phase == "fwd":
        matmuls = 2
        streamed = tq * d * e * 2 + n * 2 * bkv * d * e + (tq * LSE_BYTES if residuals else 0)
    elif phase == "dq":
        matmuls = 3
        streamed = tq * d * e * 3 + tq * LSE_BYTES * 2 + n * 2 * bkv * d * e
    elif phase == "dkv":
        matmuls = 4
        streamed = tk * d * e * 4 + n * (2 * bq * d * e + 2 * bq * LSE_BYTES)
    else:
        raise ValueError(f"splash phase {phase!r}: fwd, dq or dkv")
    return KernelCost(flops=b * h * n * matmuls * pair, bytes=float(b * h * streamed))


def paged_cost(tag: str) -> KernelCost:
    """FLOPs and HBM bytes of one paged decode call (`decode_kernel.paged_tag`): every
    page up to the step's kv_len read once (its lengths are only known at run time, so
    this is the step's worst case and the kernel's floor at once), QK^T and PV over those
    positions, q and the output once, a length and a page id per row and page."""
    m = _PAGED.fullmatch(tag)
    if m is None:
        raise ValueError(f"not a paged decode tag: {tag!r}")
    b, h, kv, pages, size, d, e = map(int, m.groups())
    positions = pages * size
    return KernelCost(flops=4.0 * b * h * positions * d,
                      bytes=float(2 * b * kv * positions * d * e + 2 * b * h * d * e + 4 * b + 4 * b * pages))


@dataclasses.dataclass
class ModelledKernels:
    calls: int = 0
    flops: float = 0.0
    bytes: float = 0.0
    seconds: float = 0.0
    phases: dict = dataclasses.field(default_factory=dict)  # phase -> calls (a paged decode: "decode")


_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%[\w.\-]+ = ")


def _instructions(hlo_text: str):
    """The program's instructions, one string each (an instruction's attributes may span
    several lines: a kernel's frontend attributes hold a multi-line JSON)."""
    current: list[str] = []
    for line in hlo_text.splitlines():
        if _INSTRUCTION.match(line) or line.strip() == "}":
            if current:
                yield "\n".join(current)
            current = [line] if _INSTRUCTION.match(line) else []
        elif current:
            current.append(line)
    if current:
        yield "\n".join(current)


def modelled_kernels(hlo_text: str, peak: float, bandwidth: float) -> ModelledKernels:
    """The splash and paged decode calls of a compiled program (its `as_text()`), each instruction once, with
    their modelled FLOPs, bytes and roofline seconds per device."""
    out = ModelledKernels()
    for line in _instructions(hlo_text):
        if 'custom_call_target="tpu_custom_call"' not in line or "custom-call(" not in line:
            continue
        name = _OP_NAME.search(line)
        paged = _PAGED.search(name.group(1)) if name else None
        tag = _TAG.search(name.group(1)) if name else None
        if paged is not None:
            cost, kind = paged_cost(paged.group(0)), "decode"
        elif tag is not None:
            phase = _PHASE.search(name.group(1))
            if phase is None:
                raise ValueError(f"a splash call without its phase in its op name: {name.group(1)[:200]}")
            cost, kind = splash_cost(tag.group(0), phase.group(1), phase.group(2) == "_residuals"), phase.group(1)
        else:
            continue
        out.calls += 1
        out.flops += cost.flops
        out.bytes += cost.bytes
        out.seconds += cost.seconds(peak, bandwidth)
        out.phases[kind] = out.phases.get(kind, 0) + 1
    return out


__all__ = ["KernelCost", "ModelledKernels", "causal_blocks", "modelled_kernels", "paged_cost", "splash_cost",
           "splash_tag"]
