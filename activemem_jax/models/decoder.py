"""One Flax NNX decoder for Llama, Mistral, Qwen2/2.5, Qwen3, SmolLM3 and Qwen3-MoE (config switches).

The backbone is frozen: its weights are `BackboneWeight` variables, not `nnx.Param`,
so an optimizer over `nnx.Param` (the controller, LoRA) never sees them. Each weight
carries logical axis names (`axes=`) that `activemem_jax.sharding` maps to the mesh.

Entry point: `Decoder.__call__(tokens | embeds, positions, attention_mask, cache=None,
slots=None, query_start=None)`. `slots` are the KV-cache rows each token is written to;
a query attends to cache rows `<=` its own slot whose mask is set, so left and right
padding, prefill and decode are one code path. Without a cache the sequence is its own cache. The cache
(`models/kv_cache.py`) does its own writes and reads; each layer gets its view of it.
Layers are unrolled, or stacked and scanned (`ModelConfig.scan_layers`), each under the
remat policy the config names. Attention runs through XLA (`attend`) or a kernel
(`ModelConfig.attention`; `models/attention.py`). A layer's MLP is dense SwiGLU (`MLP`) or,
where `ModelConfig.moe_layers` says so, a dropless mixture of experts (`SparseMoE`).
"""

from __future__ import annotations

import functools
import math
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.ad_checkpoint import checkpoint_name

from activemem_jax.models.attention import AttentionPlan, Visibility, kernel_attend
from activemem_jax.models.config import ModelConfig, RopeConfig
from activemem_jax.models.decode_kernel import paged_decode
from activemem_jax.models.kv_cache import CacheIndex, KVCache, LayerKV
from activemem_jax.models.quant import matmul_int8


def positions_from_mask(attention_mask):
    """RoPE positions that skip padding: 0 at each row's first real token."""
    mask = jnp.asarray(attention_mask, jnp.int32)
    return jnp.maximum(jnp.cumsum(mask, axis=-1) - 1, 0)


PROJECTION = "projection"  # checkpoint name of every Linear's output


class BackboneWeight(nnx.Variable):
    """A frozen backbone weight (never in `nnx.state(model, nnx.Param)`)."""


def _zeros(shape, dtype):
    # Weights are replaced by the loader; eval_shape never materializes these.
    return jnp.zeros(shape, dtype)


class Linear(nnx.Module):
    """y = x W^T + b with the kernel stored [d_out, d_in], Hugging Face's own layout: loading
    needs no transpose, and small-batch matmuls read each output's weights contiguously
    (bf16 matmuls at 16 rows ~1.5x faster on CPU than [d_in, d_out]). axes = (in_axis, out_axis)."""

    def __init__(self, d_in: int, d_out: int, axes: tuple[str, str], *, bias: bool, dtype, quant: str = ""):
        self.kernel = BackboneWeight(_zeros((d_out, d_in), jnp.int8 if quant else dtype), axes=(axes[1], axes[0]))
        # quant="int8": one float32 scale per output row (see models/quant.py)
        self.kernel_scale = BackboneWeight(_zeros((d_out,), jnp.float32), axes=(axes[1],)) if quant else None
        self.bias = BackboneWeight(_zeros((d_out,), dtype), axes=(axes[1],)) if bias else None

    def __call__(self, x):
        if self.kernel_scale is not None:
            y = matmul_int8(x, self.kernel[...], self.kernel_scale[...])
        else:
            y = matmul(x, self.kernel[...], transpose_w=True)
        if self.bias is not None:
            y = y + self.bias[...]
        # `matmul` is a custom_vjp, which remat's dots policies do not see as a dot: the name
        # lets them keep projection outputs (REMAT_POLICIES)
        return checkpoint_name(y, PROJECTION)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def matmul(x, w, transpose_w: bool = False):
    """x [..., K] @ w [K, N] (or w [N, K] with transpose_w): inputs in w's dtype, float32
    accumulation, result in x's dtype, so bf16 weights can serve f32 activations. The
    backward pass keeps the same rule (cotangents cast to w's dtype): left to autodiff, a
    mixed f32 x bf16 product would fall off the fast bf16 path."""
    if x.size == x.shape[-1] and w.dtype == jnp.bfloat16:
        # one row: XLA CPU's bf16 matrix-vector path is ~3x slower than two rows
        y = _dot(jnp.concatenate([x.reshape(1, -1)] * 2).astype(w.dtype), w, 1, 1 if transpose_w else 0)
        return y[:1].reshape(x.shape[:-1] + y.shape[-1:]).astype(x.dtype)
    return _dot(x.astype(w.dtype), w, x.ndim - 1, 1 if transpose_w else 0).astype(x.dtype)


