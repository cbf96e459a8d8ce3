"""The sampled tree search (memory/_search.py): its argmax is the greedy traversal, its
draws follow the softmax computed by hand, and the log-probability recomputed from the
recorded candidates equals the hand computation and has a gradient."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from activemem_jax.memory import tree as hlmt


def _unit(x):
    x = np.asarray(x, np.float32)
    return x / np.linalg.norm(x)


def _random_tree(seed, n=40, d=6):
    rng = np.random.default_rng(seed)
    t = hlmt.init_tree(64, d, max_children=4, max_depth=3)
    for _ in range(n):
        t, _ = hlmt.insert_node(t, 0, rng.normal(size=d).astype(np.float32))
    return t, rng


@pytest.mark.parametrize("closer", [False, True])
def test_a_cold_sampled_search_is_the_greedy_traversal(closer):
    t, rng = _random_tree(0)
    queries = jnp.asarray(rng.normal(size=(200, 6)).astype(np.float32))
    rngs = jax.random.split(jax.random.PRNGKey(1), 200)
    greedy = jax.vmap(lambda q: hlmt.traverse(t, q, 0.3, closer))(queries)
    sampled, cand, pick, _ = jax.vmap(lambda q, r: hlmt.sample_traverse(t, q, r, 0.3, closer, 1e-4))(queries, rngs)
    np.testing.assert_array_equal(np.asarray(sampled.nodes), np.asarray(greedy.nodes))
    np.testing.assert_array_equal(np.asarray(sampled.length), np.asarray(greedy.length))
    lengths = np.asarray(greedy.length)
    assert 0 < lengths.mean() < 3 and len(set(lengths.tolist())) > 1  # the case covers stops at several depths
    # a recorded level per step taken, plus the level that stopped (unless max_depth ended it)
    reached = (np.asarray(pick) >= 0).sum(-1)
    assert (reached == np.minimum(lengths + 1, 3)).all()


def test_draws_follow_the_softmax_over_children_and_stop():
    t = hlmt.init_tree(8, 3, max_children=4, max_depth=2)
    vecs = [_unit([1, 0, 0]), _unit([1, 1, 0]), _unit([0, 1, 0])]
    for v in vecs:
        t, _ = hlmt.insert_node(t, 0, v)  # three children of the root, no grandchildren
    q = _unit([1, 0.2, 0])
    tau, temp = 0.5, 0.2
    cos = np.asarray([float(v @ q) for v in vecs])
    logits = np.append(cos, tau) / temp
    want = np.exp(logits - logits.max())
    want /= want.sum()
    n = 4000
    _, cand, pick, _ = jax.vmap(lambda r: hlmt.sample_traverse(t, q, r, tau, False, temp))(
        jax.random.split(jax.random.PRNGKey(0), n))
    first = np.asarray(pick)[:, 0]
    assert (np.asarray(cand)[:, 0, :3] == [1, 2, 3]).all()
    got = np.bincount(first, minlength=5)[[0, 1, 2, 4]] / n  # column 3 is an empty slot, 4 stop
    np.testing.assert_allclose(got, want, atol=0.03)
    assert (np.bincount(first, minlength=5)[3] == 0)
    # a child taken leads to a leaf: the next level records only stop
    took = first < 4
    assert (np.asarray(pick)[took, 1] == 4).all() and (np.asarray(pick)[~took, 1] == -1).all()


@pytest.mark.parametrize("closer", [False, True])
def test_recomputed_path_log_prob_is_the_hand_computation(closer):
    d, tau, temp = 3, 0.4, 0.25
    t = hlmt.init_tree(8, d, max_children=3, max_depth=3)
    t, a = hlmt.insert_node(t, 0, _unit([1, 0, 0]))
    t, b = hlmt.insert_node(t, 0, _unit([0, 1, 0]))
    t, c = hlmt.insert_node(t, a, _unit([1, 0.3, 0]))
    t, e = hlmt.insert_node(t, a, _unit([1, 0, 0.6]))
    q = _unit([1, 0.1, 0.2])
    found = 0
    for seed in range(40):  # draws that take a child, then a grandchild or stop
        path, cand, pick, drawn = hlmt.sample_traverse(t, q, jax.random.PRNGKey(seed), tau, closer, temp)
        pick, cand = np.asarray(pick), np.asarray(cand)
        if pick[0] != 0:
            continue
        found += 1
        emb = np.asarray(t.emb)
        sa, sb, sc, se = (float(emb[i] @ q) for i in (a, b, c, e))
        lp0 = np.log(np.exp(sa / temp) / (np.exp(sa / temp) + np.exp(sb / temp) + np.exp(tau / temp)))
        stop1 = max(tau, sa) if closer else tau
        z1 = np.exp(sc / temp) + np.exp(se / temp) + np.exp(stop1 / temp)
        chosen = {0: sc, 1: se, 3: stop1}[int(pick[1])]
        want = lp0 + np.log(np.exp(chosen / temp) / z1)
        if pick[1] < 3:  # a grandchild is a leaf: level 2 records only stop (log-probability 0)
            assert pick[2] == 3 and not (cand[2] >= 0).any()
        cand_emb = np.where((cand >= 0)[..., None], emb[np.maximum(cand, 0)], 0.0)
        got = hlmt.path_log_prob(jnp.asarray(q), jnp.asarray(cand_emb), jnp.asarray(cand >= 0), jnp.asarray(pick),
                                 tau, closer, temp)
        assert np.isclose(float(got), want, atol=1e-4), (seed, float(got), want)
        assert np.isclose(float(drawn), want, atol=1e-4)  # what the sampler summed as it drew
        grad = jax.grad(lambda x: hlmt.path_log_prob(x, jnp.asarray(cand_emb), jnp.asarray(cand >= 0),
                                                     jnp.asarray(pick), tau, closer, temp))(jnp.asarray(q))
        assert np.isfinite(np.asarray(grad)).all() and np.abs(np.asarray(grad)).sum() > 0
    assert found >= 5
