"""One Flax NNX decoder for Llama, Mistral, Qwen2/2.5 and Qwen3 (config switches).

The backbone is frozen: its weights are `BackboneWeight` variables, not `nnx.Param`,
so an optimizer over `nnx.Param` (the controller, LoRA) never sees them. Each weight
carries logical axis names (`axes=`) that `activemem_jax.sharding` maps to the mesh.

Entry point: `Decoder.__call__(tokens | embeds, positions, attention_mask, cache=None,
slots=None)`. `slots` are the KV-cache rows each token is written to; a query attends
to cache rows `<=` its own slot whose mask is set, so left and right padding, prefill
and decode are one code path. Without a cache the sequence is its own cache.
"""

from __future__ import annotations

import math
from typing import Optional

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from activemem_jax.models.config import ModelConfig, RopeConfig


class BackboneWeight(nnx.Variable):
    """A frozen backbone weight (never in `nnx.state(model, nnx.Param)`)."""


def _zeros(shape, dtype):
    # Weights are replaced by the loader; eval_shape never materializes these.
    return jnp.zeros(shape, dtype)


class Linear(nnx.Module):
    def __init__(self, d_in: int, d_out: int, axes: tuple[str, str], *, bias: bool, dtype):
        self.kernel = BackboneWeight(_zeros((d_in, d_out), dtype), axes=axes)
        self.bias = BackboneWeight(_zeros((d_out,), dtype), axes=(axes[1],)) if bias else None

    def __call__(self, x):
        y = x @ self.kernel[...]
        if self.bias is not None:
            y = y + self.bias[...]
        return y


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


@flax.struct.dataclass
class KVCache:
    """Static-shape KV cache: per layer k/v [B, S, kv_heads, head_dim]; mask [B, S]."""
    k: tuple
    v: tuple
    mask: jax.Array

    @classmethod
    def init(cls, cfg: ModelConfig, batch: int, length: int, dtype=None) -> "KVCache":
        dtype = dtype or jnp.dtype(cfg.dtype)
        shape = (batch, length, cfg.num_kv_heads, cfg.head_dim)
        zeros = tuple(jnp.zeros(shape, dtype) for _ in range(cfg.num_layers))
        return cls(k=zeros, v=tuple(jnp.zeros(shape, dtype) for _ in range(cfg.num_layers)),
                   mask=jnp.zeros((batch, length), bool))

    @property
    def length(self) -> int:
        return self.mask.shape[1]


