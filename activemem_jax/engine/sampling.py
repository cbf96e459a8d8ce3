"""Per-request sampling parameters and the batched, jitted sampler."""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp

from activemem_jax.engine.constraints import Constraint

CANDIDATES = 256  # top-k / top-p act within the 256 most likely tokens
TOP_LOGPROBS = 20  # most top log-probs a request may ask for
INT32_MAX = 2**31 - 1  # top_k travels to the device as int32
FLOAT32_MAX = 3.4028234663852886e38  # temperature and top_p as float32


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """temperature 0 = greedy; top_k 0 = off; top_p 1 = off; seed None = random (any int:
    the engine keeps its low 31 bits)."""
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: Optional[int] = None
    logprobs: bool = False
    top_logprobs: int = 0
    ignore_eos: bool = False
    constraint: Optional[Constraint] = None  # JSON schema, regex, choice or grammar (constraints.py)

    def __post_init__(self):
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        object.__setattr__(self, "stop", stop)
        problems = []
        if not 0 <= self.temperature <= FLOAT32_MAX:  # also refuses NaN and infinity
            problems.append(f"temperature must be a finite number >= 0 (got {self.temperature})")
        if not 0 < self.top_p <= 1:
            problems.append(f"top_p must be in (0, 1] (got {self.top_p})")
        if not 0 <= self.top_k <= INT32_MAX:
            problems.append(f"top_k must be in [0, {INT32_MAX}] (got {self.top_k})")
        if self.max_tokens < 1:
            problems.append(f"max_tokens must be >= 1 (got {self.max_tokens})")
        if not 0 <= self.top_logprobs <= TOP_LOGPROBS:
            problems.append(f"top_logprobs must be in [0, {TOP_LOGPROBS}] (got {self.top_logprobs})")
        if any(not s for s in stop) or len(stop) > 16:
            problems.append("stop must hold at most 16 non-empty strings")
        if self.constraint is not None and not isinstance(self.constraint, Constraint):
            problems.append(f"constraint must be a Constraint (got {type(self.constraint).__name__})")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def apply_mask(logits, mask):
    """logits [B, V] with the tokens a packed mask int32 [B, ceil(V/32)] leaves out at
    -inf (bit t % 32 of word t // 32 set = token t allowed; a row of -1 allows all).
    Every row must allow at least one token (the host checks: constraints.Matcher)."""
    if mask is None:
        return logits
    bits = (mask[:, :, None] >> jnp.arange(32, dtype=jnp.int32)) & 1
    allowed = bits.reshape(mask.shape[0], -1)[:, : logits.shape[-1]].astype(bool)
    return jnp.where(allowed, logits, -jnp.inf)


def sample(logits, temperature, top_k, top_p, seeds, steps, top: bool = True, mask=None):
    """One token per row. logits [B, V] float32; temperature/top_p [B] float32; top_k,
    seeds, steps [B] int32; mask None or a packed token mask int32 [B, ceil(V/32)]
    (`apply_mask`; constrained decoding), sampled within. The key of row b is
    fold_in(PRNGKey(seed_b), step_b), so a request's samples do not depend on what else is
    in the batch.

    Returns (tokens [B], logprobs [B] of the model's (unmasked) distribution at the chosen
    tokens, top log-probs [B, TOP_LOGPROBS] and their token ids, or None, None unless `top`)."""
    logprobs = jax.nn.log_softmax(logits, axis=-1)
    logits = apply_mask(logits, mask)
    greedy = jnp.argmax(logits, axis=-1).astype(jnp.int32)

    n = min(CANDIDATES, logits.shape[-1])  # a vocabulary smaller than the candidate set

    def draw(_):
        scaled = logits / jnp.maximum(temperature, 1e-6)[:, None]
        vals, ids = jax.lax.top_k(scaled, n)
        rank = jnp.arange(n)[None, :]
        keep = rank < jnp.where(top_k > 0, jnp.minimum(top_k, n), n)[:, None]
        probs = jax.nn.softmax(jnp.where(keep, vals, -jnp.inf), axis=-1)
        keep = keep & ((jnp.cumsum(probs, axis=-1) - probs) < top_p[:, None])
        keys = jax.vmap(lambda s, t: jax.random.fold_in(jax.random.PRNGKey(s), t))(seeds, steps)
        u = jax.vmap(lambda k: jax.random.uniform(k, ()))(keys)
        pick = _inverse_cdf(jnp.where(keep, probs, 0.0), u)
        full = _inverse_cdf(jax.nn.softmax(scaled, axis=-1), u)
        use_full = (top_k <= 0) & (top_p >= 1.0)
        sampled = jnp.where(use_full, full, jnp.take_along_axis(ids, pick[:, None], axis=-1)[:, 0])
        return jnp.where(temperature <= 0, greedy, sampled).astype(jnp.int32)

    # an all-greedy batch skips the sampling work (top-k, cumulative sums, draws)
    tokens = jax.lax.cond(jnp.all(temperature <= 0), lambda _: greedy, draw, None)
    chosen = jnp.take_along_axis(logprobs, tokens[:, None], axis=-1)[:, 0]
    if not top:
        return tokens, chosen, None, None
    top_lp, top_ids = jax.lax.top_k(logprobs, min(TOP_LOGPROBS, logprobs.shape[-1]))
    if top_lp.shape[-1] < TOP_LOGPROBS:  # a tiny vocabulary: pad to the fixed width, never chosen
        pad = ((0, 0), (0, TOP_LOGPROBS - top_lp.shape[-1]))
        top_lp, top_ids = jnp.pad(top_lp, pad, constant_values=-jnp.inf), jnp.pad(top_ids, pad)
    return tokens, chosen, top_lp, top_ids.astype(jnp.int32)


def _inverse_cdf(probs, u):
    """Row-wise categorical draw from (unnormalized) probs [B, N] with one uniform per row:
    far cheaper on CPU than Gumbel noise over the whole vocabulary."""
    cdf = jnp.cumsum(probs, axis=-1)
    target = u[:, None] * cdf[:, -1:]
    return jnp.minimum(jnp.sum(cdf < target, axis=-1), probs.shape[-1] - 1).astype(jnp.int32)

