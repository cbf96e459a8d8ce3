"""GRPO end to end on the tiny Llama: learning signal, frozen backbone, NaN guard."""

import jax
import numpy as np
import pytest

from tests.rl import train_config

pytestmark = pytest.mark.slow


def make_trainer(tmp_path, tiny_model, tiny_engine, **train):
    from activemem_jax.rl.trainer import Trainer

    cfg = train_config.get_config()
    cfg.out_dir = str(tmp_path)
    cfg.train.update(**train)
    return Trainer(cfg, model=tiny_model, engine=tiny_engine)


def test_grpo_raises_the_reward_the_prefix_controls(tmp_path, tiny_model, tiny_engine):
    before = jax.tree.map(np.asarray, tiny_model.state)
    trainer = make_trainer(tmp_path, tiny_model, tiny_engine, steps=30)
    try:
        history = trainer.train()
    finally:
        trainer.close()
    rewards = [m["reward_mean"] for m in history]
    start, end = np.mean(rewards[:5]), np.mean(rewards[-5:])
    assert end > start + 0.25 and end > 0.75, rewards
    assert all(np.isfinite(m["loss"]) and m["skipped"] == 0 for m in history)
    assert max(m["grad_norm"] for m in history) > 0
    after = jax.tree.map(np.asarray, tiny_model.state)
    jax.tree.map(np.testing.assert_array_equal, before, after)  # backbone bit-identical
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 30 and (tmp_path / "tensorboard").is_dir()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())[-1] == "30"