class Attention(nnx.Module):
    def __init__(self, cfg: ModelConfig, dtype):
        d, h, kv, hd = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.num_heads, self.num_kv_heads, self.head_dim = h, kv, hd
        self.q_proj = Linear(d, h * hd, ("embed", "heads"), bias=cfg.qkv_bias, dtype=dtype)
        self.k_proj = Linear(d, kv * hd, ("embed", "kv_heads"), bias=cfg.qkv_bias, dtype=dtype)
        self.v_proj = Linear(d, kv * hd, ("embed", "kv_heads"), bias=cfg.qkv_bias, dtype=dtype)
        self.o_proj = Linear(h * hd, d, ("heads", "embed"), bias=cfg.o_bias, dtype=dtype)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(hd, cfg.rms_norm_eps, dtype)
            self.k_norm = RMSNorm(hd, cfg.rms_norm_eps, dtype)
        else:
            self.q_norm = self.k_norm = None

    def __call__(self, x, cos, sin, k_all, v_all, key_ok, access, causal_prefix=False):
        """x [B,T,D]; k_all/v_all: the layer's cache (or None); key_ok [B,T,S] bool;
        access = (write, read): write(cache, new) puts new [B,T,KV,hd] rows into the cache,
        read(cache, s) gives the batch's first s cache rows; causal_prefix: the queries
        occupy cache rows 0..T-1 (lets attention skip keys past each chunk)."""
        b, t, _ = x.shape
        q = self.q_proj(x).reshape(b, t, self.num_heads, self.head_dim)
        k = self.k_proj(x).reshape(b, t, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).reshape(b, t, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        s = key_ok.shape[-1]  # attend over the first s cache rows only
        if k_all is None:
            k_all, v_all = k, v
            keys, values = k[:, :s], v[:, :s]
        else:
            write, read = access
            k_all, v_all = write(k_all, k), write(v_all, v)
            keys, values = read(k_all, s), read(v_all, s)
        out = attend(q, keys, values, key_ok, causal_prefix)
        return self.o_proj(out.reshape(b, t, -1)), k_all, v_all


def attend(q, k, v, key_ok, causal_prefix: bool):
    """Grouped-query attention, heads-first layout (fastest on CPU and TPU alike).

    q [B,T,H,D]; k/v [B,S,KV,D]; key_ok [B,T,S] bool. With `causal_prefix` (query t sits
    in cache row t), queries are split into a few chunks that read only the keys up to
    their own end, skipping most of the masked upper triangle.
    """
    b, t, h, d = q.shape
    kv = k.shape[2]
    qh = q.reshape(b, t, kv, h // kv, d).transpose(0, 2, 3, 1, 4)  # [B,KV,G,T,D]
    kh, vh = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)  # [B,KV,S,D]
    chunk = max(128, -(-t // 8))
    bounds = [(i, min(i + chunk, t)) for i in range(0, t, chunk)] if causal_prefix else [(0, t)]
    outs = []
    for lo, hi in bounds:
        end = hi if causal_prefix else kh.shape[2]
        scores = jnp.einsum("bkgtd,bksd->bkgts", qh[:, :, :, lo:hi], kh[:, :, :end],
                            preferred_element_type=jnp.float32) / math.sqrt(d)
        scores = jnp.where(key_ok[:, None, None, lo:hi, :end], scores, jnp.finfo(jnp.float32).min)
        probs = jax.nn.softmax(scores, axis=-1).astype(vh.dtype)
        outs.append(jnp.einsum("bkgts,bksd->bkgtd", probs, vh[:, :, :end]))
    out = outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=3)
    return out.transpose(0, 3, 1, 2, 4)  # [B,T,KV,G,D]


class MLP(nnx.Module):
    def __init__(self, cfg: ModelConfig, dtype):
        d, f = cfg.hidden_size, cfg.intermediate_size
        self.gate_proj = Linear(d, f, ("embed", "mlp"), bias=False, dtype=dtype)
        self.up_proj = Linear(d, f, ("embed", "mlp"), bias=False, dtype=dtype)
        self.down_proj = Linear(f, d, ("mlp", "embed"), bias=False, dtype=dtype)

    def __call__(self, x):
        return self.down_proj(jax.nn.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nnx.Module):
    def __init__(self, cfg: ModelConfig, dtype):
        self.input_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype)
        self.attn = Attention(cfg, dtype)
        self.post_attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype)
        self.mlp = MLP(cfg, dtype)

    def __call__(self, x, cos, sin, k_all, v_all, key_ok, access, causal_prefix=False):
        a, k_all, v_all = self.attn(self.input_norm(x), cos, sin, k_all, v_all, key_ok, access,
                                    causal_prefix)
        x = x + a
        x = x + self.mlp(self.post_attn_norm(x))
        return x, k_all, v_all


