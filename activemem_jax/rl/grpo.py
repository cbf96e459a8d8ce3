"""GRPO losses and advantages (docs/design_training.md#grpo). Pure, jittable functions.

    from activemem_jax.rl import grpo
    adv = grpo.group_advantages(rewards, group_size, eps=1e-6, normalize_std=True)  # [B*G]
    adv = grpo.batch_advantages(rewards, "reinforce_pp", eps=1e-6)                   # [E]
    loss, metrics = grpo.policy_loss(logp, old_logp, advantages, mask, clip_eps=0.2,
                                     clip_eps_high=None, agg="token-mean", ref_logp=None, beta=0.0)

Conventions:
- Rewards are laid out group by group: rows [g*G, (g+1)*G) are the G samples of prompt g.
- std is the sample standard deviation (ddof = 1, as TRL and veRL compute it); a group
  of one, or whose rewards are all equal, gets zero advantage.
- Advantage modes (`train.advantage`, `episode_advantages`): "grpo" is the group-relative
  advantage above; "reinforce" is vanilla REINFORCE with a mean baseline, A_i = R_i -
  mean_B R over all E episodes of the step (no std); "reinforce_pp" is REINFORCE++'s
  global normalization, A_i = (R_i - mean_B R) / (std_B R + eps) with mean and sample std
  over all E episodes of the step, not per group (no critic). A step of one episode, or of
  equal rewards, gets zero advantage under both batch modes.
- The clipped surrogate is PPO's: max(-A r, -A clip(r, 1 - eps, 1 + eps_high)) per token.
- KL is k3: exp(ref - logp) - (ref - logp) - 1, added per token times beta.
- Aggregations over the masked tokens of [B, T]:
  token-mean: sum / number of tokens; seq-mean-token-mean: the mean over sequences
  (with at least one token) of each sequence's token mean; seq-mean-token-sum-norm
  (Dr.GRPO): each sequence's token sum divided by the constant T, averaged over B.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def _group_stats(rewards, group_size: int, eps: float):
    rewards = jnp.asarray(rewards, jnp.float32)
    chex.assert_rank(rewards, 1, custom_message="rewards must be [B*G], one per rollout")
    if rewards.shape[0] % group_size:
        raise ValueError(f"{rewards.shape[0]} rewards do not split into groups of {group_size}")
    r = rewards.reshape(-1, group_size)
    mean = jnp.mean(r, axis=1)
    if group_size > 1:
        std = jnp.sqrt(jnp.sum((r - mean[:, None]) ** 2, axis=1) / (group_size - 1))
    else:
        std = jnp.zeros_like(mean)
    return r, mean, std


def group_advantages(rewards, group_size: int, eps: float = 1e-6, normalize_std: bool = True):
    """A_i = (R_i - mean_G R) / (std_G R + eps) (or without the std when normalize_std
    is False, as Dr.GRPO). rewards [B*G] -> [B*G] float32."""
    r, mean, std = _group_stats(rewards, group_size, eps)
    adv = r - mean[:, None]
    if normalize_std:
        adv = adv / (std[:, None] + eps)
    return adv.reshape(-1)


ADVANTAGES = ("grpo", "reinforce", "reinforce_pp")


def batch_advantages(rewards, mode: str, eps: float = 1e-6):
    """The batch-baseline advantages of REINFORCE and REINFORCE++ over all episodes of a
    step (no groups): "reinforce": R_i - mean R; "reinforce_pp": (R_i - mean R) / (std R
    + eps), std the sample std (ddof 1; 0 for a single episode). rewards [E] -> [E] float32."""
    rewards = jnp.asarray(rewards, jnp.float32)
    chex.assert_rank(rewards, 1, custom_message="rewards must be [E], one per episode")
    if mode not in ("reinforce", "reinforce_pp"):
        raise ValueError(f"batch_advantages: mode={mode!r}: reinforce or reinforce_pp")
    adv = rewards - jnp.mean(rewards)
    if mode == "reinforce":
        return adv
    n = rewards.shape[0]
    std = jnp.sqrt(jnp.sum(adv ** 2) / (n - 1)) if n > 1 else jnp.zeros((), jnp.float32)
    return adv / (std + eps)


def episode_advantages(rewards, mode: str, group_size: int, eps: float = 1e-6):
    """A_i of each episode under `train.advantage` (module doc): "grpo" the group
    advantage, "reinforce" / "reinforce_pp" the batch-baseline one. rewards [E] -> [E]."""
    if mode == "grpo":
        return group_advantages(rewards, group_size, eps)
    if mode in ADVANTAGES:
        return batch_advantages(rewards, mode, eps)
    raise ValueError(f"advantage={mode!r}: choose from {ADVANTAGES}")


def _turn_grid(values, episode, turn, num_episodes: int, num_turns: int | None):
    """values [S] per step -> [E, W] (0 where a rollout has no such turn) and the turn
    width W (num_turns, else read from `turn`, which a jitted caller cannot do)."""
    episode, turn = jnp.asarray(episode, jnp.int32), jnp.asarray(turn, jnp.int32)
    width = num_turns if num_turns is not None else (int(jnp.max(turn)) + 1 if turn.shape[0] else 1)
    grid = jnp.zeros((num_episodes, width), jnp.float32).at[episode, turn].set(jnp.asarray(values, jnp.float32))
    return grid, episode, turn


def _per_turn_group_advantages(r, m, group_size: int, eps: float):
    """[E, W] values r over the cells m (1 / 0) -> the group advantage of each cell among
    the members of its group that have it, 0 where fewer than two do."""
    num_episodes, width = r.shape
    m, r = m.reshape(-1, group_size, width), r.reshape(-1, group_size, width)
    count = jnp.sum(m, axis=1, keepdims=True)
    mean = jnp.sum(r * m, axis=1, keepdims=True) / jnp.maximum(count, 1.0)
    std = jnp.sqrt(jnp.sum(((r - mean) * m) ** 2, axis=1, keepdims=True) / jnp.maximum(count - 1.0, 1.0))
    return jnp.where((m > 0) & (count >= 2), (r - mean) / (std + eps), 0.0).reshape(num_episodes, width)


def turn_advantages(step_rewards, episode, turn, scored, num_episodes: int, group_size: int, eps: float = 1e-6,
                    num_turns: int | None = None):
    """Per-turn group advantages for scored turns: A_{i,t} = (r_{i,t} - mean_G r_{.,t}) /
    (std_G r_{.,t} + eps) over the members of rollout i's group that scored turn t (the
    same observation in every member of a group of one episode), 0 for unscored turns and
    where fewer than two members scored it. step_rewards, episode, turn, scored [S] (one
    row per step; episodes grouped as in `group_advantages`); num_turns the longest episode
    (None: read from `turn`, which a jitted caller cannot do). Returns [S] float32."""
    chex.assert_rank([step_rewards, episode, turn, scored], 1, custom_message="turn_advantages: [S] inputs")
    chex.assert_equal_shape([step_rewards, episode, turn, scored], custom_message="turn_advantages: one row per step")
    if num_episodes % group_size:
        raise ValueError(f"{num_episodes} rollouts do not split into groups of {group_size}")
    mask, episode, turn = _turn_grid(scored, episode, turn, num_episodes, num_turns)
    r, _, _ = _turn_grid(step_rewards, episode, turn, num_episodes, num_turns)
    return _per_turn_group_advantages(r, mask, group_size, eps)[episode, turn]


def to_go_advantages(step_rewards, episode, turn, scored, num_episodes: int, group_size: int, eps: float = 1e-6,
                     num_turns: int | None = None):
    """The credit of a write by what is answered after it: G_{i,t} = the sum of rollout i's
    scored rewards at turns after t, and A_{i,t} = (G_{i,t} - mean_G G_{.,t}) / (std_G
    G_{.,t} + eps) over the members of the group that have turn t (0 where fewer than two
    do, and where every member answers alike after t). Inputs as `turn_advantages`.
    Returns [S] float32."""
    chex.assert_rank([step_rewards, episode, turn, scored], 1, custom_message="to_go_advantages: [S] inputs")
    chex.assert_equal_shape([step_rewards, episode, turn, scored],
                            custom_message="to_go_advantages: one row per step")
    if num_episodes % group_size:
        raise ValueError(f"{num_episodes} rollouts do not split into groups of {group_size}")
    present, episode, turn = _turn_grid(jnp.ones(jnp.shape(episode)[0], jnp.float32), episode, turn, num_episodes,
                                        num_turns)
    r, _, _ = _turn_grid(jnp.where(jnp.asarray(scored, bool), jnp.asarray(step_rewards, jnp.float32), 0.0),
                         episode, turn, num_episodes, num_turns)
    after = jnp.flip(jnp.cumsum(jnp.flip(r, axis=1), axis=1), axis=1) - r  # sum over t' > t
    return _per_turn_group_advantages(after, present, group_size, eps)[episode, turn]


def hierarchical_advantages(rewards, group_size: int, episode, path, num_nodes: int,
                            lambda_h: float = 0.5, eps: float = 1e-6):
    """Per-step advantages A_{i,t} = A_i + lambda_h * mean_{n in P_t} (U(n) - mean_G R) /
    (std_G R + eps), where U(n) is the mean return of the group's rollouts that activated
    node n (docs/design_training.md#hierarchical-advantage). rewards [E] (E = B*G, grouped);
    episode [S] the rollout of each step; path [S, D] node ids the group shares (-1 pad;
    `activemem.streams.credit_ids`), num_nodes the width of that id space.
    Returns [S] float32 (lambda_h = 0: the plain group advantage of the step's rollout)."""
    chex.assert_rank([episode, path], [1, 2], custom_message="episode must be [S], path [S, D]")
    chex.assert_equal_shape_prefix([episode, path], 1, custom_message="episode and path: one row per step")
    chex.assert_type([episode, path], int, custom_message="episode and path are indices")
    r, mean, std = _group_stats(rewards, group_size, eps)
    e = r.size
    rewards = r.reshape(-1)
    base = group_advantages(rewards, group_size, eps)[episode]
    if lambda_h == 0.0:
        return base
    group = jnp.arange(e) // group_size
    nodes = jnp.where(path >= 0, path, num_nodes)  # padding -> an extra column, dropped
    act = jnp.zeros((e, num_nodes + 1), bool).at[episode[:, None], nodes].set(True)[:, :num_nodes]
    act = act.astype(jnp.float32)
    n_groups = e // group_size
    hits = jax.ops.segment_sum(act, group, n_groups)                       # [groups, N]
    ret = jax.ops.segment_sum(act * rewards[:, None], group, n_groups)     # [groups, N]
    utility = ret / jnp.maximum(hits, 1.0)
    g = group[episode]                                                     # [S]
    score = (utility[g[:, None], jnp.maximum(path, 0)] - mean[g][:, None]) / (std[g][:, None] + eps)
    on = path >= 0
    node_term = jnp.sum(jnp.where(on, score, 0.0), axis=1) / jnp.maximum(jnp.sum(on, axis=1), 1)
    return base + lambda_h * node_term


def aggregate(per_token, mask, agg: str):
    mask = mask.astype(jnp.float32)
    if agg == "token-mean":
        return jnp.sum(per_token * mask) / jnp.maximum(jnp.sum(mask), 1.0)
    if agg == "seq-mean-token-mean":
        tokens = jnp.sum(mask, axis=-1)
        seq = jnp.sum(per_token * mask, axis=-1) / jnp.maximum(tokens, 1.0)
        has = (tokens > 0).astype(jnp.float32)
        return jnp.sum(seq * has) / jnp.maximum(jnp.sum(has), 1.0)
    if agg == "seq-mean-token-sum-norm":
        return jnp.mean(jnp.sum(per_token * mask, axis=-1) / mask.shape[-1])
    raise ValueError(f"agg={agg!r}: choose from {AGGREGATIONS}")


def policy_loss(logp, old_logp, advantages, mask, clip_eps: float = 0.2, clip_eps_high=None,
                agg: str = "token-mean", ref_logp=None, beta: float = 0.0):
    """The clipped GRPO objective on the model's own tokens (mask [B, T]); advantages [B]
    or [B, T]. Returns (loss, metrics dict)."""
    if agg not in AGGREGATIONS:
        raise ValueError(f"agg={agg!r}: choose from {AGGREGATIONS}")
    chex.assert_rank(logp, 2, custom_message="policy_loss: logp must be [B, T]")
    chex.assert_equal_shape([logp, old_logp, mask], custom_message="policy_loss: logp, old_logp, mask")
    if ref_logp is not None:
        chex.assert_equal_shape([logp, ref_logp], custom_message="policy_loss: logp, ref_logp")
    high = clip_eps if clip_eps_high is None else clip_eps_high
    adv = jnp.asarray(advantages, jnp.float32)
    if adv.ndim == 1:
        adv = adv[:, None]
    adv = jnp.broadcast_to(adv, logp.shape)
    ratio = jnp.exp(logp - old_logp)
    unclipped = -adv * ratio
    clipped = -adv * jnp.clip(ratio, 1.0 - clip_eps, 1.0 + high)
    pg = jnp.maximum(unclipped, clipped)
    per_token = pg
    m = mask.astype(jnp.float32)
    n = jnp.maximum(jnp.sum(m), 1.0)
    metrics = {"pg_loss": aggregate(pg, mask, agg),
               "clip_frac": jnp.sum((clipped > unclipped) * m) / n,
               "ratio_mean": jnp.sum(ratio * m) / n}
    if ref_logp is not None and beta:
        delta = ref_logp - logp
        kl = jnp.exp(delta) - delta - 1.0
        per_token = per_token + beta * kl
        metrics["kl"] = jnp.sum(kl * m) / n
    elif ref_logp is not None:
        delta = ref_logp - logp
        metrics["kl"] = jnp.sum((jnp.exp(delta) - delta - 1.0) * m) / n
    return aggregate(per_token, mask, agg), metrics


def tree_loss(tree_logp, advantages, mask):
    """REINFORCE for the tree head: -sum_t log pi_tree(a_t | u_t) A_{i,t} over the steps
    where the head chose among several actions (mask [S]), averaged over those steps."""
    chex.assert_rank(tree_logp, 1, custom_message="tree_loss: tree_logp must be [S]")
    chex.assert_equal_shape([tree_logp, advantages, mask], custom_message="tree_loss: tree_logp, advantages, mask")
    m = mask.astype(jnp.float32)
    return -jnp.sum(tree_logp * advantages * m) / jnp.maximum(jnp.sum(m), 1.0)


def tree_kl(tree_lp, ref_lp, mask):
    """KL(pi_tree || pi_ref) summed exactly over the actions (tree_lp, ref_lp [S, A] log-probs;
    an action masked out, of zero probability under either, adds nothing), averaged over the steps where
    the head chose (mask [S]): what keeps GRPO's head near the head it started from."""
    chex.assert_rank([tree_lp, ref_lp, mask], [2, 2, 1], custom_message="tree_kl: tree_lp, ref_lp [S, A], mask [S]")
    chex.assert_equal_shape([tree_lp, ref_lp], custom_message="tree_kl: tree_lp and ref_lp")
    p = jnp.exp(tree_lp)
    live = (p > 0) & (jnp.exp(ref_lp) > 0)
    per_step = jnp.sum(jnp.where(live, p * (tree_lp - ref_lp), 0.0), axis=-1)
    m = mask.astype(jnp.float32)
    return jnp.sum(per_step * m) / jnp.maximum(jnp.sum(m), 1.0)


__all__ = ["ADVANTAGES", "AGGREGATIONS", "aggregate", "batch_advantages", "episode_advantages", "group_advantages",
           "hierarchical_advantages", "policy_loss", "to_go_advantages", "tree_kl", "tree_loss", "turn_advantages"]
