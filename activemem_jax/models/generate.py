"""Greedy batched generation with a static KV cache, the whole decode loop in one jit.

Prompts are left-padded to a length bucket, so compiles stay few. This is the
foundation's minimal generator (demo, tests); `activemem_jax.engine` builds the
continuous-batching sampler on the same decoder and cache.
"""

from __future__ import annotations

import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from activemem_jax.models.kv_cache import KVCache
from activemem_jax.models.decoder import positions_from_mask
from activemem_jax.shapes import round_up


def _greedy(graphdef, state, tokens, mask, *, cache_len: int, max_new: int, eos: tuple):
    model = nnx.merge(graphdef, state)
    b, p = tokens.shape
    cache = KVCache.init(model.config, b, cache_len)
    _, hidden, cache = model(tokens, positions=positions_from_mask(mask), attention_mask=mask,
                             cache=cache, return_logits=False)
    first = jnp.argmax(model.lm_logits(hidden[:, -1]), axis=-1).astype(jnp.int32)
    lengths = jnp.sum(mask, axis=-1).astype(jnp.int32)
    eos_ids = jnp.asarray(eos if eos else (-1,), jnp.int32)
    out = jnp.full((b, max_new), -1, jnp.int32)

    def cond(carry):
        step, _, done, _, _ = carry
        return (step < max_new) & ~jnp.all(done)

    def body(carry):
        step, tok, done, out, cache = carry
        out = out.at[:, step].set(jnp.where(done, -1, tok))
        done = done | jnp.isin(tok, eos_ids)
        _, h, cache = model(tok[:, None], positions=(lengths + step)[:, None],
                            attention_mask=jnp.ones((b, 1), bool), cache=cache,
                            slots=jnp.full((b, 1), p + step, jnp.int32), return_logits=False)
        tok = jnp.argmax(model.lm_logits(h[:, 0]), axis=-1).astype(jnp.int32)
        return step + 1, tok, done, out, cache

    carry = (jnp.int32(0), first, jnp.zeros((b,), bool), out, cache)
    _, _, _, out, _ = jax.lax.while_loop(cond, body, carry)
    return out


@functools.lru_cache(maxsize=32)
def _compiled(graphdef, cache_len: int, max_new: int, eos: tuple):
    return jax.jit(functools.partial(_greedy, graphdef, cache_len=cache_len, max_new=max_new,
                                     eos=eos))


def greedy_generate(model, prompts: Sequence[Sequence[int]], max_new_tokens: int = 64,
                    eos_token_ids: Sequence[int] | None = None, prompt_bucket: int = 64
                    ) -> list[list[int]]:
    """Greedy continuation of each prompt (token ids). Stops at EOS (not returned)."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    eos = tuple(sorted(model.eos_token_ids if eos_token_ids is None else eos_token_ids))
    p = round_up(max(len(x) for x in prompts), prompt_bucket)
    cache_len = round_up(p + max_new_tokens, prompt_bucket)
    if cache_len > model.config.max_position_embeddings:
        raise ValueError(f"prompt ({max(len(x) for x in prompts)} tokens) + max_new_tokens "
                         f"({max_new_tokens}) exceed the model's context of "
                         f"{model.config.max_position_embeddings} tokens")
    tokens = np.zeros((len(prompts), p), np.int32)
    mask = np.zeros((len(prompts), p), np.int32)
    for i, ids in enumerate(prompts):
        tokens[i, p - len(ids):] = ids
        mask[i, p - len(ids):] = 1
    fn = _compiled(model.graphdef, cache_len, max_new_tokens, eos)
    out = np.asarray(fn(model.state, model._put_batch(tokens), model._put_batch(mask)))
    results = []
    for row in out:
        ids = []
        for t in row:
            if t < 0 or t in eos:
                break
            ids.append(int(t))
        results.append(ids)
    return results
