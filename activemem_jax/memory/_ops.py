"""Online HLMT operations: traverse, insert, update, record activations.

All are pure, jit- and vmap-able. Each traversal level reads one children row
(O(max_children * d)); no operation scans all N embeddings. Ties between equally
similar children (cosines within TIE_TOL of the best) go to the lowest slot index, so
every backend picks the same child despite rounding differences.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp

from activemem_jax.memory._state import EPS, Path, Tree, check_tree, check_vector, normalize

_BIG = jnp.iinfo(jnp.int32).max
TIE_TOL = 1e-6


def _best_child(tree: Tree, node, unit_query):
    """(child slot, cosine, has_child) of `node`'s most similar child to a unit query."""
    row = tree.children[node]
    ok = row >= 0
    sims = tree.emb[jnp.maximum(row, 0)] @ unit_query
    sims = jnp.where(ok, sims, -jnp.inf)
    best = jnp.max(sims)
    pick = jnp.min(jnp.where(ok & (sims >= best - TIE_TOL), row, _BIG))
    return pick, best, jnp.any(ok)


def best_child(tree: Tree, node, query):
    """(child slot, cosine, has_child) of `node`'s child most similar to `query` [d]."""
    unit, _ = normalize(query)
    return _best_child(tree, jnp.asarray(node, jnp.int32), unit)


@functools.partial(jax.jit, static_argnames=("closer",))  # one compile per shape outside a jit
def traverse(tree: Tree, query, tau_stop: float = 0.5, closer: bool = False) -> Path:
    """Greedy top-down retrieval: from the root, step to the child with the highest
    cosine to `query` [d] while that cosine >= tau_stop, up to max_depth levels. With
    `closer`, a step down also needs the child to be closer to the query than the node it
    hangs from (a child refines its parent: a query its parent answers best stops there)."""
    check_tree(tree, "traverse")
    check_vector(query, tree.dim, "query", "traverse")
    unit, _ = normalize(query)
    depth = tree.max_depth

    def level(carry):
        i, cur, _, nodes, sims = carry
        pick, best, has_child = _best_child(tree, cur, unit)
        take = has_child & (best >= tau_stop)
        if closer:
            here = jnp.where(i > 0, sims[jnp.maximum(i - 1, 0)], -jnp.inf)
            take = take & (best > here)
        nodes = nodes.at[i].set(jnp.where(take, pick, -1))
        sims = sims.at[i].set(jnp.where(take, best, 0.0))
        return i + take.astype(jnp.int32), jnp.where(take, pick, cur), take, nodes, sims

    def going(carry):  # stops as soon as a level takes nothing (early exit, also under vmap)
        i, _, active, _, _ = carry
        return active & (i < depth)

    init = (jnp.int32(0), jnp.int32(0), jnp.bool_(True), jnp.full((depth,), -1, jnp.int32),
            jnp.zeros((depth,), jnp.float32))
    length, _, _, nodes, sims = jax.lax.while_loop(going, level, init)
    return Path(nodes=nodes, length=length, sims=sims)


def path_leaf(tree: Tree, path: Path):
    """The path's last node's embedding [d] (zeros for an empty path)."""
    leaf = path.nodes[jnp.maximum(path.length - 1, 0)]
    return jnp.where(path.length > 0, tree.emb[jnp.maximum(leaf, 0)], 0.0)


def path_mean(tree: Tree, path: Path):
    """Mean of the path's node embeddings [d] (zeros for an empty path)."""
    mask = path.mask.astype(jnp.float32)
    total = jnp.sum(tree.emb[jnp.maximum(path.nodes, 0)] * mask[:, None], axis=0)
    return total / jnp.maximum(path.length, 1).astype(jnp.float32)


