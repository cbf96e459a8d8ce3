"""The tree ops' entry checks (chex, static: once per trace) and the ops under jit and
without it against the plain-Python reference tree."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from activemem_jax.memory import tree as hlmt
from tests.memory.reference_tree import RefTree

DIM = 8
RNG = np.random.default_rng(5)
EMB = RNG.standard_normal((6, DIM)).astype(np.float32)
PARENTS = [0, 0, 1, 1, 2, 0]  # node i -> slot i + 1; parent 0 the root


def _trees():
    t = hlmt.from_parents(EMB, PARENTS, capacity=10, max_children=4, max_depth=3)
    ref = RefTree(10, DIM, 4, 3)
    for p, e in zip(PARENTS, EMB):
        ref.insert(p, e)
    return t, ref


class TreeOpsJitAndNoJit(chex.TestCase):

    @chex.variants(with_jit=True, without_jit=True)
    def test_traverse_insert_update_match_the_reference(self):
        t, ref = _trees()
        traverse = self.variant(hlmt.traverse, static_argnames=("tau_stop", "closer"))
        insert = self.variant(hlmt.insert_node)
        update = self.variant(hlmt.update_node)
        for q in RNG.standard_normal((5, DIM)).astype(np.float32):
            for tau in (-1.0, 0.0, 0.3):
                path = traverse(t, q, tau_stop=tau)
                want = ref.traverse(q, tau)
                got = np.asarray(path.nodes)[: int(path.length)].tolist()
                assert got == list(want), (tau, got, want)
        t2, slot = insert(t, jnp.int32(2), EMB[3] + 0.5)
        assert int(slot) == ref.insert(2, EMB[3] + 0.5)
        t3 = update(t2, jnp.int32(4), EMB[0], jnp.float32(0.25))
        ref.update(4, EMB[0], 0.25)
        chex.assert_trees_all_close(np.asarray(t3.emb)[4], ref.nodes[4].emb, atol=1e-6)
        chex.assert_trees_all_close(np.asarray(t3.emb)[slot], ref.nodes[int(slot)].emb, atol=1e-6)


def test_a_wrong_shape_fails_at_the_op_with_the_shapes_named():
    t, _ = _trees()
    with pytest.raises(AssertionError, match=r"has shape \(5,\) but expected \(8\).*traverse: query must be \[d=8\]"):
        hlmt.traverse(t, np.zeros(5, np.float32))
    with pytest.raises(AssertionError, match=r"traverse: query must be \[d=8\]"):  # under jit alike
        jax.jit(hlmt.traverse)(t, np.zeros(5, np.float32))
    with pytest.raises(AssertionError, match="insert_node: emb must be"):
        hlmt.insert_node(t, 0, np.ones(DIM + 1, np.float32))
    with pytest.raises(AssertionError, match="update_node: alpha must be a scalar or"):
        hlmt.update_node(t, 1, EMB[0], np.ones((2, DIM), np.float32))
    batched = jax.tree.map(lambda x: jnp.stack([x, x]), t)
    with pytest.raises(AssertionError, match=r"one tree; vmap a batch"):
        hlmt.traverse(batched, EMB[0])
    assert jax.vmap(hlmt.traverse, in_axes=(0, None))(batched, EMB[0]).nodes.shape == (2, 3)  # vmapped: fine
    broken = t.replace(valid=t.valid[:-1])
    with pytest.raises(AssertionError, match=r"every per-node array of the tree must be \[N=10\]"):
        hlmt.end_episode(broken)
    with pytest.raises(AssertionError, match=r"commit: log vectors must be \[.., d=8\]"):
        hlmt.commit(t, hlmt.new_log(4, DIM + 2))
    with pytest.raises(AssertionError, match="tree index arrays must be int32"):
        hlmt.record_activations(t.replace(parent=t.parent.astype(jnp.float32)), hlmt.traverse(t, EMB[0]), 1.0)
