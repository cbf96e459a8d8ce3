"""train.advantage: GRPO's group advantage, REINFORCE's mean baseline and REINFORCE++'s
global normalization, against numbers worked out by hand; the schema's checks; and the
trainer's advantage path (`Trainer._grpo_advantages`, on stand-in trajectories: no model)."""

import types

import jax
import numpy as np
import pytest

from activemem_jax import schema
from activemem_jax.rl import grpo
from activemem_jax.rl.trainer import Trainer

# four episodes, two groups of two: [3, 1] and [0, 0]. Batch mean 1, batch sample variance
# (4 + 0 + 1 + 1) / 3 = 2; group 1's mean 2 and sample std sqrt(2), group 2 all equal.
REWARDS = [3.0, 1.0, 0.0, 0.0]
R2 = 1.4142135623730951  # sqrt(2)
BY_HAND = {
    "grpo": [1 / R2, -1 / R2, 0.0, 0.0],            # (R - group mean) / group std
    "reinforce": [2.0, 0.0, -1.0, -1.0],            # R - batch mean, no std
    "reinforce_pp": [2 / R2, 0.0, -1 / R2, -1 / R2],  # (R - batch mean) / batch std
}


@pytest.mark.parametrize("mode", sorted(BY_HAND))
def test_each_mode_by_hand(mode):
    adv = np.asarray(grpo.episode_advantages(REWARDS, mode, group_size=2, eps=1e-6))
    np.testing.assert_allclose(adv, BY_HAND[mode], rtol=1e-5, atol=1e-6)


def test_batch_modes_are_jittable_ignore_groups_and_zero_a_single_episode():
    jitted = jax.jit(grpo.batch_advantages, static_argnums=1)
    np.testing.assert_allclose(np.asarray(jitted(np.asarray(REWARDS), "reinforce_pp")), BY_HAND["reinforce_pp"],
                               rtol=1e-5)
    for g in (1, 2, 4):  # the batch baseline does not depend on the group size
        np.testing.assert_allclose(np.asarray(grpo.episode_advantages(REWARDS, "reinforce", g)), BY_HAND["reinforce"])
    for mode in ("reinforce", "reinforce_pp"):
        np.testing.assert_array_equal(np.asarray(grpo.batch_advantages([5.0], mode)), [0.0])
        np.testing.assert_array_equal(np.asarray(grpo.batch_advantages([2.0, 2.0, 2.0], mode)), 0.0)
    with pytest.raises(ValueError, match="advantage='ppo'"):
        grpo.episode_advantages(REWARDS, "ppo", 2)


def test_the_schema_names_the_field():
    assert schema.Train().advantage == "grpo"
    with pytest.raises(schema.ConfigError, match=r"train\.advantage='ppo': grpo, reinforce or reinforce_pp"):
        schema.section(schema.Train, {"advantage": "ppo"}, "train")
    # a batch baseline needs no group; GRPO's group advantage still does
    assert schema.section(schema.Train, {"advantage": "reinforce_pp", "group_size": 1}, "train").group_size == 1
    with pytest.raises(schema.ConfigError, match=r"train\.group_size=1: GRPO needs >= 2"):
        schema.section(schema.Train, {"group_size": 1}, "train")
    # per-turn and to-go credit are group advantages that would replace A_i: refused
    for field, value in (("credit", "turn"), ("write_credit", "to_go")):
        with pytest.raises(schema.ConfigError, match=rf"train\.advantage='reinforce' with .*train\.{field}"):
            schema.section(schema.Train, {"advantage": "reinforce", field: value}, "train")


def test_a_config_override_selects_the_mode():
    from activemem_jax.config_files import load_config

    cfg = load_config("configs/activemem_tiny_cpu.py", ["train.advantage=reinforce_pp", "train.group_size=1"])
    run = schema.load(cfg)
    assert (run.train.advantage, run.train.group_size) == ("reinforce_pp", 1)
    with pytest.raises(schema.ConfigError, match=r"train\.advantage='reinfor'"):
        schema.load(load_config("configs/activemem_tiny_cpu.py", ["train.advantage=reinfor"]))


def _advantages(train: schema.Train, paths):
    """Trainer._grpo_advantages on stand-in trajectories: one step per episode, node ids `paths`."""
    steps = [types.SimpleNamespace(credit_path=np.asarray(p, np.int32), scored=True, reward=r)
             for p, r in zip(paths, REWARDS)]
    result = types.SimpleNamespace(trajectories=[types.SimpleNamespace(steps=[s]) for s in steps])
    fake = types.SimpleNamespace(run=types.SimpleNamespace(train=train),
                                 policy=types.SimpleNamespace(config=types.SimpleNamespace(capacity=4)))
    episode = np.arange(len(REWARDS), dtype=np.int32)
    return Trainer._grpo_advantages(fake, result, np.asarray(REWARDS, np.float32), episode)


@pytest.mark.parametrize("mode", sorted(BY_HAND))
def test_the_trainer_takes_the_mode_without_a_node_term(mode):
    train = schema.Train(advantage=mode, group_size=2, lambda_h=0.5)
    rows, tree, terms = _advantages(train, [[-1], [-1], [-1], [-1]])  # no node read: A_{i,t} = A_i
    np.testing.assert_allclose(rows, BY_HAND[mode], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tree, BY_HAND[mode], rtol=1e-5, atol=1e-6)
    assert terms["node"] == 0.0


def test_the_node_term_stays_on_top_of_a_batch_baseline():
    # episode 0 alone in its group reads node 0: U(0) = 3, group mean 2, std sqrt(2), so its
    # node term is lambda_h (3 - 2) / sqrt(2) = 0.5 / sqrt(2), whatever A_i is
    paths = [[0], [-1], [-1], [-1]]
    for mode in BY_HAND:
        rows, tree, terms = _advantages(schema.Train(advantage=mode, group_size=2, lambda_h=0.5), paths)
        expect = np.asarray(BY_HAND[mode]) + np.asarray([0.5 / R2, 0.0, 0.0, 0.0])
        np.testing.assert_allclose(rows, expect, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(tree, expect, rtol=1e-5, atol=1e-6)
        assert terms["node"] == pytest.approx(0.5 / R2 / 4, rel=1e-5)
