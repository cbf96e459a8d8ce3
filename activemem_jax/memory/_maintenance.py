"""Deferred maintenance at episode end (paper 3.3 "TreeMaintenance",
docs/design_memory.md#maintenance).

1. Utility: S(n) = mean return of this episode's activations of n;
   utility_ema <- (1 - beta) utility_ema + beta S for activated nodes. With idle_decay, a
   node no activation reached this episode scores S = 0 (utility_ema <- (1 - beta)
   utility_ema): a memory that is no longer read sinks towards the prune line; without
   it, an unread node keeps its utility. With first_sets, a node's first activation sets
   S_EMA = S (no prior of 0 to climb out of), so a node read once is not ranked below a
   stale node read many times long ago.
2. Prune: the floor(prune_fraction * M) valid non-root nodes with the lowest utility
   (ties: lower slot first) are removed one after another; each one's children go to its
   parent. A prune whose children would overflow the parent's children row is skipped.
3. Merge: within each sibling group, in ascending slot order, a node joins the lowest
   slot sibling before it that is still a survivor, has cosine > tau_merge to it (both
   embeddings as they were when merging started) and can take its children without
   overflowing; otherwise it is a survivor. A survivor that absorbed nodes becomes the
   normalized mean of its group; utility is the group mean, visits the group sum; the
   absorbed nodes' children move to the survivor.
4. Children rows are rebuilt (ascending slots), depths recomputed, episode accumulators reset.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from activemem_jax.memory._state import Tree, check_tree, children_from_parents, depths_from_parents, normalize

_BIG = jnp.iinfo(jnp.int32).max


def end_episode(tree: Tree, beta: float = 0.1, prune_fraction: float = 0.05,
                tau_merge: float = 0.9, merge_batch: int = 1024, return_counts: bool = False,
                idle_decay: bool = False, first_sets: bool = False):
    """Run the episode-end maintenance; returns the new tree (and, with return_counts,
    the number of nodes pruned and merged away)."""
    check_tree(tree, "end_episode")
    tree = _update_utility(tree, beta, idle_decay, first_sets)
    before = jnp.sum(tree.valid)
    tree = _prune(tree, prune_fraction)
    pruned = before - jnp.sum(tree.valid)
    tree = _merge_siblings(tree, tau_merge, merge_batch)
    merged = before - pruned - jnp.sum(tree.valid)
    tree = tree.replace(
        children=children_from_parents(tree.parent, tree.valid, tree.max_children),
        depth=depths_from_parents(tree.parent, tree.valid, tree.max_depth),
        episode_return_sum=jnp.zeros_like(tree.episode_return_sum),
        episode_hits=jnp.zeros_like(tree.episode_hits),
    )
    return (tree, pruned.astype(jnp.int32), merged.astype(jnp.int32)) if return_counts else tree


def _update_utility(tree: Tree, beta, idle_decay: bool = False, first_sets: bool = False) -> Tree:
    hit = tree.episode_hits > 0
    score = tree.episode_return_sum / jnp.maximum(tree.episode_hits, 1).astype(jnp.float32)
    moves = (hit | tree.valid) if idle_decay else hit  # idle: S = 0 for an unread valid node
    ema = jnp.where(moves, (1.0 - beta) * tree.utility_ema + beta * jnp.where(hit, score, 0.0), tree.utility_ema)
    if first_sets:  # visits already counts this episode's hits: equal means never activated before
        ema = jnp.where(hit & (tree.visits == tree.episode_hits), score, ema)
    return tree.replace(utility_ema=ema.astype(jnp.float32))


def _clear(tree: Tree, node, do) -> Tree:
    """Free `node`'s slot when `do`."""
    def put(arr, value):
        return arr.at[node].set(jnp.where(do, value, arr[node]))

    return tree.replace(
        emb=put(tree.emb, jnp.zeros((tree.dim,), jnp.float32)),
        parent=put(tree.parent, -1), valid=put(tree.valid, False), depth=put(tree.depth, 0),
        children=put(tree.children, jnp.full((tree.max_children,), -1, jnp.int32)),
        utility_ema=put(tree.utility_ema, 0.0), visits=put(tree.visits, 0),
        episode_return_sum=put(tree.episode_return_sum, 0.0), episode_hits=put(tree.episode_hits, 0))


