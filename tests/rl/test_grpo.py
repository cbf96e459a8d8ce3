"""GRPO advantages and losses against values computed by hand (plain Python / numpy)."""

import math

import chex
import jax
import numpy as np
import pytest

from activemem_jax.rl import grpo


def test_group_advantages_by_hand():
    rewards = [1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0]  # two groups of 4
    adv = np.asarray(grpo.group_advantages(rewards, 4, eps=1e-6))
    std = math.sqrt(((0.5 ** 2) * 4) / 3)  # sample std of [1, 0, 0, 1]
    np.testing.assert_allclose(adv[:4], np.array([0.5, -0.5, -0.5, 0.5]) / (std + 1e-6), rtol=1e-6)
    np.testing.assert_array_equal(adv[4:], 0.0)  # all equal: zero advantage
    raw = np.asarray(grpo.group_advantages(rewards, 4, normalize_std=False))
    np.testing.assert_allclose(raw, [0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0])
    np.testing.assert_array_equal(np.asarray(grpo.group_advantages([3.0, 1.0], 1)), 0.0)
    assert np.asarray(jax.jit(grpo.group_advantages, static_argnums=1)(np.ones(6), 3)).shape == (6,)


LOGP = np.log(np.array([[0.5, 0.2, 0.9], [0.3, 0.6, 0.1]], np.float32))
OLD = np.log(np.array([[0.4, 0.4, 0.5], [0.3, 0.2, 0.2]], np.float32))
REF = np.log(np.array([[0.5, 0.3, 0.6], [0.4, 0.5, 0.2]], np.float32))
MASK = np.array([[1, 1, 1], [1, 1, 0]], np.float32)
ADV = np.array([1.0, -2.0], np.float32)


def reference(clip=0.2, high=None, agg="token-mean", beta=0.0, ref=None, adv=ADV):
    high = clip if high is None else high
    per = np.zeros_like(LOGP, dtype=np.float64)
    clipped_count = 0
    for b in range(2):
        for t in range(3):
            a = adv[b] if np.ndim(adv) == 1 else adv[b, t]
            r = math.exp(LOGP[b, t] - OLD[b, t])
            u, c = -a * r, -a * min(max(r, 1 - clip), 1 + high)
            per[b, t] = max(u, c)
            clipped_count += MASK[b, t] * (c > u)
            if beta:
                d = REF[b, t] - LOGP[b, t]
                per[b, t] += beta * (math.exp(d) - d - 1)
    if agg == "token-mean":
        loss = (per * MASK).sum() / MASK.sum()
    elif agg == "seq-mean-token-mean":
        loss = np.mean([(per[b] * MASK[b]).sum() / MASK[b].sum() for b in range(2)])
    else:
        loss = np.mean([(per[b] * MASK[b]).sum() / 3 for b in range(2)])
    return loss, clipped_count / MASK.sum()


@pytest.mark.parametrize("agg", grpo.AGGREGATIONS)
@pytest.mark.parametrize("beta", [0.0, 0.1])
def test_policy_loss_by_hand(agg, beta):
    loss, m = grpo.policy_loss(LOGP, OLD, ADV, MASK, clip_eps=0.2, agg=agg,
                               ref_logp=REF if beta else None, beta=beta)
    want, clip_frac = reference(agg=agg, beta=beta)
    np.testing.assert_allclose(float(loss), want, rtol=1e-5)
    np.testing.assert_allclose(float(m["clip_frac"]), clip_frac, rtol=1e-6)
    if beta:
        assert float(m["kl"]) > 0


def test_clipping_is_active_on_both_sides_and_asymmetric_clip():
    # ratios: row 0 (A > 0): 1.25, 0.5, 1.8 -> high side clips at 1.2 for t=0, t=2;
    # row 1 (A < 0): 1.0, 3.0 -> the max picks the clipped value where it is larger
    want, frac = reference(clip=0.2)
    assert 0 < frac < 1
    ratio = np.exp(LOGP - OLD)
    assert (ratio[0] > 1.2).any() and (ratio[0] < 0.8).any()  # both sides present
    loss, m = grpo.policy_loss(LOGP, OLD, ADV, MASK, clip_eps=0.2, clip_eps_high=0.28)
    want_high, _ = reference(clip=0.2, high=0.28)
    np.testing.assert_allclose(float(loss), want_high, rtol=1e-5)
    assert not np.isclose(want, want_high)
    token_adv = np.array([[1.0, 0.5, -1.0], [2.0, -0.5, 0.0]], np.float32)
    loss, _ = grpo.policy_loss(LOGP, OLD, token_adv, MASK)
    np.testing.assert_allclose(float(loss), reference(adv=token_adv)[0], rtol=1e-5)


