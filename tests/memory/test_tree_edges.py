"""Directed edge cases of the HLMT: empty, full, descents, skipped prunes and merges,
merge chains, op-log references, orbax round trip, describe."""

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from activemem_jax.memory import tree as hlmt


def e(*xs):
    """A vector in R^4 from up to 4 coordinates."""
    v = np.zeros(4, np.float32)
    v[: len(xs)] = xs
    return v


def same(a: hlmt.Tree, b: hlmt.Tree):
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_empty_tree_gives_empty_path_and_zero_mean():
    t = hlmt.init_tree(8, 4)
    path = hlmt.traverse(t, e(1, 0), 0.5)
    assert int(path.length) == 0 and (np.asarray(path.nodes) == -1).all()
    assert not np.asarray(hlmt.path_mean(t, path)).any()


def test_full_tree_refuses_and_changes_nothing():
    t = hlmt.init_tree(4, 4)
    for i in range(3):
        t, idx = hlmt.insert_node(t, 0, e(1, i))
        assert int(idx) == i + 1
    t2, idx = hlmt.insert_node(t, 0, e(0, 1))
    assert int(idx) == -1 and same(t, t2)


def test_full_children_row_descends_into_most_similar_child():
    t = hlmt.init_tree(8, 4, max_children=2, max_depth=4)
    t, a = hlmt.insert_node(t, 0, e(1, 0))
    t, b = hlmt.insert_node(t, 0, e(0, 1))
    t, c = hlmt.insert_node(t, 0, e(0.1, 1))  # root full -> goes under b
    assert int(t.parent[c]) == int(b) and int(t.depth[c]) == 2
    path = hlmt.traverse(t, e(0.1, 1), 0.5)
    assert np.asarray(path.nodes)[: int(path.length)].tolist() == [int(b), int(c)]
    np.testing.assert_allclose(hlmt.path_mean(t, path), (t.emb[b] + t.emb[c]) / 2, atol=1e-6)


def test_max_depth_refuses_and_traverse_stops_below_threshold():
    t = hlmt.init_tree(8, 4, max_children=1, max_depth=2)
    t, a = hlmt.insert_node(t, 0, e(1, 0))
    t, b = hlmt.insert_node(t, 0, e(1, 0.1))  # descends under a (depth 2 = max)
    t2, c = hlmt.insert_node(t, 0, e(1, 0.2))  # would be depth 3
    assert int(b) == 2 and int(t.depth[b]) == 2 and int(c) == -1 and same(t, t2)
    assert int(hlmt.traverse(t, e(0, 1), 0.5).length) == 0  # cosine 0 < tau_stop
    assert int(hlmt.traverse(t, e(1, 0), 0.5).length) == 2
    t3, refused = hlmt.insert_node(t, 5, e(1, 0))  # invalid parent
    assert int(refused) == -1 and same(t, t3)
    t4, refused = hlmt.insert_node(t, 0, e())  # zero embedding
    assert int(refused) == -1 and same(t, t4)


def test_update_with_vector_gate_and_noops():
    t = hlmt.init_tree(4, 4)
    t, a = hlmt.insert_node(t, 0, e(1, 0))
    alpha = jnp.array([0.0, 1.0, 0.0, 0.0])
    t = hlmt.update_node(t, a, e(0, 3), alpha)
    np.testing.assert_allclose(t.emb[a], e(1, 3) / np.sqrt(10), atol=1e-6)
    assert same(t, hlmt.update_node(t, 0, e(0, 1), 0.5))  # root
    assert same(t, hlmt.update_node(t, 3, e(0, 1), 0.5))  # free slot
    assert same(t, hlmt.update_node(t, a, -t.emb[a], 0.5))  # would be zero


def test_prune_skipped_when_children_do_not_fit():
    # root has 2 children (full, C=2); node 1 has 2 children; pruning 1 would give root 3.
    t = hlmt.from_parents(np.stack([e(1, 0), e(0, 1), e(1, 1), e(1, -1)]), [0, 0, 1, 1],
                          capacity=8, max_children=2, max_depth=3)
    t = t.replace(utility_ema=jnp.array([0, -5, 1, 2, 3, 0, 0, 0], jnp.float32))
    out = hlmt.end_episode(t, beta=0.1, prune_fraction=0.5, tau_merge=1.1)  # k = 2: slots 1, 2
    assert bool(out.valid[1])  # skipped: its children would overflow the root's row
    assert not bool(out.valid[2])  # pruned (a leaf)
    assert int(out.parent[3]) == 1
    # exactly fits: root row (C=2) loses node 1 and gains its single child
    t = hlmt.from_parents(np.stack([e(1, 0), e(0, 1), e(1, 1)]), [0, 0, 1],
                          capacity=6, max_children=2, max_depth=3)
    t = t.replace(utility_ema=jnp.array([0, -1, 2, 3, 0, 0], jnp.float32))
    out = hlmt.end_episode(t, beta=0.1, prune_fraction=0.34, tau_merge=1.1)
    assert not bool(out.valid[1]) and int(out.parent[3]) == 0 and int(out.depth[3]) == 1


