"""The engine's pure, jitted steps (JetStream's shape): a static-shape KV cache of fixed
decode slots; `prefill` a prompt chunk straight into one slot's cache rows; `insert`
starts that slot decoding; `generate` one token for every live slot; `copy_row` moves a
slot's cached prefix to another slot (prefix reuse).

The decode state is sharded by the model's logical-axis rules (`state_shardings`: slots
over the batch axes, KV heads over tensor); every step that returns the state constrains
it to those shardings, so it never falls back to replicated.

Shapes are static: prompt chunks are padded to a few lengths (`shapes.PREFILL_BUCKETS`) and
attention reads only the first `kv_len` cache rows, a power-of-two bucket, so compiles
stay few and short sequences never read the whole cache.
"""

from __future__ import annotations

import functools

import flax.struct
import jax
import jax.numpy as jnp
from flax import nnx

from activemem_jax import sharding as shd
from activemem_jax.engine.sampling import sample
from activemem_jax.models.kv_cache import KVCache

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


def init_state(cfg, slots: int, rows: int, paged: bool = False) -> DecodeState:
    """A zero state; `paged`: the cache in pages, what a paged decode kernel reads
    (`decode_kernel.paged_cache`)."""
    def z():  # distinct buffers: the state is donated as a whole
        return jnp.zeros((slots,), jnp.int32)

    return DecodeState(cache=KVCache.init(cfg, slots, rows, paged=paged), lengths=z(), tokens=z(),
                       active=jnp.zeros((slots,), bool), temperature=jnp.zeros((slots,), jnp.float32),
                       top_k=z(), top_p=jnp.ones((slots,), jnp.float32), seeds=z(), steps=z())


def state_shardings(cfg, slots: int, rows: int, mesh, rules=None, paged: bool = False) -> DecodeState:
    """A DecodeState of NamedShardings: the cache by its logical axes, every per-slot
    vector over the batch axes (replicated where the axes do not divide `slots`)."""
    abstract = jax.eval_shape(functools.partial(init_state, cfg, slots, rows, paged))
    per_slot = jax.tree.map(lambda a: shd.named_sharding(a.shape, ("batch",), mesh, rules),
                            abstract.replace(cache=None))
    return per_slot.replace(cache=abstract.cache.shardings(mesh, rules))


def new_state(cfg, slots: int, rows: int, shardings: DecodeState, paged: bool = False) -> DecodeState:
    """A zero state made directly on its shards (never whole on one device)."""
    return jax.jit(functools.partial(init_state, cfg, slots, rows, paged), out_shardings=shardings)()


def prefill(graphdef, params, state: DecodeState, slots, tokens, starts, lengths, latents, latent_pos,
            sampling, mask=None, *, kv_len: int, fresh: bool = False):
    """Run P prompt chunks at once, each straight into its own slot's cache rows.

    tokens [P, R]: row i holds the chunk of slot slots[i] at positions starts[i].., its
    first lengths[i] tokens real. A padding row has slot == number of slots: its writes
    are dropped. latents [P, MAX_LATENTS, d] replace the embeddings of the tokens at
    absolute prompt positions latent_pos [P, MAX_LATENTS] (-1 = unused).
    sampling = (temperature, top_k, top_p, seed), [P] arrays, for each first token; mask
    None or int32 [P, ceil(V/32)], the rows' packed token masks (`sampling.apply_mask`).
    fresh (static): every start is 0, so the chunks attend only to themselves (causal
    chunks; the cache is written, not read).
    Returns (state, token [P], logprob [P], top_lp [P, N], top_ids [P, N], hidden [P, d])."""
    model = nnx.merge(graphdef, params)
    p, r = tokens.shape
    embeds = model.embed_tokens(tokens)
    rel = latent_pos - starts[:, None]
    use = (latent_pos >= 0) & (rel >= 0) & (rel < lengths[:, None])
    rows = jnp.arange(p)[:, None]
    embeds = embeds.at[rows, jnp.where(use, rel, r)].set(latents.astype(embeds.dtype), mode="drop")
    steps = starts[:, None] + jnp.arange(r, dtype=jnp.int32)[None]
    _, hidden, cache = model(embeds=embeds, positions=steps, attention_mask=steps < (starts + lengths)[:, None],
                             cache=state.cache, slots=None if fresh else steps, return_logits=False,
                             kv_len=kv_len, cache_rows=slots)
    last = hidden[jnp.arange(p), jnp.maximum(lengths - 1, 0)]
    temperature, top_k, top_p, seed = sampling
    token, logprob, top_lp, top_ids = sample(model.lm_logits(last), temperature, top_k, top_p,
                                             seed, jnp.zeros((p,), jnp.int32), mask=mask)
    return state.replace(cache=cache), token, logprob, top_lp, top_ids, last


