"""Which attention the decoder runs (`model.attention`), and the kernel paths.

    xla     `decoder.attend`: einsums and one softmax; any platform (the CPU default)
    splash  TPU Pallas splash attention (`jax.experimental.pallas.ops.tpu.splash_attention`):
            no [T, S] score matrix in HBM, fully masked blocks skipped. Off a TPU it runs
            in Pallas interpret mode (exact, slow: what the CPU tests run)
    cudnn   GPU `jax.nn.dot_product_attention(implementation="cudnn")`; off a GPU the same
            call with implementation="xla" (shape and mask plumbing only)
    auto    splash on TPU, cudnn on GPU, xla elsewhere (by the mesh's devices)

A kernel serves a pass whose queries sit at the same static cache slots in every row:
query t at slot `offset + t` (a pass without a cache, a fresh prefill, a training
forward's chunks, which say so with `Decoder.__call__(..., query_start=)`). It reads the keys up
to the last query, [0, offset + T): a chunk attending to a cached prefix is the causal
mask shifted by `offset`. Passes whose rows sit at different slots (the engine's chunked
prefill after a prefix, every decode step) attend through XLA (docs/attention_kernels.md
says why). Padding and left padding are segment ids: a real query (id 1) sees real keys
(id 1), a padding token (id 0) sees padding; rows are never packed, so no other ids occur.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
from typing import Optional

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from activemem_jax import sharding as shd
from activemem_jax.models.kernel_costs import splash_tag

IMPLEMENTATIONS = ("auto", "xla", "splash", "cudnn")
LANES = 128          # splash tiles sequences in multiples of 128
PAD_ID = -1          # segment id of the rows and columns added to reach a tile multiple


def check_attention(value: str) -> str:
    if value not in IMPLEMENTATIONS:
        raise ValueError(f"model.attention={value!r}: use one of {', '.join(IMPLEMENTATIONS)}")
    return value


def resolve(requested: str, platform: str, act_dtype: str = "bfloat16") -> str:
    """What `requested` means on `platform` ("tpu", "gpu", "cpu"); on a GPU "auto" takes
    cuDNN only for bfloat16 activations (it has no float32 flash kernel)."""
    check_attention(requested)
    if requested == "auto":
        if platform == "gpu":
            return "cudnn" if act_dtype == "bfloat16" else "xla"
        return "splash" if platform == "tpu" else "xla"
    return requested


@dataclasses.dataclass(frozen=True)
class AttentionPlan:
    """How one Decoder attends: the implementation (resolved), the mesh a kernel is
    shard_mapped over (None: no shard_map), the logical-axis rules (a hashable tuple),
    the platform compiled for, and the engine's decode attention ("xla" or "paged",
    `models/decode_kernel.py`)."""
    impl: str = "xla"
    mesh: Optional[Mesh] = None
    rules: tuple = ()
    platform: str = "cpu"
    decode: str = "xla"

    @classmethod
    def build(cls, requested: str, mesh: Optional[Mesh] = None, rules=None,
              act_dtype: str = "bfloat16", decode: str = "xla") -> "AttentionPlan":
        from activemem_jax.models.decode_kernel import resolve_decode

        platform = mesh.devices.flat[0].platform if mesh is not None else jax.default_backend()
        table = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in shd.rules_dict(rules).items()))
        return cls(resolve(requested, platform, act_dtype), mesh, table, platform, resolve_decode(decode, platform))

    @property
    def kernel(self) -> bool:
        return self.impl in ("splash", "cudnn")


@flax.struct.dataclass
class Visibility:
    """Which keys each query sees. key_ok [B, T, S]: the xla path's mask; query_mask [B, T]
    and key_mask [B, S]: the real tokens; offset (static): query t sits at cache slot
    offset + t in every row, or None when rows differ (no kernel then)."""
    key_ok: jax.Array
    query_mask: jax.Array
    key_mask: jax.Array
    offset: Optional[int] = flax.struct.field(pytree_node=False, default=None)


def kernel_attend(plan: AttentionPlan, q, k, v, vis: Visibility):
    """q [B, T, H, D]; k, v [B, KV, S, D] with S = vis.offset + T: the keys up to the last
    query. Returns [B, T, H, D] in v's dtype."""
    t, s = q.shape[1], k.shape[2]
    if s != vis.offset + t:
        raise ValueError(f"kernel attention reads the keys up to the last query: {s} keys for {t} queries "
                         f"from slot {vis.offset}")
    if plan.impl == "splash":
        return splash_attend(plan, q, k, v, vis.query_mask[:, :t], vis.key_mask[:, :s], vis.offset)
    if plan.impl == "cudnn":
        return dot_product_attend(q, k, v, vis.key_ok[:, :t, :s], vis.offset,
                                  "cudnn" if plan.platform == "gpu" else "xla")
    raise ValueError(f"no kernel for attention {plan.impl!r}")


