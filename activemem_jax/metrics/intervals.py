"""Intervals for held-out scores: `t_interval`, Student's t over trained seeds (the ablation
table), and `bootstrap_margin`, a 95% interval for "the trained controllers beat this rule"
that covers both sources of chance in a held-out score: which seeds were trained and which
questions were asked.

Scores come per unit (a recall task, or a dossier stream with its episodes: the
questions that share a memory): `trained[s][u]` is seed s's accuracy on unit u, and a
reference is either one rule's accuracy per unit (the same for every seed) or one value
per seed and unit (the untrained controller of each seed). The margin is the mean over
seeds of the mean over units of trained minus reference.

The interval is a two-level bootstrap: each replicate draws the seeds with replacement
and, independently, the units with replacement (one draw of units for every seed and for
the reference: the same test questions were asked of all of them, so the comparison is
paired), and recomputes the margin; the interval is the 2.5th and 97.5th percentiles. With
two seeds a quarter of the replicates hold the weaker seed twice, so the lower end falls
near the weaker seed's own margin less its question noise.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence, Union

import numpy as np

Reference = Union[Mapping[str, float], Sequence[Mapping[str, float]]]


def _matrix(trained: Sequence[Mapping[str, float]], reference: Reference) -> tuple[np.ndarray, list]:
    """(seeds x units) trained minus reference, on the units every seed and the reference scored."""
    if not trained:
        raise ValueError("no trained seed to compare")
    per_seed = list(reference) if isinstance(reference, (list, tuple)) else [reference] * len(trained)
    if len(per_seed) != len(trained):
        raise ValueError(f"{len(per_seed)} reference rows for {len(trained)} trained seeds")
    units = sorted(set(trained[0]))
    for i, (t, r) in enumerate(zip(trained, per_seed)):
        if set(t) != set(units) or not set(units) <= set(r):
            raise ValueError(f"seed {i}: the trained and reference scores are not on the same units "
                             f"({sorted(set(units) ^ set(t))[:3]} or {sorted(set(units) - set(r))[:3]} missing)")
    if not units:
        raise ValueError("no scored unit to compare")
    diff = np.asarray([[t[u] - r[u] for u in units] for t, r in zip(trained, per_seed)], np.float64)
    return diff, units


def bootstrap_margin(trained: Sequence[Mapping[str, float]], reference: Reference, *, replicates: int = 4000,
                     seed: int = 0, level: float = 0.95) -> dict:
    """{"margin", "lo", "hi", "seeds", "units"}: the margin of the trained seeds over the
    reference and its `level` interval from the two-level bootstrap (module doc)."""
    diff, units = _matrix(trained, reference)
    s, u = diff.shape
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, s, size=(replicates, s))                 # seeds drawn per replicate
    counts = rng.multinomial(u, np.full(u, 1.0 / u), size=replicates)  # units drawn per replicate
    per_seed = diff @ counts.T / u                                     # (seeds, replicates)
    margins = per_seed[seeds, np.arange(replicates)[:, None]].mean(axis=1)
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(margins, [tail, 1.0 - tail])
    return {"margin": float(diff.mean()), "lo": float(lo), "hi": float(hi), "seeds": s, "units": u}


# Student's t quantile t(0.975, n - 1) for n - 1 = 1..9 (a 95% two-sided interval)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def t_interval(values) -> tuple[float, float]:
    """(mean, half-width of the 95% Student's t interval over `values`, one per trained seed;
    nan with one value). Past 10 values the normal quantile 1.96 stands in for t."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, T975.get(n - 1, 1.96) * sd / math.sqrt(n)


__all__ = ["T975", "bootstrap_margin", "t_interval"]
