"""HLMT state: a pytree of fixed-size arrays with masks (no Python object per node).

Slot 0 is the virtual root (valid, depth 0, no semantics). A free slot has
`valid=False`, `parent=-1`, an all -1 children row and zero statistics.
"""

from __future__ import annotations

import chex
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

EPS = 1e-12


@flax.struct.dataclass
class Tree:
    """Hierarchical Latent Memory Tree with capacity N (root included)."""
    emb: jax.Array                 # [N, d] float32, unit norm for valid non-root nodes
    parent: jax.Array              # [N] int32, -1 for the root and free slots
    children: jax.Array            # [N, max_children] int32, -1 = empty
    depth: jax.Array               # [N] int32 (root 0)
    valid: jax.Array               # [N] bool
    utility_ema: jax.Array         # [N] float32, S_EMA
    visits: jax.Array              # [N] int32, activations over all episodes
    episode_return_sum: jax.Array  # [N] float32, this episode's activation returns
    episode_hits: jax.Array        # [N] int32, this episode's activations
    max_depth: int = flax.struct.field(pytree_node=False, default=8)

    @property
    def capacity(self) -> int:
        return self.emb.shape[-2]

    @property
    def dim(self) -> int:
        return self.emb.shape[-1]

    @property
    def max_children(self) -> int:
        return self.children.shape[-1]


@flax.struct.dataclass
class Path:
    """A retrieved path: `nodes[:length]` from depth 1 down (root excluded), -1 padded."""
    nodes: jax.Array   # [max_depth] int32
    length: jax.Array  # [] int32
    sims: jax.Array    # [max_depth] float32, cosine of each picked node to the query (0 pad)

    @property
    def mask(self) -> jax.Array:
        return jnp.arange(self.nodes.shape[-1]) < self.length[..., None]


def check_tree(tree: Tree, where: str) -> None:
    """Shape and dtype checks at a tree op's entry (static: they run once per trace, free
    under jit): every per-node array has the same N, children is [N, C], the index arrays
    are int32. A wrong tree fails here with the shapes named, not deep inside a gather."""
    chex.assert_rank(tree.emb, 2, custom_message=f"{where}: tree.emb must be [N, d] (one tree; vmap a batch)")
    n = tree.emb.shape[0]
    chex.assert_shape([tree.parent, tree.depth, tree.valid, tree.utility_ema, tree.visits,
                       tree.episode_return_sum, tree.episode_hits], (n,),
                      custom_message=f"{where}: every per-node array of the tree must be [N={n}]")
    chex.assert_shape(tree.children, (n, None), custom_message=f"{where}: tree.children must be [N={n}, C]")
    chex.assert_type([tree.parent, tree.children, tree.depth], jnp.int32,
                     custom_message=f"{where}: tree index arrays must be int32")


def check_vector(x, dim: int, name: str, where: str) -> None:
    """A [dim] floating vector (a query, an embedding, an update target) at an op's entry."""
    chex.assert_shape(x, (dim,), custom_message=f"{where}: {name} must be [d={dim}], the tree's dim")
    chex.assert_type(x, float, custom_message=f"{where}: {name} must be floating")


def init_tree(capacity: int, dim: int, max_children: int = 16, max_depth: int = 8) -> Tree:
    """An empty tree: only the virtual root (slot 0) is valid."""
    if capacity < 2:
        raise ValueError(f"capacity={capacity}: need the root plus at least one node")
    if max_children < 1 or max_depth < 1:
        raise ValueError(f"max_children={max_children} and max_depth={max_depth} must be >= 1")
    n = capacity
    return Tree(
        emb=jnp.zeros((n, dim), jnp.float32),
        parent=jnp.full((n,), -1, jnp.int32),
        children=jnp.full((n, max_children), -1, jnp.int32),
        depth=jnp.zeros((n,), jnp.int32),
        valid=jnp.zeros((n,), bool).at[0].set(True),
        utility_ema=jnp.zeros((n,), jnp.float32),
        visits=jnp.zeros((n,), jnp.int32),
        episode_return_sum=jnp.zeros((n,), jnp.float32),
        episode_hits=jnp.zeros((n,), jnp.int32),
        max_depth=max_depth,
    )


def normalize(x, axis=-1):
    """(x / |x|, |x|) in float32; a zero vector stays zero."""
    x = jnp.asarray(x, jnp.float32)
    norm = jnp.sqrt(jnp.sum(x * x, axis=axis, keepdims=True))
    return x / jnp.maximum(norm, EPS), norm[..., 0]


def children_from_parents(parent, valid, max_children: int):
    """Children table [N, C] from the parent array: each row lists its children by
    ascending index. O(N log N), no loop over nodes."""
    n = parent.shape[0]
    is_child = valid & (parent >= 0)
    key = jnp.where(is_child, parent, n)
    order = jnp.argsort(key, stable=True)
    sorted_key = key[order]
    pos = jnp.arange(n) - jnp.searchsorted(sorted_key, sorted_key, side="left")
    ok = (sorted_key < n) & (pos < max_children)
    rows = jnp.where(ok, sorted_key, n)  # out of range -> dropped
    return jnp.full((n, max_children), -1, jnp.int32).at[rows, jnp.where(ok, pos, 0)].set(
        order.astype(jnp.int32), mode="drop")


def depths_from_parents(parent, valid, max_depth: int):
    """Depth of every valid node (root 0) by max_depth rounds of pointer chasing."""
    is_child = valid & (parent >= 0)
    safe_parent = jnp.maximum(parent, 0)

    def step(_, depth):
        return jnp.where(is_child, depth[safe_parent] + 1, 0)

    return jax.lax.fori_loop(0, max_depth + 1, step, jnp.zeros_like(parent)).astype(jnp.int32)


def from_parents(emb, parent, capacity: int, max_children: int = 16, max_depth: int = 8) -> Tree:
    """Build a tree from node embeddings [M, d] and parent indices [M] (node i goes to
    slot i + 1; parent 0 is the root, parent j > 0 is node j - 1's slot j). Nodes must
    be listed after their parents. For benchmarks and bulk loading."""
    emb = jnp.asarray(emb, jnp.float32)
    m, d = emb.shape
    parent_np = np.asarray(parent, np.int64)
    if m + 1 > capacity:
        raise ValueError(f"{m} nodes do not fit capacity {capacity} (root included)")
    if parent_np.shape != (m,) or (parent_np < 0).any() or (parent_np > np.arange(m)).any():
        raise ValueError("parent[i] must be in [0, i] (0 = root, j = node j - 1's slot)")
    fanout = np.bincount(parent_np, minlength=capacity).max()
    if fanout > max_children:
        raise ValueError(f"a node has {fanout} children; max_children={max_children}")
    tree = init_tree(capacity, d, max_children, max_depth)
    slots = jnp.arange(1, m + 1)
    parent_arr = tree.parent.at[slots].set(jnp.asarray(parent_np, jnp.int32))
    valid = tree.valid.at[slots].set(True)
    depth = depths_from_parents(parent_arr, valid, max_depth + 1)
    if int(depth.max()) > max_depth:
        raise ValueError(f"the tree is {int(depth.max())} deep; max_depth={max_depth}")
    unit, _ = normalize(emb)
    return tree.replace(emb=tree.emb.at[slots].set(unit), parent=parent_arr, valid=valid,
                        children=children_from_parents(parent_arr, valid, max_children),
                        depth=depth)
