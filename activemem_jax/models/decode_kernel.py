"""The engine's decode attention through a paged kernel (`model.decode_attention`).

    xla     `decoder.attend` over the cache's blocks (the CPU default)
    paged   jax's Pallas paged-attention kernel over the paged cache (`models/kv_pages.py`):
            `jax.experimental.pallas.ops.tpu.paged_attention` on TPU (off a TPU in Pallas
            interpret mode: what the CPU tests run), `...ops.gpu.paged_attention` on GPU
    auto    paged on TPU and GPU, xla elsewhere

A decode step's query reads its row's keys at positions [0, slot], slot the position it
just wrote: the kernels take a length per row, not a mask. That is exactly the engine's
cache: a slot's prompt is prefilled from position 0 and every token after it goes to the
next position, so a row's masked positions all lie past its length
(`tests/models/test_decode_kernel.py` checks tokens and log-probs against the XLA path,
prefix reuse included). A pass whose rows have masked positions inside their length
(left padding) must not take this path; `Decoder` sends only the engine's one-token
decode steps on a paged cache here.

Sharding: under `shard_map`, KV heads (and the query heads grouped on them) over the
axes the cache's heads are sharded on, and the page axis over its batch axes. With
every slot stepped (rows None) each device attends its own rows. With a few rows
(`generate(rows=...)`, global slot ids) every device takes the queries, attends the rows
it holds, zeroes the others, and a sum over the batch axes puts each row's output
together ([R, H, D] a layer, small next to the cache).

Cost accounting (`models/kernel_costs.py`): each call runs under a named scope spelling
its per-device shape (`paged_tag`) and is counted as reading every page up to the step's
`kv_len` once, the kernel's floor, since the lengths are only known when it runs.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec

from activemem_jax import sharding as shd
from activemem_jax.models import kv_pages

DECODE_IMPLEMENTATIONS = ("auto", "xla", "paged")


def check_decode(value: str) -> str:
    if value not in DECODE_IMPLEMENTATIONS:
        raise ValueError(f"model.decode_attention={value!r}: use one of {', '.join(DECODE_IMPLEMENTATIONS)}")
    return value


def resolve_decode(requested: str, platform: str) -> str:
    """What `requested` means on `platform`: auto is paged on TPU and GPU."""
    check_decode(requested)
    if requested == "auto":
        return "paged" if platform in ("tpu", "gpu") else "xla"
    return requested


def paged_cache(cfg, mesh=None) -> bool:
    """Whether a model of config `cfg` on `mesh` decodes through the paged kernel, so
    its engine keeps the cache in pages (the platform of the mesh, else this process's)."""
    platform = mesh.devices.flat[0].platform if mesh is not None else jax.default_backend()
    return resolve_decode(cfg.decode_attention, platform) == "paged"


def paged_tag(rows: int, heads: int, kv_heads: int, pages: int, size: int, head_dim: int, itemsize: int) -> str:
    """The named scope of one paged decode call (per-device shapes)."""
    return f"pageddecode_b{rows}_h{heads}_kv{kv_heads}_p{pages}_s{size}_d{head_dim}_e{itemsize}"


def _divisor(n: int, most: int) -> int:
    """The largest power of two <= most dividing n."""
    return next(c for c in (16, 8, 4, 2, 1) if c <= most and n % c == 0)


def _kernel(platform: str, interpret: bool, q, k_pages, v_pages, lengths, ids):
    """One device's call: q [b, H, D] (already scaled), pages [KV, P, size, D]."""
    if platform == "gpu":
        from jax.experimental.pallas.ops.gpu import paged_attention as gpu_paged

        splits = _divisor(ids.shape[1], 16)
        return gpu_paged.paged_attention(q, k_pages, v_pages, ids, lengths, pages_per_compute_block=1,
                                         k_splits=splits, interpret=interpret)
    from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention as tpu_paged

    def call():
        # the kernel multiplies f32 queries by bf16 keys; Mosaic refuses that under a float32
        # contract precision (a process-wide "highest" asks for one): traced under the default
        with jax.default_matmul_precision("default"):
            return tpu_paged(q, k_pages, v_pages, lengths, ids, pages_per_compute_block=_divisor(ids.shape[1], 8))

    if not interpret:
        return call()
    from jax.experimental.pallas import tpu as pltpu

    with pltpu.force_tpu_interpret_mode():
        return call()


def paged_decode(plan, q, kv, at, interpret: bool | None = None):
    """q [B, 1, H, D]: one decode token a row; kv: a paged `LayerKV` (after this step's
    write); at: the step's `CacheIndex` (slots [B, 1], rows None or [B] global slot ids,
    span = kv_len). Returns [B, 1, H, D] in the cache's dtype. interpret: run the Pallas
    kernel in interpret mode (default: when the plan's platform is neither TPU nor GPU)."""
    pages: kv_pages.Pages = kv.pages
    b, t, h, d = q.shape
    if t != 1:
        raise ValueError(f"the paged decode kernel takes one query a row, got {t}")
    count = pages.count(at.span)
    platform = "gpu" if plan.platform == "gpu" else "tpu"
    interpret = plan.platform not in ("tpu", "gpu") if interpret is None else interpret
    qs = (q[:, 0].astype(jnp.float32) / math.sqrt(d)).astype(kv.k.dtype)
    lengths = jnp.clip(at.slots[:, 0] + 1, 1, at.span).astype(jnp.int32)
    layer = jnp.asarray(kv.layer if kv.layer is not None else 0, jnp.int32)
    per_row = pages.layers * pages.per_row

    def local(qs, k_pages, v_pages, rows, lengths, base):
        local_rows = k_pages.shape[1] // per_row
        mine = rows - base
        owned = (mine >= 0) & (mine < local_rows)
        ids = pages.ids(jnp.clip(mine, 0, local_rows - 1), layer, count)  # this device's pages
        tag = paged_tag(qs.shape[0], qs.shape[1], k_pages.shape[0], count, pages.size, d, k_pages.dtype.itemsize)
        with jax.named_scope(tag):
            out = _kernel(platform, interpret, qs, k_pages, v_pages, jnp.where(owned, lengths, 1), ids)
        return jnp.where(owned[:, None, None], out.astype(k_pages.dtype), 0)

    mesh = plan.mesh
    rows = jnp.arange(b, dtype=jnp.int32) if at.rows is None else at.rows.astype(jnp.int32)
    if mesh is None or mesh.size == 1:
        out = local(qs, kv.k, kv.v, rows, lengths, jnp.int32(0))
        return out[:, None]
    spec = shd.logical_to_spec(kv.k.shape, kv_pages.AXES, mesh, plan.rules)
    heads, batch = (tuple(spec) + (None, None))[:2]
    head_axes = (heads,) if isinstance(heads, str) else tuple(heads or ())
    batch_axes = (batch,) if isinstance(batch, str) else tuple(batch or ())
    if h % int(np.prod([mesh.shape[a] for a in head_axes] or [1])):
        raise ValueError(f"{h} query heads do not split over the mesh axes {head_axes} the KV heads are sharded on")
    shards = int(np.prod([mesh.shape[a] for a in batch_axes] or [1]))
    own_rows = at.rows is None and shards > 1 and b % shards == 0 and b == pages.rows
    page_spec = PartitionSpec(heads, batch)

    def body(qs, k_pages, v_pages, rows, lengths):
        if own_rows:  # this device's rows, in order: base is its first row
            return local(qs, k_pages, v_pages, rows, lengths, jax.lax.axis_index(batch_axes) * qs.shape[0])
        if not batch_axes:
            return local(qs, k_pages, v_pages, rows, lengths, jnp.int32(0))
        base = jax.lax.axis_index(batch_axes) * (k_pages.shape[1] // per_row)
        return jax.lax.psum(local(qs, k_pages, v_pages, rows, lengths, base), batch_axes)

    row_axes = batch if own_rows else None
    out = jax.shard_map(body, mesh=mesh, in_specs=(PartitionSpec(row_axes, heads), page_spec, page_spec,
                                                   PartitionSpec(row_axes), PartitionSpec(row_axes)),
                        out_specs=PartitionSpec(row_axes, heads), check_vma=False)(qs, kv.k, kv.v, rows, lengths)
    return out[:, None]


__all__ = ["DECODE_IMPLEMENTATIONS", "check_decode", "paged_cache", "paged_decode", "paged_tag", "resolve_decode"]
