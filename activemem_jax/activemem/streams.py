"""Memory trees scoped to a stream (`policy.tree_scope="stream"`): one persistent tree per
stream of episodes, as an agent keeps one memory over its own lifetime.

    store = init_store(slots=16, capacity=256, dim=576, max_children=16, max_depth=4)
    store, slots = assign(store, tasks)              # host: a slot per task's stream
    snapshots = gather(store, slots)                 # [E] trees the episodes start from
    trees, resolved, credit, counts = finish_groups(cfg, snapshots, logs, paths, turns, returns, group_size)
    store = scatter(store, slots, trees, group_size) # the committed trees go back

A stream's episode 0 starts from an empty tree; its later episodes start from what the
episodes before them committed. Tasks carry "stream" and "episode" (`data/streams.py`).

GRPO rolls out G copies of an episode (a group, consecutive tasks): all of them read the
same snapshot of their stream's tree, and one tree must come out. The group's first
rollout (an unbiased sample of the policy, not the best one) commits its writes; every
member's activations of the snapshot's nodes are credited with that member's return, so
a node's utility averages over the whole group. The nodes another member wrote never
exist in the stream's tree, so nothing credits them.

The store is a fixed number of slots (`policy.stream_slots`), so a checkpoint has one
shape: a stream takes a free slot, or the least recently used one not in this batch.
"""

from __future__ import annotations

from typing import Sequence

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from activemem_jax.memory import tree as hlmt


@flax.struct.dataclass
class StreamStore:
    ids: jax.Array        # [L] int32 stream id held by each slot (-1 free)
    last: jax.Array       # [L] int32 clock of the slot's last use
    clock: jax.Array      # [] int32
    trees: hlmt.Tree      # [L] batched trees


def init_store(slots: int, capacity: int, dim: int, max_children: int, max_depth: int) -> StreamStore:
    if slots < 1:
        raise ValueError(f"policy.stream_slots={slots}: need >= 1")
    empty = hlmt.init_tree(capacity, dim, max_children, max_depth)
    return StreamStore(ids=jnp.full((slots,), -1, jnp.int32), last=jnp.zeros((slots,), jnp.int32),
                       clock=jnp.zeros((), jnp.int32),
                       trees=jax.tree.map(lambda x: jnp.broadcast_to(x, (slots,) + x.shape), empty))


def stream_keys(tasks: Sequence[dict]) -> list[tuple[int, int]]:
    """(stream id, episode) of each task; a task without them is refused."""
    out = []
    for t in tasks:
        if "stream" not in t or "episode" not in t:
            raise ValueError(f"task {t.get('id')!r} has no 'stream' / 'episode': policy.tree_scope='stream' "
                             "needs stream tasks (data.name='dossier'); use tree_scope 'episode' or 'persistent'")
        out.append((int(t["stream"]), int(t["episode"])))
    return out


def assign(store: StreamStore, tasks: Sequence[dict]) -> tuple[StreamStore, np.ndarray]:
    """A store slot for each task's stream (host side). A stream already held keeps its
    slot; a new one takes a free slot or the least recently used slot not in this batch.
    A stream at episode 0 starts from an empty tree (a stream seen again, on the next
    pass over the data, starts over)."""
    keys = stream_keys(tasks)
    ids, last = np.asarray(store.ids).copy(), np.asarray(store.last).copy()
    clock = int(store.clock) + 1
    wanted = list(dict.fromkeys(s for s, _ in keys))
    if len(wanted) > len(ids):
        raise ValueError(f"{len(wanted)} streams in one batch; policy.stream_slots is {len(ids)}: raise it")
    slot_of = {int(s): i for i, s in enumerate(ids) if s >= 0 and int(s) in wanted}
    fresh = set()
    for s in wanted:
        if s in slot_of:
            continue
        taken = set(slot_of.values())
        free = [i for i in range(len(ids)) if ids[i] < 0 and i not in taken]
        pool = free or sorted((i for i in range(len(ids)) if i not in taken), key=lambda i: last[i])
        slot_of[s] = pool[0]
        ids[pool[0]] = s
        fresh.add(pool[0])
    for s, episode in keys:
        if episode == 0:
            fresh.add(slot_of[s])
    slots = np.asarray([slot_of[s] for s, _ in keys], np.int32)
    last[slots] = clock
    trees = store.trees
    if fresh:
        reset = np.zeros((len(ids),), bool)
        reset[sorted(fresh)] = True
        empty = hlmt.init_tree(trees.capacity, trees.dim, trees.max_children, trees.max_depth)
        trees = jax.tree.map(lambda cur, e: jnp.where(jnp.asarray(reset).reshape((-1,) + (1,) * e.ndim), e, cur),
                             trees, empty)
    return store.replace(ids=jnp.asarray(ids), last=jnp.asarray(last), clock=jnp.int32(clock), trees=trees), slots


def gather(store: StreamStore, slots) -> hlmt.Tree:
    """The trees of these slots, [E] batched: the episodes' snapshots."""
    idx = jnp.asarray(slots, jnp.int32)
    return jax.tree.map(lambda x: x[idx], store.trees)


def scatter(store: StreamStore, slots, trees: hlmt.Tree, group_size: int) -> StreamStore:
    """Write each group's committed tree (trees [groups]) back to its slot."""
    idx = jnp.asarray(np.asarray(slots)[::group_size], jnp.int32)
    return store.replace(trees=jax.tree.map(lambda all_, new: all_.at[idx].set(new), store.trees, trees))


def snapshot_paths(snapshot_valid, paths):
    """paths [E, turns, D] overlay slots -> the same with every node that was not in the
    episode's snapshot (a node this rollout wrote) set to -1: the nodes whose identity
    every member of a group shares. snapshot_valid [E, N]."""
    safe = jnp.maximum(paths, 0)
    known = jnp.take_along_axis(snapshot_valid, safe.reshape(safe.shape[0], -1), axis=1).reshape(paths.shape)
    return jnp.where((paths > 0) & known, paths, -1)


def credit_ids(snapshot_valid, paths, writer_turn, capacity: int):
    """Node identities the members of a GRPO group share, for the hierarchical advantage
    (docs/design_training.md#hierarchical-advantage): a node of the episode's snapshot is its slot;
    a node this rollout wrote is `capacity + t`, t the turn of its last write. The members
    of a group replay one episode, so the nodes two members wrote at the same turn were
    written from the same observation: one node, wherever each overlay put it, and
    nodes written at different turns are different nodes even in the same overlay slot.
    paths, writer_turn [E, turns, D] (-1 pad). Returns int32 [E, turns, D] in
    [0, capacity + turns) or -1; the id space is capacity + turns wide."""
    paths = jnp.asarray(paths, jnp.int32)
    snap = snapshot_paths(snapshot_valid, paths)
    written = (paths > 0) & (snap < 0) & (jnp.asarray(writer_turn) >= 0)
    return jnp.where(written, capacity + jnp.asarray(writer_turn, jnp.int32), snap)


__all__ = ["StreamStore", "assign", "gather", "init_store", "scatter", "credit_ids", "snapshot_paths", "stream_keys"]
