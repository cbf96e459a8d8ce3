"""The sampled search inside a controller step and GRPO's term on it: the log-probability
the rollout records is the one the loss recomputes from the collated record under the
same parameters, the term's gradient reaches the key head and no other head, and greedy
and rule steps search as before (no record)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from activemem_jax.activemem.controller import Controller
from activemem_jax.activemem.step import StepConfig, controller_step
from activemem_jax.build import LossConfig
from activemem_jax.memory import tree as hlmt
from activemem_jax.rl.update import search_log_probs

D, E = 8, 6


def _setup():
    ctrl = Controller(D, num_latents=0, hidden=8, key_head=True, rngs=nnx.Rngs(0))
    rng = np.random.default_rng(0)
    ctrl.key.kernel[...] = jnp.asarray(rng.normal(scale=0.3, size=(D, D)).astype(np.float32))  # a trained key
    gd, params = nnx.split(ctrl)
    tree = hlmt.init_tree(32, D, 4, 3)
    for _ in range(14):
        tree, _ = hlmt.insert_node(tree, 0, rng.normal(size=D).astype(np.float32))
    overlays = jax.tree.map(lambda x: jnp.stack([x] * E), tree)
    logs = jax.tree.map(lambda x: jnp.stack([x] * E), hlmt.new_log(4, D))
    q = rng.normal(size=(E, D)).astype(np.float32)
    q = jnp.asarray(q / np.linalg.norm(q, axis=-1, keepdims=True))
    return ctrl, gd, params, overlays, logs, q, jax.random.split(jax.random.PRNGKey(3), E)


@pytest.mark.parametrize("closer", [False, True])
def test_the_recorded_search_log_prob_is_the_one_the_loss_recomputes_and_trains_only_the_key_head(closer):
    ctrl, gd, params, overlays, logs, q, keys = _setup()
    live = jnp.asarray([True] * (E - 1) + [False])
    cfg = StepConfig(tau_stop=0.2, closer=closer, search_temperature=0.3)
    _, _, out = controller_step(gd, params, overlays, logs, q, q, keys, live, jnp.int32(0), cfg)
    assert out.search_pick.shape == (E, 3) and out.search_emb.shape == (E, 3, 4, D)
    assert (np.asarray(out.search_pick)[-1] == -1).all() and float(out.search_logp[-1]) == 0.0  # not live
    assert (np.asarray(out.search_logp)[:-1] < 0).all()  # every live search chose among children
    batch = {"search_q": q, "search_emb": out.search_emb, "search_ok": out.search_ok,
             "search_pick": out.search_pick, "row_valid": live}
    loss_cfg = LossConfig(tau_stop=0.2, closer=closer, search_temperature=0.3)
    logp, searched = search_log_probs(ctrl, batch, loss_cfg)
    np.testing.assert_allclose(np.asarray(logp), np.asarray(out.search_logp), atol=1e-5)
    assert np.asarray(searched).tolist() == [True] * (E - 1) + [False]
    # the path the step reports is the one the record describes
    pick, cand = np.asarray(out.search_pick), np.asarray(overlays.children[0])
    for i in range(E - 1):
        node, walked = 0, []
        for level in range(3):
            if pick[i, level] < 0 or pick[i, level] == 4:
                break
            node = int(cand[node, pick[i, level]])
            walked.append(node)
        assert np.asarray(out.path[i])[:len(walked)].tolist() == walked and int(out.path_len[i]) == len(walked)

    def term(p):
        lp, s = search_log_probs(nnx.merge(gd, p), batch, loss_cfg)
        return -jnp.sum(jnp.where(s, lp * jnp.linspace(-1.0, 1.0, E), 0.0))
    grads = jax.grad(term)(params)
    norms = {k: float(sum(np.abs(np.asarray(x)).sum() for x in jax.tree.leaves(v))) for k, v in grads.items()}
    assert norms["key"] > 0 and all(v == 0 for k, v in norms.items() if k != "key"), norms


def test_greedy_and_rule_steps_search_greedily_and_record_nothing():
    _, gd, params, overlays, logs, q, keys = _setup()
    live = jnp.ones((E,), bool)
    plain = StepConfig(tau_stop=0.2)
    _, _, want = controller_step(gd, params, overlays, logs, q, q, keys, live, jnp.int32(0), plain)
    for cfg in (StepConfig(tau_stop=0.2, search_temperature=0.3, greedy=True),
                StepConfig(tau_stop=0.2, search_temperature=0.3, rule=True)):
        _, _, out = controller_step(gd, params, overlays, logs, q, q, keys, live, jnp.int32(0), cfg)
        assert out.search_pick.shape == (E, 0) and not np.asarray(out.search_logp).any()
        np.testing.assert_array_equal(np.asarray(out.path), np.asarray(want.path))


def test_padded_rows_carry_no_search(one_device_mesh):
    """pad_rows keeps each turn's search record and pads whole mini-batches with rows whose
    picks are -1, which the search term does not count."""
    from types import SimpleNamespace

    from activemem_jax.activemem.policy_config import Step, Trajectory
    from activemem_jax.rl import rows
    from activemem_jax.rl.hosts import Hosts
    from activemem_jax.rl.update import searched_rows

    rng = np.random.default_rng(0)
    steps = []
    for i in range(5):
        pick = np.asarray([i % 4, 4, -1], np.int32)
        steps.append(Step([1, 2, 3], [1], [5], [0.0], "", "", rng.normal(size=D).astype(np.float32),
                          np.zeros(D, np.float32), 0, 0.0, np.ones(3, bool), np.full(3, -1), scored=i % 2 == 0,
                          q=rng.normal(size=D).astype(np.float32), search_emb=rng.normal(size=(3, 4, D)),
                          search_ok=np.ones((3, 4), bool), search_pick=pick))
    batch = rows.pad_rows(SimpleNamespace(trajectories=[Trajectory(task={}, uid=0, steps=steps)]), np.zeros(5),
                          np.zeros(5), {}, k=1, budget=0, path_len=3, mini_batch_rows=16, hosts=Hosts(one_device_mesh))
    assert batch["search_pick"].shape == (16, 3) and batch["search_emb"].shape == (16, 3, 4, D)
    order = [0, 2, 4, 1, 3]  # scored rows first, each group padded to 8 rows
    real = np.zeros(16, bool)
    real[[0, 1, 2, 8, 9]] = True
    for row, i in zip(np.flatnonzero(real), order):
        np.testing.assert_array_equal(batch["search_pick"][row], steps[i].search_pick)
        np.testing.assert_allclose(batch["search_q"][row], steps[i].q)
    assert (batch["search_pick"][~real] == -1).all()
    searched = searched_rows({k: jnp.asarray(batch[k]) for k in ("search_ok", "search_pick", "row_valid")})
    assert np.asarray(searched).tolist() == real.tolist()


def test_episodes_not_exploring_search_greedily_and_record_nothing():
    _, gd, params, overlays, logs, q, keys = _setup()
    live = jnp.ones((E,), bool)
    explore = jnp.asarray([True, False] * (E // 2))
    _, _, want = controller_step(gd, params, overlays, logs, q, q, keys, live, jnp.int32(0), StepConfig(tau_stop=0.2))
    cfg = StepConfig(tau_stop=0.2, search_temperature=5.0)  # hot: the sampled paths leave the greedy ones
    _, _, out = controller_step(gd, params, overlays, logs, q, q, keys, live, jnp.int32(0), cfg, None, explore)
    _, _, every = controller_step(gd, params, overlays, logs, q, q, keys, live, jnp.int32(0), cfg)
    off = ~np.asarray(explore)
    np.testing.assert_array_equal(np.asarray(out.path)[off], np.asarray(want.path)[off])
    assert (np.asarray(out.search_pick)[off] == -1).all() and not np.asarray(out.search_ok)[off].any()
    assert not np.asarray(out.search_logp)[off].any()
    np.testing.assert_array_equal(np.asarray(out.path)[~off], np.asarray(every.path)[~off])
    np.testing.assert_allclose(np.asarray(out.search_logp)[~off], np.asarray(every.search_logp)[~off], atol=1e-6)
    assert not np.array_equal(np.asarray(every.path), np.asarray(want.path))
