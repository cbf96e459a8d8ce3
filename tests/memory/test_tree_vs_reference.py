"""Random op sequences on the JAX tree and the plain-Python reference agree, and the
tree's invariants hold after every op."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activemem_jax.memory import tree as hlmt
from tests.memory.reference_tree import RefTree

CAP, DIM, C, DEPTH = 12, 6, 3, 3
BASES = np.random.default_rng(123).standard_normal((4, DIM)).astype(np.float32)

insert = jax.jit(hlmt.insert_node)
update = jax.jit(hlmt.update_node)
traverse = jax.jit(hlmt.traverse)
record = jax.jit(hlmt.record_activations)
end_episode = jax.jit(hlmt.end_episode)
log_insert = jax.jit(hlmt.log_insert)
log_update = jax.jit(hlmt.log_update)
commit = jax.jit(hlmt.commit, static_argnames="return_slots")


def vector(spec):
    base, scale, seed = spec
    noise = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return (BASES[base] + np.float32(scale) * noise).astype(np.float32)


vectors = st.tuples(st.integers(0, 3), st.sampled_from([0.0, 0.05, 0.3, 2.0]), st.integers(0, 50))
# ("valid", k): the k-th valid slot (mod count); ("raw", s): any slot, maybe invalid/out of range
slots = st.tuples(st.sampled_from(["valid"] * 5 + ["raw"]), st.integers(-1, CAP))
OPS = {
    "insert": st.tuples(st.just("insert"), slots, vectors),
    "update": st.tuples(st.just("update"), slots, vectors, st.sampled_from([0.0, 0.25, 0.5, 1.0])),
    "activate": st.tuples(st.just("activate"), vectors, st.sampled_from([0.0, 0.5, 0.9]),
                          st.sampled_from([0.0, 1.0, 2.0, -1.0])),
    "end": st.tuples(st.just("end"), st.sampled_from([0.0, 0.2, 0.5]),
                     st.sampled_from([0.5, 0.9, 0.999])),
    "rollout": st.tuples(st.just("rollout"),
                         st.lists(st.tuples(st.booleans(), slots, vectors), max_size=5)),
}
# Inserts dominate so trees fill up (full rows, max depth, full capacity all occur).
ops = st.sampled_from(["insert"] * 6 + ["update", "activate", "activate", "end", "rollout"]).flatmap(
    lambda kind: OPS[kind])


def check_invariants(t: hlmt.Tree):
    valid = np.asarray(t.valid)
    parent, depth = np.asarray(t.parent), np.asarray(t.depth)
    children, emb = np.asarray(t.children), np.asarray(t.emb)
    assert valid[0] and parent[0] == -1 and depth[0] == 0
    for k in np.flatnonzero(valid)[1:]:
        p = parent[k]
        assert 0 <= p < CAP and valid[p], f"node {k} has invalid parent {p}"
        assert k in children[p], f"node {k} missing from its parent's row"
        assert depth[k] == depth[p] + 1 <= t.max_depth
        np.testing.assert_allclose(np.linalg.norm(emb[k]), 1.0, atol=1e-5)
        hops, cur = 0, k
        while cur != 0:
            cur, hops = parent[cur], hops + 1
            assert hops <= t.max_depth, "cycle or too deep"
    for k in range(CAP):
        row = children[k][children[k] >= 0]
        assert len(set(row.tolist())) == len(row), f"duplicate children in row {k}"
        for ch in row:
            assert valid[ch] and parent[ch] == k, f"row {k} lists {ch}, whose parent is {parent[ch]}"
        if not valid[k]:
            assert parent[k] == -1 and len(row) == 0 and not emb[k].any()
            assert t.visits[k] == 0 and t.episode_hits[k] == 0 and t.utility_ema[k] == 0


def run_rollout(tree, ref, steps):
    """A rollout on an overlay with an op log, committed to `tree`; mirrored on `ref`."""
    overlay, log = tree, hlmt.new_log(4, DIM)
    ref_overlay, replay, mine = ref.copy(), [], {}
    for is_insert, choice, spec in steps:
        v = vector(spec)
        slot = pick(ref_overlay, choice)
        if is_insert:
            overlay, log, got = log_insert(overlay, log, slot, v)
            want = ref_overlay.insert(slot, v) if len(replay) < 4 else -1
            assert int(got) == want
            if want >= 0:
                replay.append(("insert", mine.get(slot, ("snap", slot)), v, len(replay)))
                mine[want] = ("mine", replay[-1][3])
        else:
            overlay, log = log_update(overlay, log, slot, v, 0.5)
            if 0 < slot < CAP and slot in ref_overlay.nodes and len(replay) < 4:
                ref_overlay.update(slot, v, 0.5)
                replay.append(("update", mine.get(slot, ("snap", slot)), v, len(replay)))
        ref_overlay.assert_matches(overlay)
    assert int(log.length) == len(replay)
    tree, assigned = commit(tree, log, return_slots=True)
    got_slots = {}
    for kind, (where, key), v, j in replay:  # the reference replay of the log
        node = key if where == "snap" else got_slots.get(key, -1)
        if node < 0:
            continue
        if kind == "insert":
            got_slots[j] = ref.insert(node, v)
        else:
            ref.update(node, v, 0.5)
    for j, s in got_slots.items():
        assert int(assigned[j]) == s
    return tree


def pick(ref, choice):
    kind, k = choice
    if kind == "raw":
        return k
    live = sorted(ref.nodes)
    return live[k % len(live)]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=10, max_size=60))
def test_random_op_sequences_match_reference(sequence):
    tree = hlmt.init_tree(CAP, DIM, max_children=C, max_depth=DEPTH)
    ref = RefTree(CAP, DIM, C, DEPTH)
    for op in sequence:
        kind = op[0]
        if kind == "insert":
            slot = pick(ref, op[1])
            tree, idx = insert(tree, slot, vector(op[2]))
            assert int(idx) == ref.insert(slot, vector(op[2]))
        elif kind == "update":
            slot = pick(ref, op[1])
            tree = update(tree, slot, vector(op[2]), op[3])
            ref.update(slot, vector(op[2]), op[3])
        elif kind == "activate":
            path = traverse(tree, vector(op[1]), op[2])
            want = ref.traverse(vector(op[1]), op[2])
            assert np.asarray(path.nodes)[: int(path.length)].tolist() == want
            tree = record(tree, path, op[3])
            ref.record(want, op[3])
        elif kind == "end":
            tree = end_episode(tree, 0.5, op[1], op[2])
            ref.end_episode(0.5, op[1], op[2])
        else:
            tree = run_rollout(tree, ref, op[1])
        check_invariants(tree)
        ref.assert_matches(tree)


def test_vmap_over_trees_and_queries_equals_separate_calls():
    rng = np.random.default_rng(0)
    trees = []
    for b in range(16):
        t = hlmt.init_tree(CAP, DIM, max_children=C, max_depth=DEPTH)
        for _ in range(int(rng.integers(0, CAP))):
            t, _ = insert(t, int(rng.integers(0, 4)), rng.standard_normal(DIM))
        trees.append(t)
    batch = jax.tree.map(lambda *xs: jnp.stack(xs), *trees)
    queries = rng.standard_normal((16, DIM)).astype(np.float32)
    paths = jax.jit(jax.vmap(hlmt.traverse, in_axes=(0, 0, None)))(batch, queries, 0.3)
    ins_vecs = rng.standard_normal((16, DIM)).astype(np.float32)
    after, idx = jax.jit(jax.vmap(hlmt.insert_node))(batch, jnp.ones(16, jnp.int32), ins_vecs)
    maint = jax.jit(jax.vmap(hlmt.end_episode, in_axes=(0, None, None, None)))(after, 0.5, 0.3, 0.5)
    for b in range(16):
        one = traverse(trees[b], queries[b], 0.3)
        np.testing.assert_array_equal(paths.nodes[b], one.nodes)
        t1, i1 = insert(trees[b], 1, ins_vecs[b])
        assert int(idx[b]) == int(i1)
        m1 = end_episode(t1, 0.5, 0.3, 0.5)
        for field in ("parent", "children", "valid", "depth"):
            np.testing.assert_array_equal(getattr(maint, field)[b], getattr(m1, field))
        np.testing.assert_allclose(maint.emb[b], m1.emb, atol=1e-6)


def test_batched_queries_on_one_tree():
    rng = np.random.default_rng(1)
    t = hlmt.init_tree(CAP, DIM, max_children=C, max_depth=DEPTH)
    for _ in range(10):
        t, _ = insert(t, 0, rng.standard_normal(DIM))
    q = rng.standard_normal((32, DIM)).astype(np.float32)
    paths = jax.vmap(hlmt.traverse, in_axes=(None, 0, None))(t, q, 0.0)
    for i in range(32):
        np.testing.assert_array_equal(paths.nodes[i], traverse(t, q[i], 0.0).nodes)


def test_jit_compiles_once_per_capacity():
    # jax.jit(f) wrappers of one f share a cache (other tests jit traverse too), so the
    # counted function is this test's own
    fn = jax.jit(lambda tree, q, tau: hlmt.traverse(tree, q, tau))
    rng = np.random.default_rng(2)
    for cap in (CAP, CAP, 2 * CAP):
        for _ in range(3):
            t = hlmt.init_tree(cap, DIM, max_children=C, max_depth=DEPTH)
            t, _ = insert(t, 0, rng.standard_normal(DIM)) if cap == CAP else (t, None)
            fn(t, rng.standard_normal(DIM).astype(np.float32), 0.5)
    assert fn._cache_size() == 2