class Decoder(nnx.Module):
    """The frozen decoder-only backbone."""

    def __init__(self, cfg: ModelConfig):
        dtype = jnp.dtype(cfg.dtype)
        self.config = cfg
        self.embedding = BackboneWeight(_zeros((cfg.vocab_size, cfg.hidden_size), dtype),
                                        axes=("vocab", "embed"))
        self.layers = nnx.List([DecoderLayer(cfg, dtype) for _ in range(cfg.num_layers)])
        self.final_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype)
        self.lm_head = (None if cfg.tie_word_embeddings else
                        Linear(cfg.hidden_size, cfg.vocab_size, ("embed", "vocab"), bias=False,
                               dtype=dtype))

    def embed_tokens(self, tokens):
        """tokens [B, T] int -> embeddings [B, T, D] (splice latent vectors into these)."""
        return jnp.take(self.embedding[...], tokens, axis=0)

    def lm_logits(self, hidden):
        """hidden [..., D] -> float32 logits [..., vocab]."""
        if self.lm_head is None:
            logits = hidden @ self.embedding[...].T
        else:
            logits = self.lm_head(hidden)
        return logits.astype(jnp.float32)

    def __call__(self, tokens=None, *, embeds=None, positions=None, attention_mask=None,
                 cache: Optional[KVCache] = None, slots=None, return_logits: bool = True,
                 kv_len: Optional[int] = None, cache_rows=None):
        """Run the backbone.

        tokens [B, T] int or embeds [B, T, D]; positions [B, T] int (RoPE positions,
        default 0..T-1); attention_mask [B, T] (1 = real token, default all ones).
        With `cache`, `slots` [B, T] are the cache positions to write (default 0..T-1); a
        static `kv_len` limits attention to the first kv_len positions (all slots must be
        below it), so short sequences in a long cache read only what they use. `cache_rows` [B]
        maps batch element i to cache row cache_rows[i] (default i), so one sequence can
        be prefilled straight into one slot of a many-slot cache.
        Returns (logits [B, T, V] float32 or None, hidden [B, T, D], cache or None).
        """
        if (tokens is None) == (embeds is None):
            raise ValueError("pass exactly one of tokens or embeds")
        x = self.embed_tokens(tokens) if embeds is None else embeds.astype(self.embedding.dtype)
        b, t = x.shape[:2]
        steps = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
        positions = steps if positions is None else positions
        attention_mask = (jnp.ones((b, t), bool) if attention_mask is None
                          else attention_mask.astype(bool))
        freqs = positions.astype(jnp.float32)[..., None] * rope_inv_freq(self.config.rope, self.config.head_dim)
        cos, sin = jnp.cos(freqs), jnp.sin(freqs)

        if cache is None:
            query_slots, key_mask, access, full_mask = steps, attention_mask, None, None
        else:
            query_slots = steps if slots is None else slots
            rows = jnp.arange(b)[:, None]
            own = cache.mask if cache_rows is None else cache.mask[cache_rows]
            key_mask = own.at[rows, query_slots].set(attention_mask)
            full_mask = key_mask if cache_rows is None else cache.mask.at[cache_rows].set(key_mask)
            target = rows if cache_rows is None else cache_rows[:, None]

            def write(buf, new):
                return buf.at[target, query_slots].set(new.astype(buf.dtype))

            def read(buf, n):
                return buf[:, :n] if cache_rows is None else buf[cache_rows, :n]

            access = (write, read)
        s = key_mask.shape[1] if kv_len is None else min(kv_len, key_mask.shape[1])
        key_ok = key_mask[:, None, :s] & (jnp.arange(s)[None, None, :] <= query_slots[:, :, None])

        layer_fn = _call_layer_remat if self.config.remat else _call_layer
        new_k, new_v = [], []
        for i, layer in enumerate(self.layers):
            k_i = None if cache is None else cache.k[i]
            v_i = None if cache is None else cache.v[i]
            x, k_i, v_i = layer_fn(layer, x, cos, sin, k_i, v_i, key_ok, access, slots is None)
            new_k.append(k_i)
            new_v.append(v_i)
        hidden = self.final_norm(x)
        logits = self.lm_logits(hidden) if return_logits else None
        new_cache = None if cache is None else KVCache(k=tuple(new_k), v=tuple(new_v), mask=full_mask)
        return logits, hidden, new_cache


def _call_layer(layer, x, cos, sin, k, v, key_ok, access, causal_prefix):
    return layer(x, cos, sin, k, v, key_ok, access, causal_prefix)


def _call_layer_remat(layer, x, cos, sin, k, v, key_ok, access, causal_prefix):
    """The layer under `jax.checkpoint`: activations are recomputed in the backward pass."""
    graphdef, state = nnx.split(layer)

    def run(state, x, cos, sin, k, v, key_ok):
        return nnx.merge(graphdef, state)(x, cos, sin, k, v, key_ok, access, causal_prefix)

    return jax.checkpoint(run)(state, x, cos, sin, k, v, key_ok)