def _dot(a, b, a_dim: int, b_dim: int):
    dims = (((a_dim,), (b_dim,)), ((), ()))
    return jax.lax.dot_general(a, b, dims, preferred_element_type=jnp.float32)


def _matmul_fwd(x, w, transpose_w):
    return matmul(x, w, transpose_w), (x, w)


def _matmul_bwd(transpose_w, res, g):
    x, w = res
    g = g.astype(w.dtype)
    dx = _dot(g, w, g.ndim - 1, 0 if transpose_w else 1).astype(x.dtype)
    xs, gs = x.reshape(-1, x.shape[-1]).astype(w.dtype), g.reshape(-1, g.shape[-1])
    dw = _dot(gs, xs, 0, 0) if transpose_w else _dot(xs, gs, 0, 0)
    return dx, dw.astype(w.dtype)


matmul.defvjp(_matmul_fwd, _matmul_bwd)


class RMSNorm(nnx.Module):
    def __init__(self, dim: int, eps: float, dtype):
        self.scale = BackboneWeight(_zeros((dim,), dtype), axes=("norm",))
        self.eps = eps

    def __call__(self, x):
        xf = x.astype(jnp.float32)
        xf = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + self.eps)
        return self.scale[...] * xf.astype(x.dtype)


def rope_inv_freq(rope: RopeConfig, head_dim: int) -> np.ndarray:
    """Inverse frequencies [head_dim // 2] (float32), with Llama-3 scaling if configured."""
    exponents = np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / head_dim
    inv_freq = (1.0 / (rope.theta ** exponents)).astype(np.float32)
    if rope.rope_type == "llama3":
        old = rope.original_max_position_embeddings
        low_wavelen = old / rope.low_freq_factor
        high_wavelen = old / rope.high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        scaled = np.where(wavelen > low_wavelen, inv_freq / rope.factor, inv_freq)
        smooth = (old / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor)
        smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        inv_freq = np.where(medium, smoothed, scaled).astype(np.float32)
    return inv_freq


def apply_rope(x, cos, sin):
    """x [B, T, H, D]; cos/sin [B, T, D/2] (float32). Rotate-half convention (HF)."""
    half = x.shape[-1] // 2
    xf = x.astype(jnp.float32)
    x1, x2 = xf[..., :half], xf[..., half:]
    c, s = cos[:, :, None, :], sin[:, :, None, :]
    out = jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    return out.astype(x.dtype)


