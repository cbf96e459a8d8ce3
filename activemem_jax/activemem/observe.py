"""What the controller reads of an observation s_t (docs/design_memory.md#query-space).

    enc = ObservationEncoder(model)
    h, pooled = enc(["The code for Vorlan is red.", ...])   # [n, d] each, float32 numpy

The observation's own tokens (no chat template) go through the frozen backbone once:
`h` is the final-norm hidden state at the observation's last token (the controller's
h_t, paper f_enc), `pooled` the mean of the final-norm states over its tokens (what the
tree is searched with, after `memory.query_space.project`). Reading h_t at the chat
template's trailing assistant header instead gives cos >= 0.945 between unrelated tasks.

Shapes are bucketed (rows powers of two from 2, lengths powers of two from 16), so a run
compiles a handful of shapes. Observations longer than `max_tokens` keep their last tokens.

The backbone is frozen, so a read is a pure function of the observation's tokens: the
encoder keeps the last `cache_size` reads (least recently used first out) and reads only
texts it has not seen. A training stream repeats its observations (recall's train split
has 190 questions and 1,520 facts), so most reads of a long run are lookups. A cached
value equals a fresh read bit for bit on the CPU: a row's result does not depend on its
batch mates or its length bucket once a batch has 2 rows or more (a 1-row batch takes a
matrix-vector path whose sums round differently; reads never use it).
"""

from __future__ import annotations

import collections
import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from activemem_jax.models.decoder import positions_from_mask
from activemem_jax.shapes import observation_length, observation_rows


def _encode(graphdef, state, tokens, mask):
    model = nnx.merge(graphdef, state)
    _, hidden, _ = model(tokens, positions=positions_from_mask(mask), attention_mask=mask,
                         return_logits=False)
    hidden = hidden.astype(jnp.float32)
    m = mask.astype(jnp.float32)
    lengths = jnp.sum(mask, axis=-1)
    last = hidden[jnp.arange(tokens.shape[0]), jnp.maximum(lengths - 1, 0)]
    pooled = jnp.sum(hidden * m[..., None], axis=1) / jnp.maximum(lengths, 1)[:, None].astype(jnp.float32)
    return last, pooled


class ObservationEncoder:
    def __init__(self, model, max_tokens: int = 512, cache_size: int = 8192):
        if max_tokens < 1:
            raise ValueError(f"max_obs_tokens={max_tokens}: need >= 1")
        self.model, self.max_tokens, self.cache_size = model, max_tokens, cache_size
        self._cache: collections.OrderedDict = collections.OrderedDict()  # token ids -> (h, pooled)
        self.reads = self.lookups = 0  # observations read by the backbone / answered by the cache
        tok = model.tokenizer
        self._fill = tok("\n", add_special_tokens=False)["input_ids"][:1] or [0]  # an empty observation

    @functools.cached_property
    def _jit(self):
        return jax.jit(functools.partial(_encode, self.model.graphdef))

    def token_ids(self, text: str) -> list[int]:
        ids = list(self.model.tokenizer(text or "", add_special_tokens=False)["input_ids"]) if text else []
        return (ids or list(self._fill))[-self.max_tokens:]

    def __call__(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(h, pooled) of each text; a text read before (or twice in this call) is not read
        again."""
        ids = [tuple(self.token_ids(t)) for t in texts]
        d = self.model.config.hidden_size
        last, pooled = np.zeros((len(ids), d), np.float32), np.zeros((len(ids), d), np.float32)
        missing = list(dict.fromkeys(x for x in ids if x not in self._cache))
        if missing:
            got = self._read(missing)
            for j, x in enumerate(missing):
                self._cache[x] = (got[0][j], got[1][j])
        self.reads += len(missing)
        self.lookups += len(ids) - len(missing)
        for i, x in enumerate(ids):
            last[i], pooled[i] = self._cache[x]
            self._cache.move_to_end(x)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return last, pooled

    def _read(self, ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """One backbone pass over these token-id rows."""
        n = len(ids)
        if n == 0:
            d = self.model.config.hidden_size
            return np.zeros((0, d), np.float32), np.zeros((0, d), np.float32)
        rows, length = observation_rows(n), observation_length(max(len(x) for x in ids))
        tokens = np.zeros((rows, length), np.int32)
        mask = np.zeros((rows, length), np.int32)
        for i, x in enumerate(ids):
            tokens[i, :len(x)] = x
            mask[i, :len(x)] = 1
        mask[n:, 0] = 1  # padding rows: one token, results dropped
        put = self.model._put_batch
        last, pooled = self._jit(self.model.state, put(tokens), put(mask))
        return np.asarray(last, np.float32)[:n], np.asarray(pooled, np.float32)[:n]


__all__ = ["ObservationEncoder"]
