"""HLMT retrieval benchmark: greedy tree traversal vs flat exact cosine search.

256 queries, d = 576, trees of 2^10 .. 2^16 slots, two shapes: balanced with branching 8
(children near their parent in embedding space) and random shapes grown by inserts.
Flat search is a matmul over all valid nodes + argmax, measured in the same run. Also
times `end_episode` and `commit` at the largest size. Prints a table, writes JSON.

    python launch/bench_tree.py [--sizes 10,12,14,16] [--queries 256] [--out FILE]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # launch/, configs/

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from launch.bench_report import write_json
from activemem_jax.memory import tree as hlmt

DIM, MAX_CHILDREN, MAX_DEPTH = 576, 16, 8


def timed(fn, repeats=5) -> float:
    jax.block_until_ready(fn())  # compile + warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def balanced_tree(capacity: int, rng) -> hlmt.Tree:
    m = capacity - 1
    parents = np.arange(m) // 8  # node i sits in slot i + 1; its parent's slot is i // 8
    emb = np.zeros((m, DIM), np.float32)
    for i in range(m):  # a child is its parent's direction plus noise
        base = emb[parents[i] - 1] if parents[i] > 0 else np.zeros(DIM, np.float32)
        v = base + rng.standard_normal(DIM).astype(np.float32) * (0.6 / np.sqrt(DIM) if parents[i] else 1.0)
        emb[i] = v / np.linalg.norm(v)
    return hlmt.from_parents(emb, parents, capacity, MAX_CHILDREN, MAX_DEPTH)


def random_tree(capacity: int, seed: int) -> hlmt.Tree:
    """Grow by inserts: each new node goes under a random existing slot."""
    m = capacity - 1
    key = jax.random.PRNGKey(seed)
    vecs = jax.random.normal(key, (m, DIM))
    frac = jax.random.uniform(jax.random.PRNGKey(seed + 1), (m,))

    @jax.jit
    def grow(t):
        def step(t, xs):
            i, v, f = xs
            parent = jnp.floor(f * (i + 1)).astype(jnp.int32)  # among slots 0..i
            t, _ = hlmt.insert_node(t, parent, v)
            return t, None

        t, _ = jax.lax.scan(step, t, (jnp.arange(m), vecs, frac))
        return t

    return grow(hlmt.init_tree(capacity, DIM, MAX_CHILDREN, MAX_DEPTH))


def queries_near_nodes(tree: hlmt.Tree, n: int, rng) -> jnp.ndarray:
    valid = np.flatnonzero(np.asarray(tree.valid))[1:]
    picks = rng.choice(valid, n)
    q = np.asarray(tree.emb)[picks] + rng.standard_normal((n, DIM)).astype(np.float32) * 0.02
    return jnp.asarray(q)


traverse_batch = jax.jit(jax.vmap(hlmt.traverse, in_axes=(None, 0, None)))


@jax.jit
def flat_search(tree: hlmt.Tree, queries):
    q = queries / jnp.linalg.norm(queries, axis=-1, keepdims=True)
    sims = tree.emb @ q.T  # [N, Q]
    sims = jnp.where(tree.valid.at[0].set(False)[:, None], sims, -jnp.inf)
    return jnp.argmax(sims, axis=0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,12,14,16", help="log2 capacities")
    ap.add_argument("--queries", type=int, default=256)
    ap.add_argument("--out", default="bench_results/tree.json")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    print(f"{args.queries} queries, d={DIM}, max_children={MAX_CHILDREN}, max_depth={MAX_DEPTH}, "
          f"{jax.devices()[0].platform}")
    print(f"{'shape':>8} {'N':>6} {'depth':>5} {'tree ms':>8} {'flat ms':>8} {'speedup':>7} {'recall@1':>8}")
    largest = None
    for log2 in (int(s) for s in args.sizes.split(",")):
        n = 2 ** log2
        for shape in ("balanced", "random"):
            t0 = time.perf_counter()
            tree = balanced_tree(n, rng) if shape == "balanced" else random_tree(n, log2)
            build_s = time.perf_counter() - t0
            q = queries_near_nodes(tree, args.queries, rng)
            tree_s = timed(lambda: traverse_batch(tree, q, 0.0))
            flat_s = timed(lambda: flat_search(tree, q))
            paths = traverse_batch(tree, q, 0.0)
            leaf = np.asarray(paths.nodes)[np.arange(args.queries), np.asarray(paths.length) - 1]
            recall = float((leaf == np.asarray(flat_search(tree, q))).mean())
            row = dict(shape=shape, capacity=n, depth=int(np.asarray(tree.depth).max()),
                       tree_ms=tree_s * 1e3, flat_ms=flat_s * 1e3, speedup=flat_s / tree_s,
                       recall_at_1=recall, build_s=build_s)
            rows.append(row)
            print(f"{shape:>8} {n:>6} {row['depth']:>5} {row['tree_ms']:>8.2f} {row['flat_ms']:>8.2f} "
                  f"{row['speedup']:>7.1f} {recall:>8.2f}")
            largest = (tree, paths)
    tree, paths = largest
    n = tree.capacity
    t = jax.jit(jax.vmap(hlmt.record_activations, in_axes=(None, 0, None)))
    recorded = jax.tree.map(lambda x: x[0], t(tree, jax.tree.map(lambda x: x[:1], paths), 1.0))
    end_s = timed(lambda: jax.jit(hlmt.end_episode)(recorded, 0.1, 0.05, 0.9), repeats=3)
    r, l = 64, 16
    logs = hlmt.OpLog(op=jnp.ones((r, l), jnp.int32), target=jnp.zeros((r, l), jnp.int32),
                      vec=jax.random.normal(jax.random.PRNGKey(0), (r, l, DIM)),
                      alpha=jnp.zeros((r, l, DIM)), slot=jnp.zeros((r, l), jnp.int32),
                      length=jnp.full((r,), l, jnp.int32))
    pruned = jax.jit(hlmt.end_episode)(recorded, 0.1, 0.05, 0.9)  # frees ~5% of slots
    commit_s = timed(lambda: jax.jit(hlmt.commit)(pruned, logs), repeats=3)
    print(f"at N={n}: end_episode {end_s * 1e3:.1f} ms, commit of {r}x{l} inserts {commit_s * 1e3:.1f} ms")
    write_json(args.out, dict(rows=rows, end_episode_ms=end_s * 1e3, commit_ms=commit_s * 1e3,
                       commit_ops=r * l, capacity=n))


if __name__ == "__main__":
    main()