class Attention(nnx.Module):
    def __init__(self, cfg: ModelConfig, dtype):
        d, h, kv, hd = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.num_heads, self.num_kv_heads, self.head_dim = h, kv, hd
        lin = functools.partial(Linear, dtype=dtype, quant=cfg.quant)
        self.q_proj = lin(d, h * hd, ("embed", "heads"), bias=cfg.qkv_bias)
        self.k_proj = lin(d, kv * hd, ("embed", "kv_heads"), bias=cfg.qkv_bias)
        self.v_proj = lin(d, kv * hd, ("embed", "kv_heads"), bias=cfg.qkv_bias)
        self.o_proj = lin(h * hd, d, ("heads", "embed"), bias=cfg.o_bias)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(hd, cfg.rms_norm_eps, dtype)
            self.k_norm = RMSNorm(hd, cfg.rms_norm_eps, dtype)
        else:
            self.q_norm = self.k_norm = None

    def __call__(self, x, cos, sin, vis: Visibility, kv: Optional[LayerKV], at: Optional[CacheIndex],
                 causal_prefix: bool = False, plan: Optional[AttentionPlan] = None):
        """x [B,T,D]; vis: which keys each query sees (vis.key_ok [B,T,S] bool); kv: this
        layer's cache (or None) and `at` where this pass's tokens go in it. causal_prefix:
        the queries occupy cache rows 0..T-1, so they attend only to each other (causally,
        skipping keys past each chunk) and the cache is written, never read. plan: a
        kernel serves the pass when its queries sit at static slots (vis.offset).
        Returns (out [B,T,D], kv after the write)."""
        b, t, _ = x.shape
        q = self.q_proj(x).reshape(b, t, self.num_heads, self.head_dim)
        k = self.k_proj(x).reshape(b, t, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).reshape(b, t, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)  # [B,KV,T,hd]
        if kv is not None:
            kv = kv.write(k, v, at)
        if kv is not None and kv.pages is not None and t == 1 and not causal_prefix and plan is not None \
                and plan.decode == "paged":  # the engine's decode step on its paged cache
            out = paged_decode(plan, q, kv, at)
            return self.o_proj(out.reshape(b, t, -1)), kv
        if plan is not None and plan.kernel and vis.offset is not None:
            out = kernel_attend(plan, q, *self._kernel_keys(k, v, kv, at, causal_prefix, vis.offset + t), vis)
            return self.o_proj(out.reshape(b, t, -1)), kv
        if kv is None or causal_prefix:  # this pass's own keys are all there is to read
            s = vis.key_ok.shape[-1]
            keys, values = [k[:, :, :s]], [v[:, :, :s]]
        else:
            keys, values = kv.read(at)
        out = attend(q, keys, values, vis.key_ok, causal_prefix)
        return self.o_proj(out.reshape(b, t, -1)), kv

    @staticmethod
    def _kernel_keys(k, v, kv, at, causal_prefix: bool, end: int):
        """The keys and values [B,KV,end,hd] a kernel reads: this pass's own, or the cache's
        blocks (after this pass's write) joined and cut at the last query's slot."""
        if kv is None or causal_prefix:
            return k[:, :, :end], v[:, :, :end]
        k_blocks, v_blocks = kv.read(at)
        return jnp.concatenate(k_blocks, axis=-2)[:, :, :end], jnp.concatenate(v_blocks, axis=-2)[:, :, :end]


