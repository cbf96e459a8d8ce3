"""ActiveMem_SFT on code: the trainer takes its expert from the task family (the canonical
solutions of envs/code.py's CodeEnv), not only from the synthetic world's oracle, and the
run's memory tree is written and kept across problems (tree_scope "persistent")."""

import pytest

pytestmark = pytest.mark.slow


def test_sft_on_humaneval_replies_with_the_canonical_solutions(tmp_path, embedded_model, engine):
    from activemem_jax.activemem import INSERT
    from activemem_jax.rl.trainer import Trainer
    from configs import activemem_code_cpu

    cfg = activemem_code_cpu.get_config()
    cfg.out_dir = str(tmp_path)
    cfg.log.tensorboard = False
    cfg.data.n_tasks = 6
    cfg.train.update(prompts_per_step=2, group_size=2)
    trainer = Trainer(cfg, model=embedded_model, engine=engine)
    try:
        assert trainer.algo == "sft"
        result, group = trainer.rollout()
        assert len(group) == 4 and len({t["id"] for t in group}) == 4  # SFT: distinct problems, no copies
        for traj, task in zip(result.trajectories, group):
            assert traj.reward == 1.0 and len(traj.steps) == 1, traj.info  # the canonical program passes
            assert traj.info["passed"] == traj.info["total"] > 0 and traj.info["status"] == "ok"
            assert task["solution"].strip() in traj.steps[0].text
        actions = [s.tree_action for tr in result.trajectories for s in tr.steps]
        assert actions[0] == INSERT  # the empty tree's first write is an insert (the threshold rule)
        size = int(trainer.policy.tree.valid.sum())
        assert size > 1  # the root and the inserted nodes
        trainer.rollout()  # the tree persists: the next problems' writes add to these
        assert int(trainer.policy.tree.valid.sum()) > size
    finally:
        trainer.close()