def _prune(tree: Tree, prune_fraction) -> Tree:
    n, c = tree.capacity, tree.max_children
    nonroot = tree.valid.at[0].set(False)
    m = jnp.sum(nonroot).astype(jnp.float32)
    k = jnp.floor(jnp.float32(prune_fraction) * m).astype(jnp.int32)
    order = jnp.argsort(jnp.where(nonroot, tree.utility_ema, jnp.inf), stable=True)

    def prune_one(i, t: Tree) -> Tree:
        node = order[i]
        p = t.parent[node]
        row_p, row_n = t.children[p], t.children[node]
        fits = jnp.sum(row_p >= 0) - 1 + jnp.sum(row_n >= 0) <= c
        merged = jnp.concatenate([jnp.where(row_p == node, -1, row_p), row_n])
        compact = merged[jnp.argsort(merged < 0, stable=True)][:c]
        moved = jnp.where((row_n >= 0) & fits, row_n, n)
        t = t.replace(children=t.children.at[p].set(jnp.where(fits, compact, row_p)),
                      parent=t.parent.at[moved].set(p, mode="drop"))
        return _clear(t, node, fits)

    return jax.lax.fori_loop(0, k, prune_one, tree)


def _merge_siblings(tree: Tree, tau_merge, batch: int) -> Tree:
    n, c = tree.capacity, tree.max_children
    positions = jnp.arange(c)
    child_count = jnp.sum(tree.children >= 0, axis=-1)

    def group(row):
        members = jnp.sort(jnp.where(row >= 0, row, _BIG))
        ok = members < _BIG
        safe = jnp.where(ok, members, 0)
        e = tree.emb[safe]
        sims = e @ e.T
        cnt = child_count[safe]

        def step(j, carry):
            surv, load = carry
            cand = ((positions < j) & (surv == positions) & ok & (sims[:, j] > tau_merge)
                    & (load + cnt[j] <= c))
            join = ok[j] & jnp.any(cand)
            i = jnp.argmax(cand)
            return (surv.at[j].set(jnp.where(join, i, j)),
                    load.at[i].add(jnp.where(join, cnt[j], 0)))

        surv, _ = jax.lax.fori_loop(0, c, step, (positions, cnt))
        return jnp.where(ok, members, n), members[surv]

    # Only rows with >= 2 children can merge; at most (N - 1) / 2 such rows exist.
    rows = jnp.nonzero(child_count >= 2, size=n // 2 + 1, fill_value=n)[0]
    table = jnp.where((rows < n)[:, None], tree.children[jnp.minimum(rows, n - 1)], -1)
    members, survivors = jax.lax.map(group, table, batch_size=min(batch, n // 2 + 1))
    target = jnp.arange(n).at[members.reshape(-1)].set(survivors.reshape(-1), mode="drop")
    live = tree.valid.at[0].set(False)
    absorbed = live & (target != jnp.arange(n))
    group_size = jnp.zeros((n,), jnp.int32).at[target].add(live.astype(jnp.int32))
    grows = live & ~absorbed & (group_size > 1)

    livef = live.astype(jnp.float32)
    emb_sum = jnp.zeros_like(tree.emb).at[target].add(tree.emb * livef[:, None])
    util_sum = jnp.zeros_like(tree.utility_ema).at[target].add(tree.utility_ema * livef)
    visit_sum = jnp.zeros_like(tree.visits).at[target].add(tree.visits * live)
    unit, _ = normalize(emb_sum)
    size = jnp.maximum(group_size, 1).astype(jnp.float32)

    keep = tree.valid & ~absorbed
    parent = jnp.where(keep & (tree.parent >= 0), target[jnp.maximum(tree.parent, 0)], -1)
    zero_f = jnp.zeros_like(tree.utility_ema)
    return tree.replace(
        emb=jnp.where(grows[:, None], unit, jnp.where(keep[:, None], tree.emb, 0.0)),
        parent=parent.astype(jnp.int32),
        valid=keep,
        utility_ema=jnp.where(grows, util_sum / size, jnp.where(keep, tree.utility_ema, zero_f)),
        visits=jnp.where(grows, visit_sum, jnp.where(keep, tree.visits, 0)),
        episode_return_sum=jnp.where(keep, tree.episode_return_sum, zero_f),
        episode_hits=jnp.where(keep, tree.episode_hits, 0),
        depth=jnp.where(keep, tree.depth, 0),
    )