def attend(q, k_blocks, v_blocks, key_ok, causal_prefix: bool):
    """Grouped-query attention, heads-first layout (fastest on CPU and TPU alike).

    q [B,T,H,D]; k_blocks / v_blocks [B,KV,n_i,D]: the S keys and values in order;
    key_ok [B,T,S] bool. With `causal_prefix` (one block; query t sits in row t), queries
    are split into a few chunks that read only the keys up to their own end, skipping
    most of the masked upper triangle.
    """
    b, t, h, d = q.shape
    kv = k_blocks[0].shape[1]
    qh = q.reshape(b, t, kv, h // kv, d).transpose(0, 2, 3, 1, 4)  # [B,KV,G,T,D]
    chunk = max(128, -(-t // 8))
    if causal_prefix:
        (kh,), (vh,) = k_blocks, v_blocks
        bounds = [(i, min(i + chunk, t)) for i in range(0, t, chunk)]
        outs = [_attend_blocks(qh[:, :, :, lo:hi], [kh[:, :, :hi]], [vh[:, :, :hi]],
                               key_ok[:, lo:hi, :hi]) for lo, hi in bounds]
        out = outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=3)
    else:
        out = _attend_blocks(qh, k_blocks, v_blocks, key_ok)
    return out.transpose(0, 3, 1, 2, 4)  # [B,T,KV,G,D]


def _attend_blocks(qh, k_blocks, v_blocks, key_ok):
    """qh [B,KV,G,T,D] against keys split in blocks; one softmax over all of them, taken
    block by block (shared max, summed exponentials) so the scores are never concatenated."""
    scale, neg = 1 / math.sqrt(qh.shape[-1]), jnp.finfo(jnp.float32).min
    scores, at = [], 0
    for kb in k_blocks:
        n = kb.shape[-2]
        s = jnp.einsum("bkgtd,bksd->bkgts", qh, kb, preferred_element_type=jnp.float32) * scale
        scores.append(jnp.where(key_ok[:, None, None, :, at:at + n], s, neg))
        at += n
    top = functools.reduce(jnp.maximum, [s.max(axis=-1, keepdims=True) for s in scores])
    exps = [jnp.exp(s - top) for s in scores]
    total = functools.reduce(jnp.add, [e.sum(axis=-1, keepdims=True) for e in exps])
    out = functools.reduce(jnp.add, [jnp.einsum("bkgts,bksd->bkgtd", e.astype(vb.dtype), vb)
                                     for e, vb in zip(exps, v_blocks)])
    return (out / total.astype(out.dtype)).astype(v_blocks[0].dtype)


class MLP(nnx.Module):
    def __init__(self, cfg: ModelConfig, dtype):
        d, f = cfg.hidden_size, cfg.intermediate_size
        lin = functools.partial(Linear, bias=False, dtype=dtype, quant=cfg.quant)
        self.gate_proj = lin(d, f, ("embed", "mlp"))
        self.up_proj = lin(d, f, ("embed", "mlp"))
        self.down_proj = lin(f, d, ("mlp", "embed"))

    def __call__(self, x):
        return self.down_proj(jax.nn.silu(self.gate_proj(x)) * self.up_proj(x))


class Experts(nnx.Module):
    """num_experts SwiGLU MLPs, each weight stacked over a leading expert axis in Hugging
    Face's [out, in] layout: gate_proj / up_proj [E, F, D], down_proj [E, D, F]."""

    def __init__(self, cfg: ModelConfig, dtype):
        e, d, f = cfg.num_experts, cfg.hidden_size, cfg.moe_intermediate_size
        self.gate_proj = BackboneWeight(_zeros((e, f, d), dtype), axes=("expert", "mlp", "embed"))
        self.up_proj = BackboneWeight(_zeros((e, f, d), dtype), axes=("expert", "mlp", "embed"))
        self.down_proj = BackboneWeight(_zeros((e, d, f), dtype), axes=("expert", "embed", "mlp"))

    def __call__(self, rows, group_sizes):
        """rows [M, D] sorted by expert, group_sizes [E] (rows per expert) -> [M, D]."""
        gate = grouped_matmul(rows, self.gate_proj[...], group_sizes)
        up = grouped_matmul(rows, self.up_proj[...], group_sizes)
        return grouped_matmul(jax.nn.silu(gate) * up, self.down_proj[...], group_sizes)


# contract rows [M, K] with each expert's [out, K] weight; rows are grouped (ragged) by expert
_ROWS_BY_EXPERT = jax.lax.RaggedDotDimensionNumbers(
    dot_dimension_numbers=(((1,), (2,)), ((), ())), lhs_ragged_dimensions=(0,), rhs_group_dimensions=(0,))


def grouped_matmul(x, w, group_sizes):
    """x [M, K] (rows grouped by expert, group_sizes [E] of them each) @ w[e] [N, K]^T for
    each row's expert e -> [M, N], with `matmul`'s dtype rule (inputs in w's dtype, float32
    accumulation, result in x's dtype). One `ragged_dot`: a grouped matmul on TPU and GPU;
    XLA on CPU expands it to a dense product over every expert (masked)."""
    y = jax.lax.ragged_dot_general(x.astype(w.dtype), w, group_sizes, _ROWS_BY_EXPERT,
                                   preferred_element_type=jnp.float32)
    return checkpoint_name(y.astype(x.dtype), PROJECTION)


class SparseMoE(nnx.Module):
    """Qwen3-MoE's sparse MLP (transformers' Qwen3MoeSparseMoeBlock), dropless: every token
    reaches its top-k experts, with no capacity limit and no auxiliary loss (the backbone is
    frozen). A linear router scores the experts, softmax in float32, the top k are kept
    (renormalized to sum 1 with norm_topk_prob); the N*k (token, expert) pairs are sorted by
    expert, run through `Experts` as grouped matmuls, put back in token order and summed
    with their router weights. Shapes are static: N*k rows whatever the routing."""

    def __init__(self, cfg: ModelConfig, dtype):
        self.router = Linear(cfg.hidden_size, cfg.num_experts, ("embed", "expert"), bias=False, dtype=dtype)
        self.experts = Experts(cfg, dtype)
        self.top_k = cfg.num_experts_per_tok
        self.norm_topk_prob = cfg.norm_topk_prob

    def __call__(self, x):
        """x [..., D] -> [..., D]."""
        flat = x.reshape(-1, x.shape[-1])
        n, k = flat.shape[0], self.top_k
        probs = jax.nn.softmax(self.router(flat).astype(jnp.float32), axis=-1)  # [N, E]
        weights, chosen = jax.lax.top_k(probs, k)  # [N, k]
        if self.norm_topk_prob:
            weights = weights / weights.sum(axis=-1, keepdims=True)
        pairs = chosen.reshape(-1)  # pair p = token p // k, expert pairs[p]
        order = jnp.argsort(pairs, stable=True)  # pairs grouped by expert
        group_sizes = jnp.bincount(pairs, length=probs.shape[-1]).astype(jnp.int32)
        out = self.experts(flat[order // k], group_sizes)  # [N*k, D], expert order
        unsort = jnp.zeros_like(order).at[order].set(jnp.arange(n * k, dtype=order.dtype))
        out = out[unsort].reshape(n, k, -1).astype(jnp.float32)
        y = jnp.einsum("nkd,nk->nd", out, weights)
        return y.astype(x.dtype).reshape(x.shape)


class DecoderLayer(nnx.Module):
    def __init__(self, cfg: ModelConfig, dtype, sparse: bool = False):
        self.input_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype)
        self.attn = Attention(cfg, dtype)
        self.post_attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype)
        self.mlp = SparseMoE(cfg, dtype) if sparse else MLP(cfg, dtype)

    def __call__(self, x, cos, sin, vis, kv, at, causal_prefix=False, plan=None):
        a, kv = self.attn(self.input_norm(x), cos, sin, vis, kv, at, causal_prefix, plan)
        x = x + a
        x = x + self.mlp(self.post_attn_norm(x))
        return x, kv


# remat_policy -> what the backward pass keeps of each layer (the rest is recomputed). The
# projections (q/k/v/o, MLP) are matmuls under a custom_vjp, invisible to jax's dots
# policies, so those policies also keep what is named PROJECTION (without it,
# "dots_saveable" compiled to the same program as "full").
_cp = jax.checkpoint_policies
REMAT_POLICIES = {
    "none": None,  # no rematerialization: everything is kept
    "full": _cp.nothing_saveable,
    "dots_saveable": _cp.save_from_both_policies(_cp.dots_saveable, _cp.save_only_these_names(PROJECTION)),
    "dots_with_no_batch_dims_saveable": _cp.save_from_both_policies(_cp.dots_with_no_batch_dims_saveable,
                                                                    _cp.save_only_these_names(PROJECTION)),
}


class Decoder(nnx.Module):
    """The frozen decoder-only backbone. Layers are unrolled (`self.layers[i]`), or with
    `cfg.scan_layers` one `DecoderLayer` whose weights carry a leading layer axis
    (created under `nnx.vmap`, logical axis "layers") and run under `jax.lax.scan`:
    compile time no longer grows with depth. `mesh` and `rules`: where a kernel's
    shard_map places rows and heads (`models/attention.py`); without them a kernel runs
    unsharded and the implementation "auto" follows this process's backend."""

    def __init__(self, cfg: ModelConfig, mesh=None, rules=None):
        dtype = jnp.dtype(cfg.dtype)
        self.config = cfg
        self.attention_plan = AttentionPlan.build(cfg.attention, mesh, rules, cfg.act_dtype, cfg.decode_attention)
        self.embedding = BackboneWeight(_zeros((cfg.vocab_size, cfg.hidden_size), jnp.int8 if cfg.quant else dtype),
                                        axes=("vocab", "embed"))
        self.embedding_scale = (BackboneWeight(_zeros((cfg.vocab_size,), jnp.float32), axes=("vocab",))
                                if cfg.quant else None)  # int8: one scale per token row
        if cfg.scan_layers:
            sparse = cfg.layer_is_sparse(0)  # all layers alike (ModelConfig checks)
            self.layers = nnx.vmap(lambda: DecoderLayer(cfg, dtype, sparse), in_axes=(), out_axes=0,
                                   axis_size=cfg.num_layers,
                                   transform_metadata={nnx.PARTITION_NAME: None, "axes": "layers"})()
        else:
            self.layers = nnx.List([DecoderLayer(cfg, dtype, cfg.layer_is_sparse(i))
                                    for i in range(cfg.num_layers)])
        self.final_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype)
        self.lm_head = (None if cfg.tie_word_embeddings else
                        Linear(cfg.hidden_size, cfg.vocab_size, ("embed", "vocab"), bias=False,
                               dtype=dtype, quant=cfg.quant))

    def embed_tokens(self, tokens):
        """tokens [B, T] int -> embeddings [B, T, D] (splice latent vectors into these)."""
        rows = jnp.take(self.embedding[...], tokens, axis=0)
        if self.embedding_scale is not None:
            rows = rows.astype(jnp.float32) * jnp.take(self.embedding_scale[...], tokens, axis=0)[..., None]
        return rows.astype(self.config.act_dtype)

    def lm_logits(self, hidden):
        """hidden [..., D] -> float32 logits [..., vocab]."""
        hidden = hidden.astype(jnp.float32)  # logits accumulate and come out in float32
        if self.lm_head is None and self.embedding_scale is not None:
            return matmul_int8(hidden, self.embedding[...], self.embedding_scale[...])
        if self.lm_head is None:
            return matmul(hidden, self.embedding[...], transpose_w=True)
        return self.lm_head(hidden)

    def rope(self, positions):
        """positions [B, T] int -> (cos, sin) [B, T, head_dim / 2] float32."""
        freqs = positions.astype(jnp.float32)[..., None] * rope_inv_freq(self.config.rope, self.config.head_dim)
        return jnp.cos(freqs), jnp.sin(freqs)

    def __call__(self, tokens=None, *, embeds=None, positions=None, attention_mask=None,
                 cache: Optional[KVCache] = None, slots=None, return_logits: bool = True,
                 kv_len: Optional[int] = None, cache_rows=None, query_start: Optional[int] = None):
        """Run the backbone.

        tokens [B, T] int or embeds [B, T, D]; positions [B, T] int (RoPE positions,
        default 0..T-1); attention_mask [B, T] (1 = real token, default all ones).
        With `cache`, `slots` [B, T] are the cache positions to write (default 0..T-1); a
        static `kv_len` limits attention to the first kv_len positions (all slots must be
        below it), so short sequences in a long cache read only what they use. `cache_rows` [B]
        maps batch element i to cache row cache_rows[i] (default i), so one sequence can
        be prefilled straight into one slot of a many-slot cache (an out-of-range row
        writes nothing: batch padding). `query_start` (static): `slots` are
        query_start + 0..T-1 in every row, which lets a kernel attend (without it, a pass
        with slots attends through XLA).
        Returns (logits [B, T, V] float32 or None, hidden [B, T, D], cache or None).
        """
        if (tokens is None) == (embeds is None):
            raise ValueError("pass exactly one of tokens or embeds")
        x = self.embed_tokens(tokens) if embeds is None else embeds.astype(self.config.act_dtype)
        b, t = x.shape[:2]
        steps = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
        positions = steps if positions is None else positions
        attention_mask = (jnp.ones((b, t), bool) if attention_mask is None
                          else attention_mask.astype(bool))
        cos, sin = self.rope(positions)

        # Which keys each query sees: the cached rows whose mask is set (this pass's tokens
        # included) at positions up to its own, within the first `span` positions.
        query_slots = steps if cache is None or slots is None else slots
        length = t if cache is None else cache.length
        span = length if kv_len is None else min(kv_len, length)
        if cache is None:
            at, key_mask, new_mask = None, attention_mask, None
        else:
            at = CacheIndex(slots=query_slots, rows=cache_rows, span=span)
            key_mask, new_mask = cache.key_mask(attention_mask, at)
        key_ok = key_mask[:, None, :span] & (jnp.arange(span)[None, None, :] <= query_slots[:, :, None])
        offset = None  # static slot of every row's first query, when a kernel may attend
        if self.attention_plan.kernel:
            if slots is not None and query_start is not None and query_start + t > span:
                raise ValueError(f"query_start={query_start} puts {t} tokens past the {span} cache positions read")
            offset = (0 if t <= span else None) if cache is None or slots is None else query_start
        vis = Visibility(key_ok=key_ok, query_mask=attention_mask, key_mask=key_mask, offset=offset)

        run = functools.partial(_run_layer, vis=vis, at=at, causal_prefix=slots is None,
                                plan=self.attention_plan)
        policy = self.config.remat_mode
        if policy != "none":
            run = jax.checkpoint(run, policy=REMAT_POLICIES[policy], static_argnums=(0,))
        if self.config.scan_layers:
            x, layer_kv = self._scan_layers(run, x, cache, cos, sin)
        else:
            layer_kv = []
            for i, layer in enumerate(self.layers):
                graphdef, state = nnx.split(layer)
                c, s = (cos, sin) if self.config.layer_uses_rope(i) else (jnp.ones_like(cos), jnp.zeros_like(sin))
                view = None if cache is None else cache.layer(i)
                if layer_kv and cache is not None and cache.pages is not None:  # one page array: write on the last
                    view = layer_kv[-1].replace(layer=i)
                x, kv = run(graphdef, state, x, view, c, s)
                layer_kv.append(kv)

        hidden = self.final_norm(x)
        logits = self.lm_logits(hidden) if return_logits else None
        new_cache = None if cache is None else cache.with_layers(layer_kv, new_mask)
        return logits, hidden, new_cache

    def _scan_layers(self, run, x, cache: Optional[KVCache], cos, sin):
        """All layers under one `jax.lax.scan` over the stacked weights; the stacked cache
        rides in the carry and each layer writes its own slice in place. A NoPE layer
        rotates by angle 0 (cos 1, sin 0)."""
        graphdef, stacked = nnx.split(self.layers)
        kv = None if cache is None else cache.layer(None)
        n = self.config.num_layers
        rotary = jnp.asarray([self.config.layer_uses_rope(i) for i in range(n)])

        def body(carry, xs):
            x, kv = carry
            state, i, use = xs
            c, s = (jnp.where(use, cos, 1.0), jnp.where(use, sin, 0.0)) if self.config.rope_layers else (cos, sin)
            x, kv = run(graphdef, state, x, None if kv is None else kv.replace(layer=i), c, s)
            return (x, None if kv is None else kv.replace(layer=None)), None

        layer_ids = jnp.arange(n, dtype=jnp.int32)
        (x, kv), _ = jax.lax.scan(body, (x, kv), (stacked, layer_ids, rotary))
        return x, [kv]


def _run_layer(graphdef, state, x, kv, cos, sin, *, vis, at, causal_prefix, plan):
    """One decoder layer as a pure function of its weights (what remat and scan wrap)."""
    return nnx.merge(graphdef, state)(x, cos, sin, vis, kv, at, causal_prefix, plan)