def insert(state: DecodeState, slots, lengths, tokens, sampling) -> DecodeState:
    """Start each slot in `slots` [P] decoding after its prefilled prompt of `lengths`
    tokens and its first sampled token (rows whose slot is out of range are skipped)."""
    temperature, top_k, top_p, seed = sampling

    def put(a, v):
        return a.at[slots].set(v, mode="drop")

    return state.replace(lengths=put(state.lengths, lengths), tokens=put(state.tokens, tokens),
                         active=put(state.active, True), temperature=put(state.temperature, temperature),
                         top_k=put(state.top_k, top_k), top_p=put(state.top_p, top_p),
                         seeds=put(state.seeds, seed), steps=put(state.steps, 1))


def copy_row(state: DecodeState, src, dst, *, upto: int) -> DecodeState:
    """Copy `src`'s cache row into `dst` (to reuse a prefix another slot holds): the KV
    blocks holding its first `upto` positions (static), and the whole mask row. Later
    positions are never read before the new prompt overwrites them (attention is causal),
    so a short prefix in a long cache copies little."""
    return state.replace(cache=state.cache.copy_row(src, dst, upto))


def release(state: DecodeState, slot) -> DecodeState:
    return state.replace(active=state.active.at[slot].set(False))


def generate(graphdef, params, state: DecodeState, rows=None, mask=None, *, kv_len: int, top: bool = True):
    """One decode step: feed each slot's last token, sample the next.

    rows: None (every slot), or int32 [R] the slots to step, R a small static bucket
    (padding = an out-of-range slot, which reads a clamped row and writes nothing). A step
    over R rows reads only those rows' cache, so one live request in a many-slot engine
    costs about what it costs alone. top (static): also return the top log-probs (a
    top-k over the vocabulary; skipped when no live request asked for them). mask: None (no
    row constrained) or int32 [R, ceil(V/32)], each row's packed token mask, all bits set
    for an unconstrained row (constrained decoding; `sampling.apply_mask`). Returns
    (state, tokens [R], logprobs [R], top_lp [R, N], top_ids [R, N] (None without top));
    R = slots when rows is None."""
    model = nnx.merge(graphdef, params)
    pick = (lambda a: a) if rows is None else (lambda a: a[rows])
    active = state.active if rows is None else state.active[rows] & (rows < state.active.shape[0])
    at = pick(state.lengths)[:, None]
    _, hidden, cache = model(pick(state.tokens)[:, None], positions=at, attention_mask=active[:, None],
                             cache=state.cache, slots=at, return_logits=False, kv_len=kv_len,
                             cache_rows=rows)
    temperature = jnp.where(active, pick(state.temperature), 0.0)  # idle rows: greedy, skipped
    tokens, logprobs, top_lp, top_ids = sample(model.lm_logits(hidden[:, 0]), temperature, pick(state.top_k),
                                               pick(state.top_p), pick(state.seeds), pick(state.steps),
                                               top=top, mask=mask)
    live = active.astype(jnp.int32)
    new_tokens = jnp.where(active, tokens, pick(state.tokens))
    if rows is None:
        state = state.replace(lengths=state.lengths + live, tokens=new_tokens, steps=state.steps + live)
    else:
        state = state.replace(lengths=state.lengths.at[rows].add(live, mode="drop"),
                              tokens=state.tokens.at[rows].set(new_tokens, mode="drop"),
                              steps=state.steps.at[rows].add(live, mode="drop"))
    return state.replace(cache=cache), tokens, logprobs, top_lp, top_ids


def _keep_sharded(fn, shardings: DecodeState):
    """fn whose returned state (alone, or first of a tuple) is pinned to `shardings`."""
    if shardings is None:
        return fn

    @functools.wraps(fn)
    def pinned(*args, **kwargs):
        out = fn(*args, **kwargs)
        if isinstance(out, DecodeState):
            return jax.lax.with_sharding_constraint(out, shardings)
        return (jax.lax.with_sharding_constraint(out[0], shardings),) + tuple(out[1:])

    return pinned


@functools.lru_cache(maxsize=None)
def compiled(graphdef, shardings: DecodeState = None):
    """The jitted steps for one model structure (state buffers donated); with `shardings`
    (see `state_shardings`) every returned state keeps that placement."""
    def jit(fn, **kw):
        return jax.jit(_keep_sharded(fn, shardings), **kw)

    return {
        "prefill": jit(functools.partial(prefill, graphdef), static_argnames=("kv_len", "fresh"),
                       donate_argnums=(1,)),
        "insert": jit(insert, donate_argnums=(0,)),
        "copy_row": jit(copy_row, static_argnames="upto", donate_argnums=(0,)),
        "release": jit(release, donate_argnums=(0,)),
        "generate": jit(functools.partial(generate, graphdef), static_argnames=("kv_len", "top"),
                        donate_argnums=(1,)),
    }
