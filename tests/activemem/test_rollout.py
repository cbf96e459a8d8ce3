"""Memory-augmented rollouts on the embedded model, the synthetic world and BM25."""

import jax
import numpy as np
import pytest

from activemem_jax.activemem import ActiveMem, PolicyConfig, Step, Trajectory, collate
from activemem_jax.data import synthetic_world
from activemem_jax.envs import MultiObjectiveQAEnv
from activemem_jax.memory import tree as hlmt
from tests.activemem.shapes import SMALL as SHARED

pytestmark = pytest.mark.slow

SMALL = dict(SHARED, max_tokens=24)


@pytest.fixture(scope="module")
def tasks(world):
    return synthetic_world.make_tasks(world, "dev", 1, 3, seed=5)


@pytest.fixture(scope="module")
def env(bm25):
    return MultiObjectiveQAEnv(bm25, max_turns=2)


@pytest.fixture(scope="module")
def policy(embedded_model, engine):
    return ActiveMem(embedded_model, engine, PolicyConfig(num_latents=2, **SMALL), seed=0)


@pytest.fixture(scope="module")
def first(policy, env, tasks):
    return policy.rollout(env, tasks, seed=3, commit=False)


def summary(traj):
    return [(s.prompt_ids, s.response_ids, s.tree_action, s.path.tolist()) for s in traj.steps]


def test_rollouts_are_deterministic_and_batch_invariant(policy, env, tasks, first):
    again = policy.rollout(env, tasks, seed=3, commit=False)
    assert [summary(t) for t in again.trajectories] == [summary(t) for t in first.trajectories]
    for i, task in enumerate(tasks[:2]):
        alone = policy.rollout(env, [task], seed=3, uids=[i], commit=False)
        assert summary(alone.trajectories[0]) == summary(first.trajectories[i])
        np.testing.assert_allclose(alone.trajectories[0].steps[0].response_logprobs,
                                   first.trajectories[i].steps[0].response_logprobs, atol=1e-4)
    other = policy.rollout(env, tasks, seed=4, commit=False)
    assert [summary(t) for t in other.trajectories] != [summary(t) for t in first.trajectories]


def test_steps_record_what_the_trainer_needs(first, tasks, embedded_model):
    for traj, task in zip(first.trajectories, tasks):
        assert traj.task is task and 1 <= len(traj.steps) <= 2
        assert traj.peak_tokens > 0 and traj.dependency_length > 0 and traj.time_s > 0
        for s in traj.steps:
            assert len(s.response_ids) == len(s.response_logprobs) > 0
            assert all(lp <= 0 for lp in s.response_logprobs)
            assert s.h.shape == (embedded_model.config.hidden_size,) and np.abs(s.h).max() > 0
            assert s.tree_mask[0] and s.tree_mask[s.tree_action]
            assert s.tree_mask[2] == (s.path_len > 0)  # update offered exactly when a path exists
            assert s.q.shape == s.h.shape and abs(float(np.linalg.norm(s.q)) - 1.0) < 1e-4
        assert traj.reward == traj.steps[-1].reward


def test_action_mask_covers_exactly_the_model_tokens(first):
    batch = collate(first.trajectories, num_latents=2)
    rows = [s for t in first.trajectories for s in t.steps]
    assert batch["tokens"].shape[0] == len(rows)
    for r, s in enumerate(rows):
        p = len(s.prompt_ids)
        assert batch["tokens"][r][batch["action_mask"][r]].tolist() == s.response_ids
        assert batch["tokens"][r][:p].tolist() == s.prompt_ids
        assert not batch["action_mask"][r][:p].any()
        assert batch["attention_mask"][r].sum() == p + len(s.response_ids)
        np.testing.assert_array_equal(batch["old_logp"][r][batch["action_mask"][r]],
                                      np.asarray(s.response_logprobs, np.float32))
        assert batch["latent_pos"][r].tolist() == s.latent_pos
    # a scripted episode: two turns with known ids
    d = 4
    step = lambda prompt, resp: Step(prompt, [1], resp, [-0.5] * len(resp), "", "", np.ones(d),  # noqa: E731
                                     np.zeros(d), 0, 0.0, np.asarray([1, 0, 0], bool), np.full(2, -1))
    traj = Trajectory(task={}, uid=0, steps=[step([5, 6, 7], [8, 9]), step([5, 6, 10, 11], [12])], reward=1.0)
    b = collate([traj], num_latents=1, pad_to=8)
    np.testing.assert_array_equal(b["action_mask"], [[0, 0, 0, 1, 1, 0, 0, 0], [0, 0, 0, 0, 1, 0, 0, 0]])
    np.testing.assert_array_equal(b["tokens"][1, :5], [5, 6, 10, 11, 12])
    with pytest.raises(ValueError, match="max_len"):
        collate([traj], num_latents=1, max_len=4)


