"""GRPO end to end: learning signal on a reward the prefix controls, frozen backbone."""

import jax
import numpy as np
import pytest

from tests.rl import train_config

pytestmark = pytest.mark.slow

YES_NO = ("Is Paris in France? Answer Yes or No.", "Is water wet? Answer Yes or No.",
          "Is the sun hot? Answer Yes or No.", "Is snow cold? Answer Yes or No.")


def make_trainer(tmp_path, model, engine, data=None, optim=None, **train):
    from activemem_jax.rl.trainer import Trainer

    cfg = train_config.get_config()
    cfg.out_dir = str(tmp_path)
    cfg.train.update(**train)
    cfg.data.update(**(data or {}))
    cfg.optim.update(**(optim or {}))
    return Trainer(cfg, model=model, engine=engine)


def test_grpo_raises_the_reward_the_prefix_controls(tmp_path, embedded_model, engine):
    """Reward 1 when the answer starts with "No" to questions whose answer is yes: only
    the latent prefix (2 vectors) can move it; the 135M backbone stays bit-identical."""
    before = jax.tree.map(np.asarray, embedded_model.state)
    trainer = make_trainer(tmp_path, embedded_model, engine, data=dict(prompts=YES_NO, target_words=("No",)),
                           optim=dict(lr_controller=1e-2), steps=16)
    # lr 1e-2: rewards climb to 1.0 by step 10 and stay. At 2e-2 they reach 1.0 by step 6,
    # then one update (grad norm 9.9, a group at 0.75) throws the prefix off the model's
    # input distribution: entropy 0.3 -> 5.9, reward 0 for the remaining steps (measured on
    # an AVX-512 EPYC; an AVX2 machine's rounding happened to pass).
    try:
        history = trainer.train()
    finally:
        trainer.close()
    rewards = [m["reward_mean"] for m in history]
    start, end = np.mean(rewards[:4]), np.mean(rewards[-4:])
    assert end > start + 0.3 and end >= 0.75, rewards
    assert all(np.isfinite(m["loss"]) and m["skipped"] == 0 for m in history)
    assert max(m["grad_norm"] for m in history) > 0
    after = jax.tree.map(np.asarray, embedded_model.state)
    jax.tree.map(np.testing.assert_array_equal, before, after)  # backbone bit-identical
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 16 and any((tmp_path / "tensorboard").iterdir())
    steps = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
    assert steps[-1] == 16


def test_a_non_finite_update_is_skipped(tmp_path, tiny_model, tiny_engine):
    from activemem_jax.rl.rows import HOST_KEYS

    trainer = make_trainer(tmp_path, tiny_model, tiny_engine, steps=1)
    try:
        result, _ = trainer.rollout()
        batch = trainer._rows(result, np.ones(16, np.float32), np.zeros(16, np.float32))
        chunk = trainer.hosts.shard(batch, skip=HOST_KEYS)
        chunk["old_logp"] = trainer.update.logprobs(trainer.params, tiny_model.state, chunk)
        chunk["adv"] = chunk["adv"] * np.nan
        snapshot = jax.tree.map(np.asarray, trainer.params)
        params, opt_state, m = trainer.update(trainer.params, trainer.opt_state, tiny_model.state, chunk)
        assert float(m["skipped"]) == 1.0
        jax.tree.map(np.testing.assert_array_equal, snapshot, jax.tree.map(np.asarray, params))
    finally:
        trainer.close()


