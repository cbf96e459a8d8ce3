"""The engine's pure, jitted steps (JetStream's shape): a static-shape KV cache of fixed
decode slots; `prefill` a prompt chunk straight into one slot's cache rows; `insert`
starts that slot decoding; `generate` one token for every slot; `copy_row` moves a
slot's cached prefix to another slot (prefix reuse).

Shapes are static: prompt chunks are padded to a few lengths (`PREFILL_BUCKETS`) and
attention reads only the first `kv_len` cache rows, a power-of-two bucket, so compiles
stay few and short sequences never read the whole cache.
"""

from __future__ import annotations

import functools

import flax.struct
import jax
import jax.numpy as jnp
from flax import nnx

from activemem_jax.engine.sampling import sample
from activemem_jax.models.decoder import KVCache

PREFILL_BUCKETS = (32, 64, 128, 256, 512)  # chunk lengths; longer prompts go in chunks
MAX_LATENTS = 8  # latent vectors one request may splice in (K in {0, 2, 4, 8})


@flax.struct.dataclass
class DecodeState:
    cache: KVCache            # [slots, rows]
    lengths: jax.Array        # [slots] cache rows in use = position of the next token
    tokens: jax.Array         # [slots] last sampled token (next input)
    active: jax.Array         # [slots] bool
    temperature: jax.Array    # [slots] float32
    top_k: jax.Array          # [slots] int32
    top_p: jax.Array          # [slots] float32
    seeds: jax.Array          # [slots] int32
    steps: jax.Array          # [slots] int32, tokens sampled so far (RNG stream position)


def init_state(cfg, slots: int, rows: int) -> DecodeState:
    def z():  # distinct buffers: the state is donated as a whole
        return jnp.zeros((slots,), jnp.int32)

    return DecodeState(cache=KVCache.init(cfg, slots, rows), lengths=z(), tokens=z(),
                       active=jnp.zeros((slots,), bool), temperature=jnp.zeros((slots,), jnp.float32),
                       top_k=z(), top_p=jnp.ones((slots,), jnp.float32), seeds=z(), steps=z())


def kv_bucket(n: int, rows: int) -> int:
    b = 256
    while b < n:
        b *= 2
    return min(b, rows)


def prefill_bucket(n: int) -> int:
    return next(b for b in PREFILL_BUCKETS if b >= n)


def prefill(graphdef, params, state: DecodeState, slot, tokens, start, length, latents, latent_pos,
            sampling, *, kv_len: int):
    """Run prompt tokens [1, R] (the first `length` real) at positions start..start+R-1 of
    `slot`'s cache rows, in place. latents [MAX_LATENTS, d] replace the embeddings of the
    tokens at absolute prompt positions latent_pos [MAX_LATENTS] (-1 = unused).
    sampling = (temperature, top_k, top_p, seed) [1] arrays for the first token.
    Returns (state, token [1], logprob [1], top_lp [1, N], top_ids [1, N], hidden [1, d])."""
    model = nnx.merge(graphdef, params)
    r = tokens.shape[1]
    embeds = model.embed_tokens(tokens)
    rel = latent_pos - start
    use = (latent_pos >= 0) & (rel >= 0) & (rel < length)
    embeds = embeds.at[0, jnp.where(use, rel, r)].set(latents.astype(embeds.dtype), mode="drop")
    steps = start + jnp.arange(r, dtype=jnp.int32)[None]
    _, hidden, cache = model(embeds=embeds, positions=steps, attention_mask=steps < start + length,
                             cache=state.cache, slots=steps, return_logits=False, kv_len=kv_len,
                             cache_rows=jnp.reshape(slot, (1,)))
    last = jax.lax.dynamic_index_in_dim(hidden[0], length - 1, keepdims=False)[None]
    temperature, top_k, top_p, seed = sampling
    token, logprob, top_lp, top_ids = sample(model.lm_logits(last), temperature, top_k, top_p,
                                             seed, jnp.zeros((1,), jnp.int32))
    return state.replace(cache=cache), token, logprob, top_lp, top_ids, last


def insert(state: DecodeState, slot, length, token, sampling) -> DecodeState:
    """Start `slot` decoding after its prefilled prompt of `length` tokens and `token`."""
    temperature, top_k, top_p, seed = sampling
    put = lambda a, v: a.at[slot].set(v[0] if v.ndim else v)  # noqa: E731
    return state.replace(lengths=put(state.lengths, length), tokens=put(state.tokens, token),
                         active=state.active.at[slot].set(True),
                         temperature=put(state.temperature, temperature), top_k=put(state.top_k, top_k),
                         top_p=put(state.top_p, top_p), seeds=put(state.seeds, seed),
                         steps=state.steps.at[slot].set(1))


def copy_row(state: DecodeState, src, dst) -> DecodeState:
    """Copy `src`'s cache rows into `dst` (to reuse a prefix another slot holds)."""
    cache = state.cache
    return state.replace(cache=KVCache(k=tuple(c.at[dst].set(c[src]) for c in cache.k),
                                       v=tuple(c.at[dst].set(c[src]) for c in cache.v),
                                       mask=cache.mask.at[dst].set(cache.mask[src])))


def release(state: DecodeState, slot) -> DecodeState:
    return state.replace(active=state.active.at[slot].set(False))


def generate(graphdef, params, state: DecodeState, *, kv_len: int):
    """One decode step for every slot: feed each slot's last token, sample the next.
    Returns (state, tokens [B], logprobs [B], top_lp [B, N], top_ids [B, N])."""
    model = nnx.merge(graphdef, params)
    at = state.lengths[:, None]
    _, hidden, cache = model(state.tokens[:, None], positions=at, attention_mask=state.active[:, None],
                             cache=state.cache, slots=at, return_logits=False, kv_len=kv_len)
    tokens, logprobs, top_lp, top_ids = sample(model.lm_logits(hidden[:, 0]), state.temperature,
                                               state.top_k, state.top_p, state.seeds, state.steps)
    live = state.active.astype(jnp.int32)
    state = state.replace(cache=cache, lengths=state.lengths + live,
                          tokens=jnp.where(state.active, tokens, state.tokens),
                          steps=state.steps + live)
    return state, tokens, logprobs, top_lp, top_ids


@functools.lru_cache(maxsize=None)
def compiled(graphdef):
    """The jitted steps for one model structure (cache buffers donated)."""
    return {
        "prefill": jax.jit(functools.partial(prefill, graphdef), static_argnames="kv_len",
                           donate_argnums=(1,)),
        "insert": jax.jit(insert, donate_argnums=(0,)),
        "copy_row": jax.jit(copy_row, donate_argnums=(0,)),
        "release": jax.jit(release, donate_argnums=(0,)),
        "generate": jax.jit(functools.partial(generate, graphdef), static_argnames="kv_len",
                            donate_argnums=(1,)),
    }
