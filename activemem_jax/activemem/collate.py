"""Rollout turns -> padded training rows (one row per agent turn).

    batch = collate(result.trajectories, num_latents=4)

Besides tokens and masks, each row carries what the loss needs to recompute p_bar_t under
the current controller (docs/design_training.md#gradient-through-memory): the path nodes'
embeddings when retrieved (`path_emb`, constants), and for every node the same episode
wrote earlier, the writing
turn's inputs (`writer_h`, `writer_p_bar`, `writer_q`), the kind of write and, for an
update, the node before it (`writer_prev`). The path axis is cut to the longest path in
the batch, rounded up to a power of two (`path_len` pads further). Rollouts that sampled the
search (policy.search_temperature) add its record: `search_q` (the turn's query vector),
`search_emb`, `search_ok`, `search_pick` (memory/_search.py), what GRPO's search term
recomputes the path's log-probability from.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from activemem_jax.activemem.policy_config import Trajectory
from activemem_jax.shapes import pow2, round_up


def path_rows(trajectories: Sequence[Trajectory], depth: Optional[int] = None) -> dict:
    """The recomputation inputs of every turn: [n, D] / [n, D, d] arrays, D = depth or
    the longest path's power of two (0 when no turn retrieved anything)."""
    steps = [(t, s) for t in trajectories for s in t.steps]
    d = steps[0][1].h.shape[-1]
    longest = max((s.path_len for _, s in steps), default=0)
    dd = pow2(longest) if depth is None else depth
    if longest > dd:
        raise ValueError(f"a path has {longest} nodes; path_len is {dd}")
    n = len(steps)
    out = {"path_mask": np.zeros((n, dd), bool), "path_emb": np.zeros((n, dd, d), np.float32),
           "writer_op": np.zeros((n, dd), np.int32), "writer_h": np.zeros((n, dd, d), np.float32),
           "writer_p_bar": np.zeros((n, dd, d), np.float32), "writer_q": np.zeros((n, dd, d), np.float32),
           "writer_prev": np.zeros((n, dd, d), np.float32)}
    for row, (t, s) in enumerate(steps):
        k = min(s.path_len, dd)
        if not k or s.path_emb is None:
            continue
        out["path_mask"][row, :k] = True
        out["path_emb"][row, :k] = s.path_emb[:k]
        for j in range(k):
            w = int(s.writer_turn[j])
            if w < 0:
                continue
            src = t.steps[w]
            out["writer_op"][row, j] = int(s.writer_op[j])
            out["writer_h"][row, j], out["writer_p_bar"][row, j] = src.h, src.p_bar
            out["writer_q"][row, j], out["writer_prev"][row, j] = src.q, s.writer_prev[j]
    return out