def test_a_curve_evaluation_leaves_the_next_step_unchanged(tmp_path, tiny_model, tiny_engine):
    """bench_memory evaluates the trainer's own policy between steps: the step after that
    evaluation must equal the step of a run that did not evaluate (params, tree, query
    space, loss). Persistent scope: the tree an evaluation would commit to is the one the
    next step reads."""
    scope = "persistent"
    from activemem_jax.activemem import evaluate as ev
    from activemem_jax.envs.recall import make_recall_tasks
    from activemem_jax.rl.trainer import Trainer
    from configs import activemem_tiny_cpu

    def run(evaluate: bool, where):
        cfg = activemem_tiny_cpu.get_config()
        cfg.out_dir = str(where)
        cfg.log.tensorboard = False
        cfg.policy.update(hidden=32, tree_scope=scope)
        cfg.data.update(n_facts=2, n_questions=2, n_tasks=8, max_turns=4)
        cfg.train.update(steps=2, sft_steps=1, prompts_per_step=1, group_size=2, mini_batch_rows=8, seeds=())
        trainer = Trainer(cfg, model=tiny_model, engine=tiny_engine)
        try:
            trainer.train_step()
            if evaluate:
                ev.evaluate_recall(trainer.policy, make_recall_tasks("test", 2, 2, seed=1, n_questions=2))
            m = trainer.train_step()  # GRPO: sampled with seeds of (seed, step), so comparable
            return m, jax.tree.map(np.asarray, (trainer.params, trainer.policy.memory_state))
        finally:
            trainer.close()

    m_eval, state_eval = run(True, tmp_path / "eval")
    m_plain, state_plain = run(False, tmp_path / "plain")
    jax.tree.map(np.testing.assert_array_equal, state_eval, state_plain)
    for k in ("loss", "reward_mean", "tree_inserts", "tree_size"):
        assert m_eval[k] == m_plain[k], (k, m_eval[k], m_plain[k])
    assert float(np.asarray(state_plain[1]["query"].count)) > 0  # the commits did fold observations


def test_dossier_streams_train_in_order_through_their_own_trees(tmp_path, tiny_model, tiny_engine):
    """Each step runs the next episode of the same streams (data/streams.py) and commits to
    the stream's own tree, which outlives the episode; the order and the trees resume from
    a checkpoint: the same trees, and the same tree actions on the next episodes. The GRPO
    step samples the questions' searches, credits them per turn and credits writes by the
    answers after them."""
    from activemem_jax.rl.trainer import Trainer
    from configs.experiments import dossier_base

    cfg = dossier_base.get_config()
    cfg.out_dir = str(tmp_path)
    cfg.log.tensorboard = False
    cfg.policy.update(hidden=32)
    cfg.data.dossier.update(streams=4, episodes=3, questions=2, decoys=1, corrections=1, reminders=0)
    cfg.train.update(steps=3, sft_steps=2, prompts_per_step=2, group_size=2, mini_batch_rows=8, seeds=(),
                     credit="turn", write_credit="to_go", sft_head="mix")  # SFT's head: expert and rule
    cfg.policy.update(search_temperature=0.1)  # GRPO samples the questions' searches (SFT and greedy do not)
    cfg.checkpoint.update(every=1, async_save=False)

    def next_actions(trainer):  # greedy tree actions on the next batch; an uncommitted rollout changes nothing
        state, memory = trainer.data.get_state(), jax.tree.map(np.asarray, trainer.policy.memory_state)
        tasks = next(trainer.data)
        trainer.data.set_state(state)
        result = trainer.policy.rollout(trainer.make_env(), tasks, seed=1, greedy=True, commit=False,
                                        temperature=0.01)
        after = jax.tree.map(np.asarray, trainer.policy.memory_state)
        assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(memory), jax.tree.leaves(after)))
        return [[s.tree_action for s in t.steps] for t in result.trajectories]

    trainer = Trainer(cfg, model=tiny_model, engine=tiny_engine)
    try:
        seen = []
        for _ in range(2):  # SFT (the threshold rule) writes into each stream's tree
            state = trainer.data.get_state()
            m = trainer.train_step()
            seen.append(state["step"])
            assert m["tree_inserts"] > 0 and np.isfinite(m["tree_loss"])
        assert seen == [0, 1] and trainer.data.get_state() == {"step": 2}  # one batch of episodes a step
        store = trainer.policy.streams
        held = np.asarray(store.ids) >= 0
        assert held.sum() == 2  # two streams in flight, one slot each
        assert all(int(np.asarray(store.trees.valid[i]).sum()) > 1 for i in np.flatnonzero(held))
        trainer.save()
        saved = jax.tree.map(np.asarray, trainer.policy.streams)
        actions = next_actions(trainer)
    finally:
        trainer.close()
    resumed = Trainer(cfg, model=tiny_model, engine=tiny_engine)
    try:
        assert resumed.step == 2 and resumed.data.get_state() == {"step": 2}
        for a, b in zip(jax.tree.leaves(saved), jax.tree.leaves(jax.tree.map(np.asarray, resumed.policy.streams))):
            np.testing.assert_array_equal(a, b)
        assert next_actions(resumed) == actions
        m = resumed.train_step()  # GRPO: a group of 2 rollouts per stream commits one tree per stream
        assert m["algo"] == "grpo" and np.isfinite(m["loss"]) and np.isfinite(m["adv_write"])
        # the questions' searches were sampled and scored (the tiny model answers every question
        # alike, so their advantages, and the key head's gradient, are 0 here; the gradient
        # itself is checked in tests/activemem/test_search_policy.py)
        assert m["search_logp"] < 0 and "grad_key" in m and "key_loss" not in m
        resumed.save()
    finally:
        resumed.close()
    # the checkpoint scored on a held-out stream with and without episode-end maintenance
    # (launch/score_streams.py): the same restored step, a prune each episode only with it
    from launch.ablation.table import score_variants

    scored = cfg.copy_and_resolve_references()
    scored.policy.update(prune_fraction=0.5, utility_start="first", credit_writes=True)
    rows = score_variants(scored, str(tmp_path / "checkpoints"), ["full", "w/o merge/delete"], tiny_model,
                          tiny_engine, streams=1, log=None)
    full, kept = rows["full"], rows["w/o merge/delete"]
    assert full["step"] == kept["step"] == 3 and len(full["per_episode"]) == len(kept["per_episode"]) == 3
    assert full["pruned"] > 0 and kept["pruned"] == kept["merged"] == 0
    assert full["per_episode"][-1]["nodes"] < kept["per_episode"][-1]["nodes"]


