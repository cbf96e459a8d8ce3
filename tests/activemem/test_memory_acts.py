"""The memory acts (docs/design_memory.md#query-space, #tree-writes): the query space against
numpy, retrieval that finds the fact a question is about, residual writes and the path
mean recomputed in numpy, p_bar recomputed in the loss equal to the rollout's, and a
gradient on every controller head."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from activemem_jax.activemem import ActiveMem, PolicyConfig, collate
from activemem_jax.activemem.commit import format_telemetry
from activemem_jax.activemem.recompute import recompute_p_bar
from activemem_jax.envs.recall import CODES, RecallEnv, first_word, make_recall_tasks, name_pool
from activemem_jax.memory import query_space as qs
from activemem_jax.memory import tree as hlmt
from activemem_jax.build import LossConfig
from activemem_jax.rl.update import head_grad_norms, loss_fn


def _np_unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_query_space_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 16)) + np.linspace(0, 3, 16)  # an offset the centring removes
    x[:, 0] *= 5  # one dominant direction
    space = qs.init_query_space(16, components=3, window=1000)
    space = qs.observe(space, x[:30])
    pad = np.concatenate([x[30:], np.zeros((14, 16))])  # padded rows carry weight 0
    space = qs.observe(space, pad, np.r_[np.ones(18), np.zeros(14)])
    mu = x.mean(0)
    cov = (x - mu).T @ (x - mu) / len(x)
    top = np.linalg.eigh(cov)[1][:, ::-1][:, :3]
    np.testing.assert_allclose(space.mean, mu, atol=1e-5)
    assert float(space.count) == 48
    y = rng.normal(size=(5, 16))
    ref = (y - mu) - (y - mu) @ top @ top.T
    np.testing.assert_allclose(qs.project(space, y), _np_unit(ref), atol=1e-4)
    fresh = qs.init_query_space(16, components=3)  # no observations: no centring
    np.testing.assert_allclose(qs.project(fresh, y), _np_unit(y), atol=1e-6)
    with pytest.raises(ValueError, match="query_components"):
        qs.init_query_space(16, components=16)


def test_recall_tasks_and_env():
    train, test = set(name_pool("train")), set(name_pool("test"))
    assert len(train) >= 100 and not train & test
    tasks = make_recall_tasks("train", 8, 3, seed=4, n_questions=5)
    assert tasks == make_recall_tasks("train", 8, 3, seed=4, n_questions=5)
    for t in tasks:
        assert set(t["names"]) <= train and len(set(t["names"])) == 3
        assert sorted(set(t["order"])) == [0, 1, 2] and len(t["order"]) == 5
        assert all(a in CODES for a in t["answers"])
    env = RecallEnv("train", max_turns=8)
    obs = env.reset(tasks[:2])
    assert obs[0] == f"The code for {tasks[0]['names'][0]} is {tasks[0]['answers'][0]}."
    rewards = []
    for turn in range(8):
        acts = [env.expert(0, turn), "OK" if turn < 3 else "zzz"]  # episode 1 answers nothing right
        obs, r, done, info = env.step(acts)
        rewards.append(r)
    assert done == [True, True] and info[0]["reward"] == 1.0 and info[1]["reward"] == 0.0
    assert [x[0] for x in rewards] == [0, 0, 0, 1, 1, 1, 1, 1] and info[0]["scored"] is True
    assert env.chance == 1 / len(CODES) and first_word(" Red, surely") == "red"
    with pytest.raises(ValueError, match="data.max_turns"):
        RecallEnv("train", max_turns=7).reset(tasks[:1])
    with pytest.raises(ValueError, match="n_questions"):
        make_recall_tasks("train", 1, 3, n_questions=2)
    with pytest.raises(ValueError, match="split"):
        make_recall_tasks("dev", 1, 3)


@pytest.fixture(scope="module")
def scripted(embedded_model, engine):
    """Expert recall episodes through the tree by the threshold rule, with non-zero write
    heads (so residuals and gates are not trivial): 3 facts, 5 questions (some asked twice,
    so a question also reads a node an earlier question updated). The tiny demo config's
    tree and controller sizes, as test_recall_baselines.py: the programs compile once."""
    cfg = PolicyConfig(num_latents=1, hidden=256, capacity=64, max_depth=4, max_ops=8, max_tokens=3,
                       layout="observation", tree_scope="episode", system_prompt="")
    pol = ActiveMem(embedded_model, engine, cfg, seed=0)
    ctrl = pol.controller
    rng = np.random.default_rng(1)
    for head in (ctrl.insert, ctrl.gate, ctrl.update):
        head.kernel[...] = jnp.asarray(0.01 * rng.normal(size=head.kernel[...].shape), jnp.float32)
    pol.graphdef, pol.params = nnx.split(ctrl)
    tasks = make_recall_tasks("train", 2, 3, seed=0, n_questions=5)
    env = RecallEnv("train")
    result = pol.rollout(env, tasks, seed=0, responder=env.expert, tree_rule=True)
    return pol, tasks, result


def test_questions_retrieve_their_own_fact(scripted):
    pol, tasks, result = scripted
    hits = []
    for traj, task in zip(result.trajectories, tasks):
        steps = traj.steps
        for k, j in enumerate(task["order"]):
            s = steps[3 + k]
            # the leaf was inserted by the fact's turn j (or updated since by a question about it)
            writer = int(s.writer_turn[s.path_len - 1]) if s.path_len else -1
            hits.append(writer == j or (writer >= 3 and task["order"][writer - 3] == j))
        assert all(s.path_len == 0 and s.tree_action == 1 for s in steps[:3])  # facts are stored
    assert np.mean(hits) >= 0.8, hits  # measured: 10 of 10
    stats = result.stats
    assert stats["inserts"] >= 6 and stats["path_share"] >= 0.5 * 5 / 8
    assert "NO TURN" not in format_telemetry(stats)
    assert "NO TURN RETRIEVED" in format_telemetry({**stats, "path_share": 0.0})


def test_turns_after_a_full_op_log_are_counted(scripted, embedded_model, engine):
    """The rule writes on every turn (3 inserts, 5 updates an episode): max_ops 8 holds them
    all; with max_ops 5 the last 3 turns of each episode can only noop, and the telemetry
    line says so."""
    pol, tasks, result = scripted
    assert result.stats["turns_log_full"] == 0
    assert result.stats["inserts"] + result.stats["updates"] == 16
    small = ActiveMem(embedded_model, engine, dataclasses.replace(pol.config, max_ops=5), seed=0)
    small.graphdef, small.params = pol.graphdef, pol.params
    env = RecallEnv("train")
    stats = small.rollout(env, tasks, seed=0, responder=env.expert, tree_rule=True).stats
    assert stats["act_insert"] + stats["act_update"] == 10 and stats["turns_log_full"] == 6
    assert stats["inserts"] + stats["updates"] == 10
    assert "6 turns after an op log filled" in format_telemetry(stats)
    assert "op log" not in format_telemetry(result.stats)


def test_writes_and_path_mean_recomputed_in_numpy(scripted):
    pol, _, result = scripted
    ctrl = pol.controller
    wi, bi = np.asarray(ctrl.insert.kernel[...]), np.asarray(ctrl.insert.bias[...])
    wg, bg = np.asarray(ctrl.gate.kernel[...]), np.asarray(ctrl.gate.bias[...])
    wu, bu = np.asarray(ctrl.update.kernel[...]), np.asarray(ctrl.update.bias[...])

    def capped(r):
        return r * min(1.0, ctrl.max_residual / np.linalg.norm(r))

    checked = {hlmt.OP_INSERT: 0, hlmt.OP_UPDATE: 0}
    for traj in result.trajectories:
        for s in traj.steps:
            k = s.path_len
            mean = s.path_emb[:k].mean(0) if k else np.zeros_like(s.p_bar)
            np.testing.assert_allclose(s.p_bar, mean, atol=1e-5)  # the path mean
            for j in range(k):
                w = int(s.writer_turn[j])
                if w < 0:
                    continue
                src = traj.steps[w]
                u = np.asarray(ctrl.shared(jnp.asarray(src.h[None]), jnp.asarray(src.p_bar[None])))[0]
                if s.writer_op[j] == hlmt.OP_INSERT:
                    want = _np_unit(src.q + capped(u @ wi + bi))
                else:
                    alpha = 1 / (1 + np.exp(-(u @ wg + bg)))
                    want = _np_unit((1 - alpha) * s.writer_prev[j] + alpha * (src.q + capped(u @ wu + bu)))
                np.testing.assert_allclose(s.path_emb[j], want, atol=2e-5)
                checked[int(s.writer_op[j])] += 1
    assert checked[hlmt.OP_INSERT] >= 4 and checked[hlmt.OP_UPDATE] >= 1, checked


def test_loss_recomputes_p_bar_and_every_head_gets_gradient(scripted, embedded_model):
    pol, _, result = scripted
    batch = collate(result.trajectories, num_latents=1, path_len=pol.config.max_depth, pad_to=32)
    ctrl = pol.controller
    np.testing.assert_allclose(recompute_p_bar(ctrl, jax.tree.map(jnp.asarray, batch)), batch["p_bar"], atol=2e-5)
    n = len(batch["tokens"])
    batch.update(adv=np.zeros(n, np.float32), tree_adv=np.zeros(n, np.float32), row_valid=np.ones(n, bool),
                 tree_target=batch["tree_action"])
    batch = {k: jnp.asarray(v) for k, v in batch.items() if k not in ("episode", "reward", "path", "scored")}
    params = {"controller": pol.params, "lora": {}}
    cfg = LossConfig(algo="sft")
    # one jitted program per batch layout; the backbone's weights an argument (as in training)
    grad_fn = jax.jit(jax.grad(lambda p, s, b: loss_fn(p, s, b, embedded_model.graphdef, pol.graphdef, cfg)[0]))
    grads = grad_fn(params, embedded_model.state, batch)
    norms = {k: float(v) for k, v in head_grad_norms(grads).items()}
    assert all(v > 0 for v in norms.values()), norms  # shared, latent, tree, insert, gate, update
    # without the recomputation the write heads would get nothing: cut the path rows
    cut = {k: v for k, v in batch.items() if not (k.startswith("writer_") or k.startswith("path_"))}
    grads = grad_fn(params, embedded_model.state, cut)
    cut_norms = {k: float(v) for k, v in head_grad_norms(grads).items()}
    assert cut_norms["grad_insert"] == cut_norms["grad_gate"] == cut_norms["grad_update"] == 0.0


def test_mixed_sft_head_target_weights_the_acted_and_the_rule_writes(scripted, embedded_model):
    """train.sft_head="mix": the tree term is -((1 - w) log pi(acted) + w log pi(rule)) over
    the rows that choose, so it is the w-weighted sum of the two one-target losses."""
    pol, _, result = scripted
    batch = collate(result.trajectories, num_latents=1, path_len=pol.config.max_depth, pad_to=32)
    n = len(batch["tokens"])
    # another allowed action than the acted one where there is one: the rule's stand-in
    other = np.where(batch["tree_mask"][np.arange(n), (batch["tree_action"] + 1) % 3],
                     (batch["tree_action"] + 1) % 3, batch["tree_action"]).astype(np.int32)
    assert (other != batch["tree_action"]).sum() >= 4
    batch.update(adv=np.zeros(n, np.float32), tree_adv=np.zeros(n, np.float32), row_valid=np.ones(n, bool),
                 tree_target=batch["tree_action"])
    batch = {k: jnp.asarray(v) for k, v in batch.items() if k not in ("episode", "reward", "path", "scored")}
    ctrl = nnx.merge(pol.graphdef, pol.params)  # a copy whose tree head is not uniform (it starts at 0)
    ctrl.tree.kernel[...] = jnp.asarray(np.random.default_rng(2).normal(size=ctrl.tree.kernel[...].shape),
                                        jnp.float32)
    params = {"controller": nnx.split(ctrl)[1], "lora": {}}

    def tree_loss(b, share=0.0):
        cfg = LossConfig(algo="sft", rule_share=share)
        return float(loss_fn(params, embedded_model.state, b, embedded_model.graphdef, pol.graphdef, cfg)[1]
                     ["tree_loss"])

    acted = tree_loss(batch)
    rule = tree_loss({**batch, "tree_target": jnp.asarray(other)})
    assert abs(acted - rule) > 1e-3  # the two targets differ, so the weighting is visible
    mixed = {**batch, "tree_target_rule": jnp.asarray(other)}
    for share in (0.0, 0.25, 1.0):
        np.testing.assert_allclose(tree_loss(mixed, share), (1 - share) * acted + share * rule, rtol=1e-5)


def test_bad_policy_configs_name_the_field():
    with pytest.raises(ValueError, match="policy.capacity"):
        PolicyConfig(capacity=0)
    with pytest.raises(ValueError, match="policy.num_latents"):
        PolicyConfig(num_latents=16)
    with pytest.raises(ValueError, match="policy.max_ops"):
        dataclasses.replace(PolicyConfig(), max_ops=0)


def test_leaf_pooling_recomputes_the_paths_last_node(scripted):
    """policy.path_pool='leaf': the loss's p_bar is the path's last node, recomputed as the
    mean is (the rollout's own parameters give the rollout's leaf)."""
    pol, _, result = scripted
    batch = collate(result.trajectories, num_latents=1, path_len=pol.config.max_depth, pad_to=32)
    leaf = np.stack([s.path_emb[s.path_len - 1] if s.path_len else np.zeros_like(s.p_bar)
                     for t in result.trajectories for s in t.steps])
    assert any(s.path_len > 1 for t in result.trajectories for s in t.steps) or leaf.any()
    got = recompute_p_bar(pol.controller, jax.tree.map(jnp.asarray, batch), pool="leaf")
    np.testing.assert_allclose(np.asarray(got), leaf, atol=2e-5)


@pytest.mark.parametrize("layout", ["observation", "constant"])
def test_responses_nothing_reads_are_not_generated(embedded_model, engine, layout):
    """With the observation layout a fact turn's response is neither scored nor shown
    again: the rollout asks the engine for the questions' answers only. A layout that
    carries responses forward generates every turn."""
    cfg = PolicyConfig(num_latents=1, hidden=256, capacity=64, max_depth=4, max_ops=8, max_tokens=3,
                       layout=layout, tree_scope="episode", system_prompt="")
    pol = ActiveMem(embedded_model, engine, cfg, seed=0)
    tasks = make_recall_tasks("train", 2, 2, seed=0, n_questions=3)
    submitted = []
    submit = engine.submit

    def counting(*args, **kw):
        submitted.append(1)
        return submit(*args, **kw)

    engine.submit = counting
    try:
        result = pol.rollout(RecallEnv("train"), tasks, seed=0, commit=False)
    finally:
        engine.submit = submit
    steps = [s for t in result.trajectories for s in t.steps]
    questions = [s for s in steps if s.scored]
    assert len(steps) == 10 and len(questions) == 6
    assert all(len(s.response_ids) > 0 for s in questions)
    if layout == "observation":
        assert len(submitted) == 6 and all(s.response_ids == [] and s.text == "" for s in steps if not s.scored)
    else:
        assert len(submitted) == 10 and all(len(s.response_ids) > 0 for s in steps)