def test_prune_reparents_children_and_fixes_depths():
    t = hlmt.from_parents(np.stack([e(1, 0), e(0, 1), e(1, 1)]), [0, 1, 2],
                          capacity=6, max_children=4, max_depth=4)
    t = t.replace(utility_ema=jnp.array([0, 5, -1, 5, 0, 0], jnp.float32))
    out = hlmt.end_episode(t, beta=0.1, prune_fraction=0.34, tau_merge=1.1)  # k = 1: slot 2
    assert not bool(out.valid[2])
    assert int(out.parent[3]) == 1 and int(out.depth[3]) == 2
    assert sorted(np.asarray(out.children[1])[np.asarray(out.children[1]) >= 0].tolist()) == [3]


def test_merge_chain_joins_lowest_survivor_using_start_embeddings():
    a, b, c = e(1, 0), e(1, 0.35), e(1, 0.75)  # a~b, b~c, a !~ c (tau 0.9)
    cos = lambda x, y: x @ y / np.linalg.norm(x) / np.linalg.norm(y)  # noqa: E731
    assert cos(a, b) > 0.9 and cos(b, c) > 0.9 and cos(a, c) < 0.9
    t = hlmt.from_parents(np.stack([a, b, c]), [0, 0, 0], capacity=6, max_children=4, max_depth=2)
    t = t.replace(utility_ema=jnp.array([0, 1, 3, 5, 0, 0], jnp.float32),
                  visits=jnp.array([0, 1, 2, 3, 0, 0], jnp.int32))
    out = hlmt.end_episode(t, beta=0.1, prune_fraction=0.0, tau_merge=0.9)
    assert np.asarray(out.valid).tolist() == [True, True, False, True, False, False]
    unit = lambda v: v / np.linalg.norm(v)  # noqa: E731
    np.testing.assert_allclose(out.emb[1], unit(unit(a) + unit(b)), atol=1e-6)
    np.testing.assert_allclose(out.emb[3], unit(c), atol=1e-6)
    assert float(out.utility_ema[1]) == 2.0 and int(out.visits[1]) == 3


def test_merge_picks_the_lowest_of_two_similar_survivors_and_moves_children():
    a, b, c = e(1, 0.45), e(1, -0.45), e(1, 0)  # c ~ a and c ~ b; a !~ b
    t = hlmt.from_parents(np.stack([a, b, c, e(0, 0, 1)]), [0, 0, 0, 3],
                          capacity=8, max_children=4, max_depth=3)
    out = hlmt.end_episode(t, beta=0.1, prune_fraction=0.0, tau_merge=0.9)
    assert np.asarray(out.valid[:5]).tolist() == [True, True, True, False, True]
    assert int(out.parent[4]) == 1 and int(out.depth[4]) == 2


def test_merge_skipped_when_children_would_overflow():
    kids = [e(0, 0, 1, x) for x in (0.0, 3.0)]
    t = hlmt.from_parents(np.stack([e(1, 0), e(1, 0.01)] + kids + kids), [0, 0, 1, 1, 2, 2],
                          capacity=8, max_children=3, max_depth=3)
    out = hlmt.end_episode(t, beta=0.1, prune_fraction=0.0, tau_merge=0.9)
    assert bool(out.valid[1]) and bool(out.valid[2])  # 2 + 2 children > 3: not merged