def test_the_tree_kl_holds_grpo_near_the_head_it_started_from(tmp_path, tiny_model, tiny_engine):
    """train.tree_kl: the reference is the head at the first GRPO step (KL 0 there), kept
    while the params move; the same GRPO step from the same checkpoint moves the head
    towards a reference that prefers noop; a run resumed past the SFT steps reads the
    reference from the checkpoint of train.sft_steps (kept for good by the trainer, whatever
    checkpoint.keep), and stops with the field named when that checkpoint is gone."""
    import shutil

    from activemem_jax.rl.trainer import Trainer
    from configs.experiments import dossier_base

    cfg = dossier_base.get_config()
    cfg.out_dir = str(tmp_path)
    cfg.log.tensorboard = False
    cfg.policy.update(hidden=32, tree_temperature=1.0)
    cfg.data.dossier.update(streams=4, episodes=3, questions=2, decoys=1, corrections=1, reminders=0)
    cfg.train.update(steps=4, sft_steps=1, prompts_per_step=2, group_size=2, mini_batch_rows=8, seeds=(),
                     sft_head="mix", tree_kl=1.0)
    cfg.checkpoint.update(every=1, async_save=False, keep=1)  # step 1, the SFT end, is kept beside the newest
    head = lambda params, part="kernel": np.asarray(params["controller"]["tree"][part][...])  # noqa: E731

    def third_step(prefer_noop: bool):  # step 3 from step 2's checkpoint: the noop-minus-insert bias after it
        cfg.checkpoint.step = 2
        trainer = Trainer(cfg, model=tiny_model, engine=tiny_engine)
        try:
            assert trainer.step == 2 and trainer.tree_ref is None
            ref = trainer._tree_reference()  # read from the checkpoint of step 1
            np.testing.assert_array_equal(head(ref), sft_end)
            if prefer_noop:
                ref["controller"]["tree"]["bias"][...] = head(ref, "bias") + np.array([3.0, -3.0, 0.0], np.float32)
            m = trainer.train_step()
            bias = head(trainer.params, "bias")
            return m, bias[0] - bias[1]
        finally:
            trainer.close()

    trainer = Trainer(cfg, model=tiny_model, engine=tiny_engine)
    try:
        assert trainer.train_step()["algo"] == "sft"
        trainer.save()
        sft_end = head(trainer.params)
        m = trainer.train_step()
        assert m["algo"] == "grpo" and abs(m["tree_kl"]) < 1e-6  # the head is its own reference
        np.testing.assert_array_equal(head(trainer.tree_ref), sft_end)
        assert not np.array_equal(head(trainer.params), sft_end)  # the params moved, the reference did not
        trainer.save()
    finally:
        trainer.close()
    m_own, own = third_step(False)
    m_noop, noop = third_step(True)
    assert m_noop["tree_kl"] > 0.1 > m_own["tree_kl"] and noop > own
    shutil.rmtree(tmp_path / "checkpoints" / "1")
    cfg.checkpoint.step = 2
    resumed = Trainer(cfg, model=tiny_model, engine=tiny_engine)
    try:
        with pytest.raises(ValueError, match=r"train.tree_kl=1.0: resuming at step 2 .* train.sft_steps=1"):
            resumed.train_step()
    finally:
        resumed.close()


