"""What the controller reads of an observation s_t (SPEC 4.1 / 4.2 R2).

    enc = ObservationEncoder(model)
    h, pooled = enc(["The code for Vorlan is red.", ...])   # [n, d] each, float32 numpy

The observation's own tokens (no chat template) go through the frozen backbone once:
`h` is the final-norm hidden state at the observation's last token (the controller's
h_t, paper f_enc), `pooled` the mean of the final-norm states over its tokens (what the
tree is searched with, after `memory.query_space.project`). Reading h_t at the chat
template's trailing assistant header instead gives cos >= 0.945 between unrelated tasks.

Shapes are bucketed (rows powers of two, lengths powers of two from 16), so a run
compiles a handful of shapes. Observations longer than `max_tokens` keep their last tokens.
"""

from __future__ import annotations

import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from activemem_jax.models.loading import positions_from_mask


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


def _rows_bucket(n: int) -> int:
    b = 1
    while b < n:
        b *= 2
    return b


def _len_bucket(n: int) -> int:
    b = 16  # a one-sentence observation is ~13 tokens: a 32-token floor doubled the read
    while b < n:
        b *= 2
    return b


class ObservationEncoder:
    def __init__(self, model, max_tokens: int = 512):
        if max_tokens < 1:
            raise ValueError(f"max_obs_tokens={max_tokens}: need >= 1")
        self.model, self.max_tokens = model, max_tokens
        tok = model.tokenizer
        self._fill = tok("\n", add_special_tokens=False)["input_ids"][:1] or [0]  # an empty observation

    @functools.cached_property
    def _jit(self):
        return jax.jit(functools.partial(_encode, self.model.graphdef))

    def token_ids(self, text: str) -> list[int]:
        ids = list(self.model.tokenizer(text or "", add_special_tokens=False)["input_ids"]) if text else []
        return (ids or list(self._fill))[-self.max_tokens:]

    def __call__(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Each distinct observation is read once: a GRPO group's G episodes of one task
        often see the same observation, and the frozen backbone reads it alike."""
        unique, where = {}, []
        for t in texts:
            where.append(unique.setdefault(t, len(unique)))
        if len(unique) < len(texts):
            last, pooled = self._read(list(unique))
            return last[where], pooled[where]
        return self._read(texts)

    def _read(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        ids = [self.token_ids(t) for t in texts]
        n = len(ids)
        if n == 0:
            d = self.model.config.hidden_size
            return np.zeros((0, d), np.float32), np.zeros((0, d), np.float32)
        rows, length = _rows_bucket(n), _len_bucket(max(len(x) for x in ids))
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