# ---------------------------------------------------------------------------- cudnn
def dot_product_attend(q, k, v, key_ok, offset: int, implementation: str):
    """jax.nn.dot_product_attention over q [B, T, H, D], k / v [B, KV, S, D] with the
    boolean mask key_ok [B, T, S]; is_causal when the queries are the keys (offset 0) so
    cuDNN skips the upper triangle. Left padding and mid-row gaps are not sequence
    lengths, so the mask goes in as a mask (cuDNN turns it into a bias)."""
    out = jax.nn.dot_product_attention(
        q, k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), mask=key_ok[:, None],
        is_causal=offset == 0 and q.shape[1] == k.shape[2], implementation=implementation)
    return out.astype(v.dtype)


# ---------------------------------------------------------------------------- splash
def _block(n: int) -> int:
    """The largest of 512, 256, 128 dividing n (a multiple of 128)."""
    return next(b for b in (512, 256, 128) if n % b == 0)


def padded_lengths(t: int, s: int) -> tuple[int, int]:
    """(queries, keys) padded to splash's tiles (`shapes.tile_lengths`)."""
    from activemem_jax.shapes import tile_lengths

    return tile_lengths(t, s, LANES)


@functools.lru_cache(maxsize=64)
def splash_kernel(heads: int, tq: int, sk: int, offset: int, interpret: bool):
    """The splash kernel for `heads` query heads, tq queries (query i at key slot
    offset + i) and sk keys; causal. Cached: its mask is processed on the host."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk_lib
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

    bq, bkv = _block(tq), _block(sk)
    sizes = sk_lib.BlockSizes(block_q=bq, block_kv=bkv, block_kv_compute=bkv, block_q_dkv=bq, block_kv_dkv=bkv,
                              block_kv_dkv_compute=bkv, block_q_dq=bq, block_kv_dq=bkv)
    mask = mask_lib.MultiHeadMask([mask_lib.CausalMask((tq, sk), offset=offset)] * heads)
    with jax.ensure_compile_time_eval():  # its mask tables are constants, never a trace's values
        return sk_lib.make_splash_mha(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret)


def splash_attend(plan: AttentionPlan, q, k, v, query_mask, key_mask, offset: int):
    """q [B, T, H, D]; k, v [B, KV, S, D]; query_mask [B, T], key_mask [B, S]; query t
    sees key s <= offset + t of its own segment. Returns [B, T, H, D]."""
    b, t, h, d = q.shape
    s = k.shape[2]
    tp, sp = padded_lengths(t, s)
    qh = (q.astype(jnp.float32) / math.sqrt(d)).astype(q.dtype).transpose(0, 2, 1, 3)  # [B, H, T, D]
    qh = jnp.pad(qh, ((0, 0), (0, 0), (0, tp - t), (0, 0)))
    k = jnp.pad(k.astype(q.dtype), ((0, 0), (0, 0), (0, sp - s), (0, 0)))
    v = jnp.pad(v.astype(q.dtype), ((0, 0), (0, 0), (0, sp - s), (0, 0)))
    q_ids = jnp.pad(query_mask.astype(jnp.int32), ((0, 0), (0, tp - t)), constant_values=PAD_ID)
    kv_ids = jnp.pad(key_mask.astype(jnp.int32), ((0, 0), (0, sp - s)), constant_values=PAD_ID)
    interpret = plan.platform != "tpu"

    def local(qh, k, v, q_ids, kv_ids):
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk_lib

        kernel = splash_kernel(qh.shape[1], tp, sp, offset, interpret)
        tag = splash_tag(qh.shape[0], qh.shape[1], k.shape[1], tp, sp, d, qh.dtype.itemsize, offset)

        def call(qh, k, v, q_ids, kv_ids):
            return jax.vmap(lambda q1, k1, v1, a, c: kernel(q1, k1, v1, segment_ids=sk_lib.SegmentIds(a, c)))(
                qh, k, v, q_ids, kv_ids)

        # Mosaic refuses a float32 contract precision on bf16 operands (a process-wide
        # jax_default_matmul_precision="highest" asks for one); bf16 has no more to give
        precision = "default" if qh.dtype == jnp.bfloat16 else None
        return traced_in(call, tag, precision)(qh, k, v, q_ids, kv_ids)

    out = shard_heads(plan, local, qh, k, v, q_ids, kv_ids)
    return out[:, :, :t].transpose(0, 2, 1, 3).astype(v.dtype)


def traced_in(fn, scope: str, precision: Optional[str]):
    """fn(q, k, v, q_ids, kv_ids) traced, forward and backward, under the named scope
    `scope` (what `kernel_costs` finds the calls by) and `jax.default_matmul_precision(
    precision)`: a kernel's body reads the setting when it is traced, and its backward is
    traced later, outside any `with` around the call."""
    def context():
        stack = contextlib.ExitStack()
        stack.enter_context(jax.named_scope(scope))
        stack.enter_context(jax.default_matmul_precision(precision))
        return stack

    @jax.custom_vjp
    def run(q, k, v, q_ids, kv_ids):
        with context():
            return fn(q, k, v, q_ids, kv_ids)

    def fwd(q, k, v, q_ids, kv_ids):
        with context():
            return jax.vjp(lambda q, k, v: fn(q, k, v, q_ids, kv_ids), q, k, v)

    def bwd(vjp_fn, g):
        with context():
            return (*vjp_fn(g), None, None)

    run.defvjp(fwd, bwd)
    return run


def shard_heads(plan: AttentionPlan, fn, q, k, v, q_ids, kv_ids):
    """fn on each device's rows and heads (shard_map over plan.mesh): rows over the
    rules' batch axes, heads over their kv_heads axes when those divide both head counts,
    everything else replicated. Without a mesh (or on one device) fn runs as is."""
    mesh = plan.mesh
    if mesh is None or mesh.size == 1:
        return fn(q, k, v, q_ids, kv_ids)
    spec = shd.logical_to_spec((k.shape[0], k.shape[1]), ("batch", "kv_heads"), mesh, plan.rules)
    rows, heads = (tuple(spec) + (None, None))[:2]
    head_axes = (heads,) if isinstance(heads, str) else tuple(heads or ())
    if q.shape[1] % int(np.prod([mesh.shape[a] for a in head_axes] or [1])):
        heads = None
    big, ids = PartitionSpec(rows, heads), PartitionSpec(rows)
    return jax.shard_map(fn, mesh=mesh, in_specs=(big, big, big, ids, ids), out_specs=big,
                         check_vma=False)(q, k, v, q_ids, kv_ids)


__all__ = ["IMPLEMENTATIONS", "AttentionPlan", "Visibility", "check_attention", "dot_product_attend",
           "kernel_attend", "padded_lengths", "resolve", "splash_attend", "splash_kernel"]