def collate(trajectories: Sequence[Trajectory], num_latents: int, max_len: Optional[int] = None,
            pad_to: int = 64, resp_len: Optional[int] = None, path_len: Optional[int] = None,
            gaps: Optional[Sequence[int]] = None, gap_at: int = 0,
            token_rows: Optional[Sequence[bool]] = None) -> dict:
    """One training row per turn: prompt + response ids, right-padded to a multiple of
    `pad_to` (or max_len). action_mask marks the model's own tokens (the response);
    old_logp holds the rollout's log-probs at those positions. The compact response view:
    resp_pos [n, A] (token positions, -1 pad), resp_mask, resp_old_logp, with A = resp_len
    or the next power of two of the longest response. Plus `path_rows`.
    gaps [n]: row i gets gaps[i] masked columns inserted after its first `gap_at` tokens
    (RoPE positions skip them), which lines the rows' first latents up in one column.
    token_rows [n]: rows marked False carry no tokens (all masks off, no latent or response
    positions) and do not count toward the length: the tree-only rows, whose update never
    runs the backbone (rl/rows.py)."""
    steps = [(i, s) for i, t in enumerate(trajectories) for s in t.steps]
    if not steps:
        raise ValueError("no steps to collate")
    gaps = [0] * len(steps) if gaps is None else [int(g) for g in gaps]
    if len(gaps) != len(steps) or min(gaps, default=0) < 0:
        raise ValueError(f"gaps: one count >= 0 per turn ({len(steps)} turns), got {len(gaps)}")
    token_rows = [True] * len(steps) if token_rows is None else [bool(x) for x in token_rows]
    if len(token_rows) != len(steps):
        raise ValueError(f"token_rows: one flag per turn ({len(steps)} turns), got {len(token_rows)}")
    longest = max((len(s.prompt_ids) + len(s.response_ids) + g
                   for (_, s), g, t in zip(steps, gaps, token_rows) if t), default=1)
    t_len = max_len or round_up(longest, pad_to)
    if longest > t_len:
        raise ValueError(f"a turn has {longest} tokens; max_len is {t_len}")
    n, k = len(steps), num_latents
    d = steps[0][1].h.shape[-1]
    longest_resp = max(len(s.response_ids) for _, s in steps)
    a = resp_len or pow2(longest_resp, 1)
    if longest_resp > a:
        raise ValueError(f"a response has {longest_resp} tokens; resp_len is {a}")
    out = {"tokens": np.zeros((n, t_len), np.int32), "attention_mask": np.zeros((n, t_len), bool),
           "action_mask": np.zeros((n, t_len), bool), "old_logp": np.zeros((n, t_len), np.float32),
           "latent_pos": np.full((n, k), -1, np.int32), "h": np.zeros((n, d), np.float32),
           "p_bar": np.zeros((n, d), np.float32), "tree_action": np.zeros((n,), np.int32),
           "tree_logp": np.zeros((n,), np.float32), "tree_mask": np.zeros((n, 3), bool),
           "path": np.stack([s.path for _, s in steps]).astype(np.int32),
           "episode": np.asarray([i for i, _ in steps], np.int32),
           "reward": np.asarray([trajectories[i].reward for i, _ in steps], np.float32),
           "resp_pos": np.full((n, a), -1, np.int32), "resp_mask": np.zeros((n, a), bool),
           "resp_old_logp": np.zeros((n, a), np.float32),
           "scored": np.asarray([s.scored for _, s in steps], bool)}
    for row, (_, s) in enumerate(steps):
        out["h"][row], out["p_bar"][row] = s.h, s.p_bar
        out["tree_action"][row], out["tree_logp"][row] = s.tree_action, s.tree_logp
        out["tree_mask"][row] = s.tree_mask
        if not token_rows[row]:
            continue
        g = gaps[row]
        ids = list(s.prompt_ids) + list(s.response_ids)
        p, r = len(s.prompt_ids) + g, len(s.response_ids)
        out["tokens"][row, :p + r] = ids[:gap_at] + [0] * g + ids[gap_at:]
        out["attention_mask"][row, :p + r] = True
        out["attention_mask"][row, min(gap_at, p):min(gap_at, p) + g] = False
        out["action_mask"][row, p:p + r] = True
        out["old_logp"][row, p:p + r] = s.response_logprobs
        out["resp_pos"][row, :r] = np.arange(p, p + r)
        out["resp_mask"][row, :r] = True
        out["resp_old_logp"][row, :r] = s.response_logprobs
        out["latent_pos"][row, :len(s.latent_pos)] = [x + g if x >= gap_at else x for x in s.latent_pos[:k]]
    if steps[0][1].q is not None:
        out.update(path_rows(trajectories, path_len))
    first = steps[0][1].search_pick
    if first is not None and len(first):
        out["search_q"] = np.stack([s.q for _, s in steps]).astype(np.float32)
        out["search_emb"] = np.stack([s.search_emb for _, s in steps]).astype(np.float32)
        out["search_ok"] = np.stack([s.search_ok for _, s in steps]).astype(bool)
        out["search_pick"] = np.stack([s.search_pick for _, s in steps]).astype(np.int32)
    return out


__all__ = ["collate", "path_rows"]