@jax.jit  # one compile per tree shape where it is called outside a jit (its loop's body is a new closure)
def insert_node(tree: Tree, parent, emb):
    """Insert normalize(emb) under `parent`, descending into the most similar child while
    a children row is full. Returns (tree, slot), slot = -1 (tree unchanged) when refused:
    invalid parent, zero embedding, max_depth reached, or no free slot."""
    check_tree(tree, "insert_node")
    check_vector(emb, tree.dim, "emb", "insert_node")
    chex.assert_rank(parent, 0, custom_message="insert_node: parent must be one slot (a scalar)")
    n = tree.capacity
    unit, norm = normalize(emb)
    parent = jnp.asarray(parent, jnp.int32)
    in_range = (parent >= 0) & (parent < n)
    start = jnp.clip(parent, 0, n - 1)
    ok = in_range & tree.valid[start] & (norm > EPS)

    def descend(_, carry):
        cur, found, alive = carry
        searching = alive & ~found
        has_free = jnp.any(tree.children[cur] < 0)
        room = tree.depth[cur] < tree.max_depth
        found = found | (searching & room & has_free)
        alive = alive & (room | found)
        pick, _, _ = _best_child(tree, cur, unit)
        move = searching & room & ~has_free
        return jnp.where(move, pick, cur), found, alive

    cur, found, _ = jax.lax.fori_loop(0, tree.max_depth + 1, descend,
                                      (start, jnp.bool_(False), ok))
    free = (~tree.valid).at[0].set(False)
    slot = jnp.argmax(free).astype(jnp.int32)
    ok = ok & found & jnp.any(free)

    row = tree.children[cur]
    pos = jnp.argmax(row < 0)
    new = tree.replace(
        emb=tree.emb.at[slot].set(jnp.where(ok, unit, tree.emb[slot])),
        parent=tree.parent.at[slot].set(jnp.where(ok, cur, tree.parent[slot])),
        depth=tree.depth.at[slot].set(jnp.where(ok, tree.depth[cur] + 1, tree.depth[slot])),
        valid=tree.valid.at[slot].set(ok | tree.valid[slot]),
        children=tree.children.at[cur, pos].set(jnp.where(ok, slot, row[pos])),
    )
    return new, jnp.where(ok, slot, -1)


@jax.jit
def update_node(tree: Tree, idx, target, alpha):
    """e_idx <- normalize((1 - alpha) e_idx + alpha target); alpha scalar or [d].
    A no-op for the root, invalid/out-of-range slots, or a zero result."""
    check_tree(tree, "update_node")
    check_vector(target, tree.dim, "target", "update_node")
    chex.assert_rank(idx, 0, custom_message="update_node: idx must be one slot (a scalar)")
    chex.assert_rank(alpha, {0, 1}, custom_message="update_node: alpha must be a scalar or [d]")
    n = tree.capacity
    idx = jnp.asarray(idx, jnp.int32)
    i = jnp.clip(idx, 0, n - 1)
    alpha = jnp.asarray(alpha, jnp.float32)
    mixed = (1.0 - alpha) * tree.emb[i] + alpha * jnp.asarray(target, jnp.float32)
    unit, norm = normalize(mixed)
    ok = (idx > 0) & (idx < n) & tree.valid[i] & (norm > EPS)
    return tree.replace(emb=tree.emb.at[i].set(jnp.where(ok, unit, tree.emb[i])))


def credit_slots(tree: Tree, slots, episode_return):
    """Credit `episode_return` (broadcast to `slots`) to each slot of `slots` (any shape;
    negative entries skipped): one activation each. A written node's credit, and what
    `record_activations` gives each node of a path."""
    check_tree(tree, "credit_slots")
    s = jnp.asarray(slots, jnp.int32).reshape(-1)
    rows = jnp.where(s >= 0, s, tree.capacity)
    r = jnp.broadcast_to(jnp.asarray(episode_return, jnp.float32), jnp.shape(slots)).reshape(-1)
    return tree.replace(
        episode_return_sum=tree.episode_return_sum.at[rows].add(r, mode="drop"),
        episode_hits=tree.episode_hits.at[rows].add(1, mode="drop"),
        visits=tree.visits.at[rows].add(1, mode="drop"),
    )


def record_activations(tree: Tree, path: Path, episode_return):
    """Credit `episode_return` to every node on `path` (one activation each)."""
    check_tree(tree, "record_activations")
    chex.assert_rank([path.nodes, path.length], [1, 0],
                     custom_message="record_activations: one path (nodes [D], length [])")
    return credit_slots(tree, jnp.where(path.mask, path.nodes, -1), episode_return)  # padding -> skipped
