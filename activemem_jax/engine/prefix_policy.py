"""Which slot a new request takes, and whose cached prefix it reuses: the engine's
prefix-cache policy as plain functions, so that the engine and a host-only model of its
cache (`PrefixCacheModel`, for token accounting without a device) decide alike.

A free slot keeps the tokens it last held. A request takes the free slot whose cached
prefix it continues (at least PREFIX_MIN tokens and KEEP_SHARE of what the slot holds);
otherwise the least recently used free slot (empty ones first) is evicted for it. A
longer prefix held by any other slot is copied in when that saves REUSE_MIN tokens.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

REUSE_MIN = 16  # copy another slot's row only when it saves at least this many tokens
PREFIX_MIN = 16  # a free slot is taken for its cached prefix only if the prompt reuses this many tokens
KEEP_SHARE = 0.5  # ... and at least this share of what the slot holds (else the rest would be lost)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if differ.size else n


def choose(match: Sequence[int], held: Sequence[int], used: Sequence[int], free: Sequence[int]) -> tuple[int, int]:
    """(slot, source). match[s]: prompt tokens slot s's cache could serve; held[s]: tokens
    it holds; used[s]: when it was last used (larger is later); free: the free slots.
    `source` == `slot` unless a prefix is to be copied from `source` into `slot`."""
    useful = [s for s in free if match[s] >= PREFIX_MIN and match[s] >= KEEP_SHARE * held[s]]
    if useful:
        slot = max(useful, key=lambda s: (match[s], used[s]))
    else:
        slot = min(free, key=lambda s: (held[s] > 0, used[s], s))
    source = max(range(len(match)), key=lambda s: (match[s], s == slot))
    if match[source] < match[slot] + REUSE_MIN:
        source = slot
    return slot, source


class PrefixCacheModel:
    """The engine's prefix cache on the host, for calls made one at a time: `slots` rows
    of at most `rows` tokens. `serve(prompt, completion)` returns the prompt tokens the
    engine would have found cached, then holds prompt + completion in the chosen row."""

    def __init__(self, slots: int = 8, rows: int = 32768):
        self.slots, self.rows = slots, rows
        self.history: list[list[int]] = [[] for _ in range(slots)]
        self.used = [0] * slots
        self.clock = 0
        self.stats = {"hits": 0, "misses": 0, "evictions": 0, "copies": 0}

    def serve(self, prompt: Sequence[int], completion: Sequence[int] = ()) -> int:
        limit = len(prompt) - 1  # the last prompt token is always recomputed
        match = [min(common_prefix(h, prompt), limit) for h in self.history]
        held = [len(h) for h in self.history]
        slot, source = choose(match, held, self.used, list(range(self.slots)))
        reuse = match[source]
        if match[slot] < PREFIX_MIN and held[slot] >= PREFIX_MIN:
            self.stats["evictions"] += 1
        self.stats["hits" if reuse >= PREFIX_MIN else "misses"] += 1
        self.stats["copies"] += source != slot
        for s in ([source] if source != slot else []) + [slot, slot]:  # taken (copied from), then released
            self.clock += 1
            self.used[s] = self.clock
        self.history[slot] = (list(prompt) + list(completion))[: self.rows]
        return reuse


__all__ = ["KEEP_SHARE", "PREFIX_MIN", "PrefixCacheModel", "REUSE_MIN", "choose", "common_prefix"]