def test_unknown_aggregation_is_refused():
    with pytest.raises(ValueError, match="agg"):
        grpo.policy_loss(LOGP, OLD, ADV, MASK, agg="sum")


def test_hierarchical_advantages_by_hand():
    rewards = np.array([1.0, 0.0, 0.0, 3.0], np.float32)  # two groups of 2
    episode = np.array([0, 0, 1, 2, 3], np.int32)
    path = np.array([[1, 2], [1, -1], [1, -1], [4, -1], [-1, -1]], np.int32)
    got = np.asarray(grpo.hierarchical_advantages(rewards, 2, episode, path, num_nodes=8,
                                                  lambda_h=0.5, eps=1e-6))
    # group 0: R = [1, 0], mean 0.5, std sqrt(0.5); node 1 activated by both: U = 0.5;
    # node 2 only by rollout 0: U = 1
    s0 = math.sqrt(0.5) + 1e-6
    a0, a1 = 0.5 / s0, -0.5 / s0
    u1, u2 = (0.5 - 0.5) / s0, (1.0 - 0.5) / s0
    # group 1: R = [0, 3], mean 1.5, std sqrt(4.5); node 4 by rollout 2: U = 0
    s1 = math.sqrt(4.5) + 1e-6
    a2, a3 = -1.5 / s1, 1.5 / s1
    u4 = (0.0 - 1.5) / s1
    want = [a0 + 0.5 * (u1 + u2) / 2, a0 + 0.5 * u1, a1 + 0.5 * u1, a2 + 0.5 * u4, a3]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    flat = np.asarray(grpo.hierarchical_advantages(rewards, 2, episode, path, 8, lambda_h=0.0))
    np.testing.assert_allclose(flat, [a0, a0, a1, a2, a3], rtol=1e-5)


def test_turn_advantages_by_hand():
    """Two groups of 3 rollouts (6 episodes of 3 turns; turn 1 and 2 scored, turn 0 not;
    rollout 5 ended after turn 0). Each scored turn is compared with the same turn of its
    group's other members only."""
    episode = np.repeat(np.arange(6), 3)[:-2]
    turn = np.tile(np.arange(3), 6)[:-2]
    scored = turn > 0
    r = np.array([0, 1, 1,  0, 0, 1,  0, 1, 0,   0, 1, 0,  0, 0, 1,  0], np.float32)
    got = np.asarray(grpo.turn_advantages(r, episode, turn, scored, 6, 3, eps=1e-6))

    def adv(values):
        m, s = np.mean(values), np.std(values, ddof=1)
        return (np.asarray(values) - m) / (s + 1e-6) if s > 0 else np.zeros(len(values))
    t1, t2 = adv([1, 0, 1]), adv([1, 1, 0])  # group 0, turns 1 and 2
    u1, u2 = adv([1, 0]), adv([0, 1])        # group 1: rollout 5 has no turns 1, 2
    want = [0, t1[0], t2[0], 0, t1[1], t2[1], 0, t1[2], t2[2], 0, u1[0], u2[0], 0, u1[1], u2[1], 0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="groups of 4"):
        grpo.turn_advantages(r, episode, turn, scored, 6, 4)