def test_commit_equals_applying_episodes_one_at_a_time(embedded_model, engine, env, tasks):
    cfg = PolicyConfig(num_latents=2, **SMALL)
    pol = ActiveMem(embedded_model, engine, cfg, seed=0)
    result = pol.rollout(env, tasks, seed=3, commit=False)
    n_ins = int(np.sum(np.asarray(result.logs.op) == hlmt.OP_INSERT))
    assert n_ins >= 2  # there is something to commit
    snapshot = pol.tree
    returns = [t.reward for t in result.trajectories]
    committed = pol.commit(result)
    # reference: episode by episode, then the same maintenance once
    ref = snapshot
    for i, traj in enumerate(result.trajectories):
        log_i = jax.tree.map(lambda x: x[i], result.logs)
        ref, assigned = hlmt.commit(ref, log_i, return_slots=True)
        for j, s in enumerate(traj.steps):
            nodes = hlmt.resolve_slots(log_i, assigned, result.overlay_paths[i, j])
            np.testing.assert_array_equal(np.asarray(nodes), committed.trajectories[i].steps[j].path)
            ref = hlmt.record_activations(ref, hlmt.Path(nodes, (nodes >= 0).sum(), np.zeros(4)), returns[i])
    ref = hlmt.end_episode(ref, cfg.ema_beta, cfg.prune_fraction, cfg.tau_merge)
    jax.tree.map(np.testing.assert_array_equal, jax.tree.map(np.asarray, pol.tree), jax.tree.map(np.asarray, ref))
    assert int(pol.tree.valid.sum()) > 1
    with pytest.raises(ValueError, match="already committed"):
        pol.commit(committed)


def test_ablations(embedded_model, engine, env, tasks):
    plain = ActiveMem(embedded_model, engine, PolicyConfig(num_latents=0, use_tree=False, **SMALL))
    res = plain.rollout(env, tasks[:1], seed=1)
    s = res.trajectories[0].steps[0]
    assert s.latent_pos == [] and s.tree_action == 0 and not s.p_bar.any()
    assert not s.h.any() and not s.q.any()  # no tree and no latents: the observation is not read
    assert s.prompt_ids == plain.layout.render(env.initial_prompt(tasks[0])).plain_ids
    assert int(plain.tree.valid.sum()) == 1
    # w/o tree action head: a static hierarchy built by the threshold rule
    # (docs/design_training.md#ablations), not an empty tree: insert when the path is empty, else
    # update; the head never chooses
    static = ActiveMem(embedded_model, engine, PolicyConfig(num_latents=2, tree_actions=False, **SMALL))
    res = static.rollout(env, tasks, seed=1)
    steps = [s for t in res.trajectories for s in t.steps]
    assert all(s.tree_action == (2 if s.path_len else 1) for s in steps)
    assert all(s.tree_mask.tolist() == [True, False, False] for s in steps)
    assert int(static.tree.valid.sum()) > 1
    scoped = ActiveMem(embedded_model, engine, PolicyConfig(num_latents=2, tree_scope="episode", **SMALL))
    res = scoped.rollout(env, tasks, seed=3)
    assert any(s.tree_action == 1 for t in res.trajectories for s in t.steps)
    assert int(scoped.tree.valid.sum()) == 1  # nothing persists across episodes
    with pytest.raises(ValueError, match="tree_scope"):
        PolicyConfig(tree_scope="global")
    with pytest.raises(ValueError, match="unknown policy config keys"):
        PolicyConfig.from_dict({"num_latent": 2})


def test_a_prompt_too_long_for_the_engine_ends_the_episode(embedded_model, engine, env, world):
    task = dict(synthetic_world.make_tasks(world, "dev", 1, 1, seed=9)[0])
    task["questions"] = [task["questions"][0] + " Details:" + " filler" * 1200]
    pol = ActiveMem(embedded_model, engine, PolicyConfig(num_latents=2, **SMALL))
    res = pol.rollout(env, [task], seed=0)
    traj = res.trajectories[0]
    assert traj.info.get("context_overflow") and traj.reward == 0.0 and traj.steps == []
