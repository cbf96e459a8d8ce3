"""Episodes of streams, in order: the data order of a memory that persists across episodes.

    order = StreamOrder(tasks, lanes=4, seed=0)   # tasks carry "stream" and "episode"
    batch = next(order)                            # one episode from each of 4 streams
    state = order.get_state(); order.set_state(state)  # checkpointed with the run

A task family whose episodes form streams (`envs/dossier.py`) asks, in episode e, about
what episodes before e showed; a shuffled order would ask before it shows. The streams
are shuffled (by seed, again each pass); `lanes` streams run side by side, each lane
walking its stream's episodes in order, so step j of a block serves episode j of every
lane's stream; when a block's streams end, the next block starts. Several processes
take disjoint lanes (process i: lanes i, i + count, ...). A stream's episodes must be
numbered 0..E-1, all streams of one length E.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def is_streamed(tasks: Sequence[dict]) -> bool:
    return bool(tasks) and all("stream" in t and "episode" in t for t in tasks)


class StreamOrder:
    def __init__(self, tasks: Sequence[dict], lanes: int, seed: int = 0, process_index: int = 0,
                 process_count: int = 1):
        by: dict = {}
        for t in tasks:
            by.setdefault(t["stream"], []).append(t)
        self.streams = [sorted(v, key=lambda t: t["episode"]) for _, v in sorted(by.items())]
        lengths = {len(s) for s in self.streams}
        if len(lengths) != 1 or any([t["episode"] for t in s] != list(range(len(s))) for s in self.streams):
            raise ValueError("stream tasks need episodes 0..E-1 in every stream, all streams of one length "
                             f"(lengths seen: {sorted(lengths)})")
        total = lanes * process_count
        if lanes < 1 or len(self.streams) < total:
            raise ValueError(f"{len(self.streams)} streams cannot fill {lanes} lane(s) x {process_count} "
                             "process(es) (train.prompts_per_step): add streams (data.dossier.streams) or "
                             "lower train.prompts_per_step")
        self.lanes, self.seed, self.index, self.count = lanes, seed, process_index, process_count
        self.episodes = lengths.pop()
        self.blocks_per_pass = len(self.streams) // total  # leftover streams wait for the next pass
        self.step = 0

    def _order(self, n_pass: int) -> np.ndarray:
        return np.random.default_rng([self.seed, n_pass]).permutation(len(self.streams))

    def __iter__(self):
        return self

    def __next__(self) -> list[dict]:
        block, episode = divmod(self.step, self.episodes)
        n_pass, block = divmod(block, self.blocks_per_pass)
        order = self._order(n_pass)
        total = self.lanes * self.count
        mine = order[block * total:(block + 1) * total][self.index::self.count]
        self.step += 1
        return [self.streams[s][episode] for s in mine]

    def get_state(self) -> dict:
        return {"step": self.step}

    def set_state(self, state: dict) -> None:
        self.step = int(state["step"])


def join_episodes(parts: Sequence[Sequence[dict]]) -> list[dict]:
    """Consecutive episodes of the same streams as one task each (`train.grpo_span`):
    parts[k][i] is episode e_i + k of lane i's stream (k successive `StreamOrder` batches);
    the joined task has their turns in order, so one rollout carries its memory, and its
    return, across them. Raises ValueError if a lane's parts are not one stream's
    consecutive episodes (the span crossed a stream's end)."""
    out = []
    for lane in zip(*parts):
        first = lane[0]
        if any(t["stream"] != first["stream"] or t["episode"] != first["episode"] + k for k, t in enumerate(lane)):
            raise ValueError(f"episodes {[(t['stream'], t['episode']) for t in lane]} are not one stream's in "
                             "order: train.grpo_span must divide the stream's episodes and start at one of its "
                             "multiples")
        joined = {**first, "id": f"{first['id']}+{len(lane) - 1}", "turns": [x for t in lane for x in t["turns"]]}
        if "live" in first:
            joined["live"] = max(int(t["live"]) for t in lane)
        out.append(joined)
    return out


__all__ = ["StreamOrder", "is_streamed", "join_episodes"]