def test_oplog_references_resolve_to_committed_slots():
    snap = hlmt.init_tree(10, 4, max_children=4, max_depth=4)
    snap, a = hlmt.insert_node(snap, 0, e(1, 0))
    persistent, _ = hlmt.insert_node(snap, 0, e(0, 0, 0, 1))  # another rollout took slot 2
    overlay, log = snap, hlmt.new_log(4, 4)
    overlay, log, x = hlmt.log_insert(overlay, log, a, e(1, 1))     # slot 2 in the overlay
    overlay, log, y = hlmt.log_insert(overlay, log, x, e(1, 1, 1))  # child of a pending node
    overlay, log = hlmt.log_update(overlay, log, x, e(0, 1), 0.5)
    assert (int(x), int(y)) == (2, 3)
    assert np.asarray(log.target[:3]).tolist() == [int(a), -1, -1]
    out, slots = hlmt.commit(persistent, log, return_slots=True)
    assert np.asarray(slots[:2]).tolist() == [3, 4]
    assert int(out.parent[3]) == int(a) and int(out.parent[4]) == 3
    np.testing.assert_allclose(out.emb[3], overlay.emb[2], atol=1e-6)
    mapped = hlmt.resolve_slots(log, slots, jnp.array([int(a), 2, 3, -1]))
    assert np.asarray(mapped).tolist() == [int(a), 3, 4, -1]
    # a batch of two logs commits rollout after rollout
    logs = jax.tree.map(lambda *x: jnp.stack(x), log, log)
    both, slots2 = hlmt.commit(persistent, logs, return_slots=True)
    assert np.asarray(slots2[:, :2]).tolist() == [[3, 4], [5, 6]]


def test_orbax_round_trip_is_identical(tmp_path):
    rng = np.random.default_rng(0)
    t = hlmt.from_parents(rng.standard_normal((20, 8)), [0] * 4 + list(range(1, 17)),
                          capacity=32, max_children=4, max_depth=8)
    t = t.replace(utility_ema=jnp.asarray(rng.standard_normal(32), jnp.float32))
    with ocp.StandardCheckpointer() as ckpt:
        ckpt.save(tmp_path / "tree", t)
    with ocp.StandardCheckpointer() as ckpt:
        back = ckpt.restore(tmp_path / "tree", jax.tree.map(ocp.utils.to_shape_dtype_struct, t))
    assert isinstance(back, hlmt.Tree) and back.max_depth == t.max_depth
    assert same(t, back)


def test_from_parents_equals_sequential_inserts_and_describe():
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((6, 4)).astype(np.float32)
    parents = [0, 0, 1, 1, 2, 5]
    built = hlmt.from_parents(vecs, parents, capacity=10, max_children=3, max_depth=4)
    seq = hlmt.init_tree(10, 4, max_children=3, max_depth=4)
    for v, p in zip(vecs, parents):
        seq, _ = hlmt.insert_node(seq, p, v)
    for field in ("parent", "depth", "valid", "children"):
        np.testing.assert_array_equal(getattr(built, field), getattr(seq, field))
    np.testing.assert_allclose(built.emb, seq.emb, atol=1e-6)
    info = hlmt.describe(built)
    assert info["nodes"] == 6 and info["free_slots"] == 3
    assert info["depth_histogram"] == {1: 2, 2: 3, 3: 1}
    assert info["leaves"] == 3 and info["branching_max"] == 2 and info["root_children"] == 2
    assert "6 nodes / capacity 10" in hlmt.format_description(info)


def test_closer_descent_stops_where_the_parent_answers_best():
    import jax.numpy as jnp
    import numpy as np

    from activemem_jax.memory import tree as hlmt

    d = 4
    t = hlmt.init_tree(8, d, 4, 4)
    a = np.asarray([1.0, 0.0, 0.0, 0.0], np.float32)
    b = np.asarray([0.6, 0.8, 0.0, 0.0], np.float32)
    t, ia = hlmt.insert_node(t, 0, jnp.asarray(a))
    t, ib = hlmt.insert_node(t, ia, jnp.asarray(b))
    q = jnp.asarray([0.95, 0.31, 0.0, 0.0])  # cos 0.95 to a, 0.82 to b
    plain = hlmt.traverse(t, q, tau_stop=0.5)
    assert np.asarray(plain.nodes)[:2].tolist() == [int(ia), int(ib)]  # the paper's rule goes on to b
    closer = hlmt.traverse(t, q, tau_stop=0.5, closer=True)
    assert int(closer.length) == 1 and int(closer.nodes[0]) == int(ia)
    q2 = jnp.asarray([0.62, 0.78, 0.0, 0.0])  # closer to b than to a: both rules reach b
    assert int(hlmt.traverse(t, q2, tau_stop=0.5, closer=True).length) == 2