def test_a_grpo_span_runs_a_streams_consecutive_episodes_as_one_rollout(tmp_path, tiny_model, tiny_engine):
    """train.grpo_span=2: after one-episode SFT steps, a GRPO step runs episodes 0 and 1 of
    each stream as one rollout (their turns in order, one tree, one return), takes two
    batches of the stream order, commits both episodes' writes to the stream's tree; a span
    that does not tile the streams stops at start with the field named."""
    from activemem_jax.rl.trainer import Trainer
    from configs.experiments import dossier_base

    cfg = dossier_base.get_config()
    cfg.out_dir = str(tmp_path)
    cfg.log.tensorboard = False
    cfg.policy.update(hidden=32, tree_temperature=1.0, max_ops=32)
    cfg.data.dossier.update(streams=4, episodes=2, questions=2, decoys=1, corrections=1, reminders=0)
    cfg.train.update(steps=3, sft_steps=2, prompts_per_step=2, group_size=2, mini_batch_rows=8, seeds=(),
                     sft_head="mix", write_credit="to_go", grpo_span=2)
    cfg.checkpoint.update(every=100, async_save=False)
    trainer = Trainer(cfg, model=tiny_model, engine=tiny_engine)
    try:
        rollouts = []
        real = trainer.policy.rollout

        def spy(env, tasks, **kw):  # the real rollout; what it ran is recorded
            result = real(env, tasks, **kw)
            rollouts.append(([t["turns"] for t in tasks], [len(tr.steps) for tr in result.trajectories],
                             np.asarray(trainer.policy.streams.trees.valid).sum()))
            return result

        trainer.policy.rollout = spy
        for _ in range(2):
            assert trainer.train_step()["algo"] == "sft"
        assert trainer.data.get_state() == {"step": 2}
        sft_turns = {len(turns) for turns in rollouts[-1][0]}
        nodes_before = rollouts[-1][2]
        m = trainer.train_step()
        assert m["algo"] == "grpo" and np.isfinite(m["loss"]) and np.isfinite(m["adv_write"])
        assert trainer.data.get_state() == {"step": 4}  # two batches of episodes: 0 and 1 of the next streams
        turns, steps, nodes_after = rollouts[-1]
        assert len(turns) == 4  # 2 streams x a group of 2
        assert {len(t) for t in turns} == {2 * n for n in sft_turns} and set(steps) == {2 * n for n in sft_turns}
        assert m["tree_inserts"] > 0 and nodes_after > nodes_before
    finally:
        trainer.close()
    cfg.out_dir = str(tmp_path / "odd")
    cfg.train.update(sft_steps=1)  # GRPO would start at episode 1: a span would cross into the next stream
    with pytest.raises(ValueError, match=r"train.grpo_span=2 must divide .* train.sft_steps=1"):
        Trainer(cfg, model=tiny_model, engine=tiny_engine).close()