def test_to_go_advantages_by_hand():
    """The same 6 rollouts: a turn's credit is the sum of its rollout's scored rewards
    after it, compared with the same turn of its group's members that have the turn;
    the last turn (nothing after it) and a turn alone in its group get 0."""
    episode = np.repeat(np.arange(6), 3)[:-2]
    turn = np.tile(np.arange(3), 6)[:-2]
    scored = turn > 0
    r = np.array([0, 1, 1,  0, 0, 1,  0, 1, 0,   0, 1, 0,  0, 0, 1,  0], np.float32)
    r_unscored = r.copy()
    r_unscored[turn == 0] = 5.0  # an unscored turn's reward counts for nothing
    got = np.asarray(grpo.to_go_advantages(r_unscored, episode, turn, scored, 6, 3, eps=1e-6))

    def adv(values):
        m, s = np.mean(values), np.std(values, ddof=1)
        return (np.asarray(values) - m) / (s + 1e-6) if s > 0 else np.zeros(len(values))
    t0 = adv([1 + 1, 0 + 1, 1 + 0])  # group 0 after turn 0: rewards of turns 1 and 2
    t1 = adv([1, 1, 0])              # after turn 1: turn 2's
    u0 = adv([1 + 0, 0 + 1, 0])      # group 1: rollout 5 has only turn 0 (nothing after it)
    u1 = adv([0, 1])                 # turn 1 in rollouts 3 and 4 only
    want = [t0[0], t1[0], 0, t0[1], t1[1], 0, t0[2], t1[2], 0, u0[0], u1[0], 0, u0[1], u1[1], 0, u0[2]]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.abs(got).max() > 0
    with pytest.raises(ValueError, match="groups of 4"):
        grpo.to_go_advantages(r, episode, turn, scored, 6, 4)


def test_tree_loss_by_hand():
    logp = np.array([-0.5, -1.0, 0.0], np.float32)
    adv = np.array([2.0, -1.0, 5.0], np.float32)
    mask = np.array([1, 1, 0], np.float32)
    np.testing.assert_allclose(float(grpo.tree_loss(logp, adv, mask)), -(-1.0 + 1.0) / 2)
    np.testing.assert_allclose(float(grpo.tree_loss(logp, adv, np.array([1, 0, 0]))), 1.0)


class LossesJitAndNoJit(chex.TestCase):

    @chex.variants(with_jit=True, without_jit=True)
    def test_policy_loss_equals_the_hand_value(self):
        loss = self.variant(grpo.policy_loss, static_argnames=("clip_eps", "agg"))
        got, _ = loss(LOGP, OLD, ADV, MASK, clip_eps=0.2, agg="token-mean")
        chex.assert_trees_all_close(float(got), reference()[0], rtol=1e-5)


def test_wrong_shapes_fail_at_the_loss_with_the_shapes_named():
    with pytest.raises(AssertionError, match=r"policy_loss: logp, old_logp, mask"):
        grpo.policy_loss(LOGP, OLD[:, :2], ADV, MASK)
    with pytest.raises(AssertionError, match=r"tree_loss: tree_logp, advantages, mask"):
        grpo.tree_loss(np.zeros(4, np.float32), np.zeros(3, np.float32), np.ones(4, bool))
    with pytest.raises(AssertionError, match=r"episode must be \[S\], path \[S, D\]"):
        grpo.hierarchical_advantages(np.zeros(4, np.float32), 2, np.zeros(3, np.int32), np.zeros(3, np.int32), 8)
    with pytest.raises(ValueError, match="5 rewards do not split into groups of 2"):
        grpo.group_advantages(np.zeros(5, np.float32), 2)


def test_tree_kl_by_hand():
    """KL(pi || ref) summed over the actions, masked actions (log-prob -1e30) adding nothing,
    averaged over the steps where the head chose."""
    lp = np.log(np.array([[0.5, 0.5, 1e-45], [0.2, 0.3, 0.5], [0.9, 0.05, 0.05]], np.float32))
    lp[0, 2] = -1e30  # masked out
    ref = np.log(np.array([[0.25, 0.75, 1.0], [0.2, 0.3, 0.5], [1 / 3, 1 / 3, 1 / 3]], np.float32))
    ref[0, 2] = -1e30
    mask = np.array([1, 1, 0], np.float32)
    first = 0.5 * np.log(0.5 / 0.25) + 0.5 * np.log(0.5 / 0.75)
    np.testing.assert_allclose(float(grpo.tree_kl(lp, ref, mask)), (first + 0.0) / 2, rtol=1e-5)
    third = 0.9 * np.log(0.9 * 3) + 2 * 0.05 * np.log(0.05 * 3)
    np.testing.assert_allclose(float(grpo.tree_kl(lp, ref, np.array([0, 0, 1]))), third, rtol=1e-5)
    assert float(grpo.tree_kl(lp, lp, np.ones(3))) == 0.0
