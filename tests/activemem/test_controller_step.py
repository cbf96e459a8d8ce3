"""The controller and its jitted step on tiny trees (no backbone): masks, ablations, edits."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from activemem_jax.activemem import INSERT, NOOP, UPDATE, Controller, StepConfig, controller_step
from activemem_jax.memory import tree as hlmt

D = 8
STEP = jax.jit(controller_step, static_argnums=(0, 9))  # as the rollout jits it (one compile per shape)


def make_controller(k=2, insert_vec=None, tree_bias=(0.0, 0.0, 0.0)):
    ctrl = Controller(D, num_latents=k, hidden=16, rngs=nnx.Rngs(0), max_residual=1e9)
    if insert_vec is not None:  # W_ins u = 1e4 insert_vec for every input: the node ~ insert_vec
        ctrl.insert.kernel[...] = jnp.zeros_like(ctrl.insert.kernel[...])
        ctrl.insert.bias[...] = 1e4 * jnp.asarray(insert_vec, jnp.float32)
    ctrl.tree.bias[...] = jnp.asarray(tree_bias, jnp.float32)
    return nnx.split(ctrl)


def batch(tree, e, max_ops=4):
    stack = lambda x: jax.tree.map(lambda a: jnp.broadcast_to(a, (e,) + a.shape), x)  # noqa: E731
    return stack(tree), stack(hlmt.new_log(max_ops, D))


def run(gd, params, tree, h, cfg=StepConfig(), seeds=None, max_ops=4, live=None, turn=0):
    """The step with q = h / |h| (the query is the state itself in these tests)."""
    e = h.shape[0]
    overlays, logs = batch(tree, e, max_ops)
    seeds = range(e) if seeds is None else seeds
    keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    live = jnp.ones((e,), bool) if live is None else live
    return STEP(gd, params, overlays, logs, jnp.asarray(h, jnp.float32), jnp.asarray(unit(h)),
                           keys, live, jnp.int32(turn), cfg)


def unit(v):
    v = np.asarray(v, np.float32)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_shapes_and_initial_policy_is_uniform():
    gd, params = make_controller(k=4)
    q = jnp.asarray(unit(np.random.default_rng(0).normal(size=(3, D))))
    out = nnx.merge(gd, params)(jnp.ones((3, D)), jnp.zeros((3, D)), q)
    assert out.latents.shape == (3, 4, D) and out.tree_logits.shape == (3, 3)
    np.testing.assert_array_equal(out.tree_logits, 0.0)  # zero-initialised tree head
    # zero-initialised write heads (docs/design_memory.md#tree-writes): a new node and an update
    # target start as q
    np.testing.assert_array_equal(out.insert_vec, q)
    np.testing.assert_array_equal(out.update_vec, q)
    np.testing.assert_array_equal(out.gate, 0.5)


def test_update_never_sampled_on_empty_path():
    gd, params = make_controller(tree_bias=(0.0, 0.0, 10.0))  # strongly prefers update
    tree = hlmt.init_tree(16, D, 4, 4)  # root only: every path is empty
    h = np.random.default_rng(0).normal(size=(64, D))
    _, _, out = run(gd, params, tree, h)
    assert not np.any(np.asarray(out.mask[:, UPDATE]))
    assert not np.any(np.asarray(out.action) == UPDATE)
    assert np.any(np.asarray(out.action) == INSERT)  # the mask, not luck, rules update out


def test_insert_never_sampled_when_the_tree_is_full():
    gd, params = make_controller(tree_bias=(0.0, 10.0, 0.0))  # strongly prefers insert
    e1 = unit([1, 0, 0, 0, 0, 0, 0, 0])
    tree, _ = hlmt.insert_node(hlmt.init_tree(2, D, 4, 4), 0, e1)  # capacity 2: full
    h = np.tile(e1, (32, 1)) + 0.01 * np.random.default_rng(1).normal(size=(32, D))
    _, _, out = run(gd, params, tree, h)
    assert not np.any(np.asarray(out.mask[:, INSERT]))
    assert not np.any(np.asarray(out.action) == INSERT)
    assert np.all(np.asarray(out.path_len) == 1)  # the path reaches the one node
    assert np.any(np.asarray(out.action) == UPDATE)


def test_insert_masked_when_a_child_of_the_leaf_is_nearly_the_same():
    e1 = unit([1, 0, 0, 0, 0, 0, 0, 0])
    tree, _ = hlmt.insert_node(hlmt.init_tree(16, D, 4, 4), 0, e1)
    query = unit([0, 1, 0, 0, 0, 0, 0, 0])  # cosine 0 to e1: empty path, leaf = root
    near = unit([1, 0.05, 0, 0, 0, 0, 0, 0])  # cosine > 0.9 to e1, a child of the root
    far = unit([0, 0, 1, 0, 0, 0, 0, 0])
    for vec, allowed in ((near, False), (far, True)):
        gd, params = make_controller(insert_vec=vec, tree_bias=(0.0, 10.0, 0.0))
        _, _, out = run(gd, params, tree, np.tile(query, (16, 1)))
        assert np.all(np.asarray(out.mask[:, INSERT]) == allowed)
        assert np.any(np.asarray(out.action) == INSERT) == allowed


def test_edits_match_the_plain_tree_operations():
    e1 = unit([1, 0, 0, 0, 0, 0, 0, 0])
    tree, _ = hlmt.insert_node(hlmt.init_tree(16, D, 4, 4), 0, e1)
    vec = unit([0, 0, 1, 0, 0, 0, 0, 0])
    # insert: the new node goes under the leaf of the retrieved path (the e1 node, slot 1)
    gd, params = make_controller(insert_vec=vec, tree_bias=(-50.0, 50.0, -50.0))
    overlays, logs, out = run(gd, params, tree, np.tile(e1, (2, 1)))
    assert list(np.asarray(out.action)) == [INSERT, INSERT]
    ref, slot = hlmt.insert_node(tree, 1, e1 + 1e4 * vec)  # q + W_ins u
    np.testing.assert_array_equal(np.asarray(out.slot), [int(slot)] * 2)
    for i in range(2):
        np.testing.assert_allclose(overlays.emb[i], ref.emb, atol=1e-6)
        np.testing.assert_array_equal(overlays.children[i], ref.children)
        assert int(logs.length[i]) == 1 and int(logs.op[i, 0]) == hlmt.OP_INSERT
    # update: e_1 <- normalize((1 - alpha) e_1 + alpha W_upd u)
    gd, params = make_controller(tree_bias=(-50.0, -50.0, 50.0))
    overlays, logs, out = run(gd, params, tree, np.tile(e1, (1, 1)))
    assert int(out.action[0]) == UPDATE
    c = nnx.merge(gd, params)(jnp.asarray(e1[None]), jnp.asarray(out.p_bar), jnp.asarray(e1[None]))
    ref = hlmt.update_node(tree, 1, c.update_vec[0], c.gate[0])
    np.testing.assert_allclose(overlays.emb[0], ref.emb, atol=1e-5)
    np.testing.assert_allclose(out.p_bar[0], e1, atol=1e-6)  # mean of the path [e1]


def test_log_probs_are_those_of_the_masked_policy():
    gd, params = make_controller(tree_bias=(0.3, -0.2, 0.9))
    e1 = unit([1, 0, 0, 0, 0, 0, 0, 0])
    tree, _ = hlmt.insert_node(hlmt.init_tree(16, D, 4, 4), 0, e1)
    h = np.random.default_rng(2).normal(size=(16, D))
    _, _, out = run(gd, params, tree, h)
    logits = np.asarray(nnx.merge(gd, params)(jnp.asarray(h, jnp.float32), out.p_bar,
                                              jnp.asarray(unit(h))).tree_logits)
    for i in range(16):
        allowed = np.asarray(out.mask[i])
        z = np.where(allowed, logits[i], -np.inf)
        logp = z - np.log(np.sum(np.exp(z[allowed])))
        assert np.isclose(float(out.logp[i]), logp[int(out.action[i])], atol=1e-5)


def test_tree_temperature_samples_and_scores_the_tempered_head():
    # a confident head (noop +4 over insert): at T = 1 sampling almost never inserts; at
    # T = 4 the recorded log-prob is log softmax(logits / 4) of the sampled action and
    # inserts are common, while greedy evaluation takes the same argmax at any T
    gd, params = make_controller(tree_bias=(4.0, 0.0, 0.0))
    tree = hlmt.init_tree(16, D, 4, 4)
    h = np.random.default_rng(5).normal(size=(256, D))
    cold = run(gd, params, tree, h)[2]
    hot = run(gd, params, tree, h, StepConfig(tree_temperature=4.0))[2]
    logits = np.asarray(nnx.merge(gd, params)(jnp.asarray(h, jnp.float32), hot.p_bar,
                                              jnp.asarray(unit(h))).tree_logits) / 4.0
    for i in range(256):
        allowed = np.asarray(hot.mask[i])
        z = np.where(allowed, logits[i], -np.inf)
        assert np.isclose(float(hot.logp[i]), z[int(hot.action[i])] - np.log(np.sum(np.exp(z[allowed]))),
                          atol=1e-5)
    share = lambda out: float(np.mean(np.asarray(out.action) == INSERT))  # noqa: E731
    assert share(cold) < 0.05 and 0.2 < share(hot) < 0.5, (share(cold), share(hot))  # e^-4 / e^-1 odds
    for t in (1.0, 4.0):
        g = run(gd, params, tree, h, StepConfig(tree_temperature=t, greedy=True))[2].action
        assert np.all(np.asarray(g) == NOOP)


def test_ablations_and_dead_episodes():
    e1 = unit([1, 0, 0, 0, 0, 0, 0, 0])
    tree, _ = hlmt.insert_node(hlmt.init_tree(16, D, 4, 4), 0, e1)
    gd, params = make_controller(tree_bias=(-50.0, 50.0, 50.0))
    h = np.tile(e1, (4, 1))
    # w/o tree action head: the threshold rule acts (the path reaches e1: update), and no
    # row offers the head a choice, so no loss term trains it
    overlays, logs, out = run(gd, params, tree, h, StepConfig(tree_actions=False))
    assert np.all(np.asarray(out.action) == UPDATE) and np.all(np.asarray(logs.length) == 1)
    assert np.all(np.asarray(out.path_len) == 1)  # retrieval still on
    np.testing.assert_array_equal(out.mask, [[True, False, False]] * 4)
    far = np.tile(unit([0, 0, 0, 1, 0, 0, 0, 0]), (4, 1))  # nothing near: the rule inserts
    _, logs, out = run(gd, params, tree, far, StepConfig(tree_actions=False))
    assert np.all(np.asarray(out.action) == INSERT) and np.all(np.asarray(out.path_len) == 0)
    _, logs, out = run(gd, params, tree, h, StepConfig(use_tree=False))
    assert np.all(np.asarray(out.action) == NOOP) and np.all(np.asarray(out.path_len) == 0)
    np.testing.assert_array_equal(out.p_bar, 0.0)
    live = jnp.asarray([True, False, True, False])
    _, logs, out = run(gd, params, tree, h, live=live)
    assert list(np.asarray(logs.length)) == [1, 0, 1, 0]
    assert list(np.asarray(out.action != NOOP)) == [True, False, True, False]


def test_greedy_and_seeded_sampling_are_deterministic():
    gd, params = make_controller(tree_bias=(0.1, 0.2, 0.0))
    tree = hlmt.init_tree(16, D, 4, 4)
    h = np.random.default_rng(3).normal(size=(32, D))
    a = run(gd, params, tree, h)[2].action
    b = run(gd, params, tree, h)[2].action
    np.testing.assert_array_equal(a, b)
    g = run(gd, params, tree, h, dataclasses.replace(StepConfig(), greedy=True))[2].action
    assert np.all(np.asarray(g) == INSERT)  # argmax of the allowed (noop 0.1 < insert 0.2)


def test_controller_rejects_bad_settings():
    with pytest.raises(ValueError, match="num_latents"):
        Controller(D, num_latents=3, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="activation"):
        Controller(D, num_latents=2, activation="tanh", rngs=nnx.Rngs(0))


def test_path_nodes_report_their_writer():
    """A node this episode wrote reports the turn and kind of its last write and, for an
    update, the node before it; a snapshot node reports none."""
    e1 = unit([1, 0, 0, 0, 0, 0, 0, 0])
    tree, _ = hlmt.insert_node(hlmt.init_tree(16, D, 4, 4), 0, e1)  # a snapshot node
    gd, params = make_controller(tree_bias=(-50.0, 50.0, -50.0))  # insert when allowed
    overlays, logs = batch(tree, 1)
    keys = jnp.stack([jax.random.PRNGKey(0)])
    live = jnp.ones((1,), bool)
    far = unit([0, 0, 0, 1, 0, 0, 0, 0])[None]
    step = lambda o, lg, x, t: STEP(gd, params, o, lg, jnp.asarray(x), jnp.asarray(x), keys,  # noqa: E731
                                    live, jnp.int32(t), StepConfig())
    overlays, logs, out = step(overlays, logs, far, 3)  # turn 3 inserts `far` under the root
    assert int(out.action[0]) == INSERT and int(out.path_len[0]) == 0
    overlays, logs, out = step(overlays, logs, far, 4)  # turn 4 retrieves it
    assert int(out.path_len[0]) == 1
    assert int(out.writer_turn[0, 0]) == 3 and int(out.writer_op[0, 0]) == hlmt.OP_INSERT
    np.testing.assert_allclose(out.path_emb[0, 0], far[0], atol=1e-6)
    overlays, logs, out = step(overlays, logs, e1[None], 5)  # the snapshot node: no writer
    assert int(out.path_len[0]) == 1 and int(out.writer_turn[0, 0]) == -1 and int(out.writer_op[0, 0]) == 0


def test_a_wrong_shape_fails_at_the_step_with_the_shapes_named():
    """chex checks at the entry: a backbone width that is not the trees' dim, and an h
    without its batch axis, fail there with the shapes named (not inside a vmapped gather)."""
    from activemem_jax.rl.update import key_loss

    gd, params = make_controller()
    tree = hlmt.init_tree(8, D, max_children=4, max_depth=3)
    wide = hlmt.init_tree(8, D + 4, max_children=4, max_depth=3)
    overlays, logs = batch(wide, 2)
    h = jnp.ones((2, D), jnp.float32)
    keys = jnp.stack([jax.random.PRNGKey(0)] * 2)
    with pytest.raises(AssertionError, match=r"the trees' dim must equal the backbone's d"):
        controller_step(gd, params, overlays, logs, h, h, keys, jnp.ones((2,), bool), jnp.int32(0), StepConfig())
    overlays, logs = batch(tree, 2)
    with pytest.raises(AssertionError, match=r"controller_step: h, q \[E, d\], live \[E\]"):
        controller_step(gd, params, overlays, logs, h[0], h[0], keys, jnp.ones((2,), bool), jnp.int32(0),
                        StepConfig())
    with pytest.raises(AssertionError, match=r"key_loss: one id per query row"):
        key_loss(nnx.merge(gd, params), h, jnp.zeros((3,), jnp.int32))
