"""Training rows (one per agent turn) padded to shapes every host agrees on, and cut
into mini-batches.

    batch = pad_rows(result, adv, tree_adv, extra, k=K, budget=max_tokens, path_len=D,
                     mini_batch_rows=32, hosts=hosts)
    for chunk, tree_only in chunks(batch, 32, hosts): ...

Responses pad to a power of two of the turn budget (max_tokens) and rows to a bucket of
the longest prompt plus that budget, as veRL pads to its max response length, so the
shapes depend on the prompts only, not on how long the sampled answers were; with no
budget (SFT's expert answers) rows pad to the longest. Paths pad to max_depth (one shape
whatever the tree retrieved). Rows of unscored turns (the env scores no response there)
go last, in mini-batches of their own that train the tree head only, with no backbone
pass; they carry no tokens, so the row length is the scored rows' alone. A group's last
mini-batch pads to a power of two of its rows (at least 8), not to a whole mini-batch:
padding rows cost a full forward and backward and carry no loss.

With a frozen backbone (`frozen=True`: no LoRA) nothing before a row's first latent
depends on the trained parameters, so the batch carries "split" = (shared, grad_from):
the tokens every row begins with (the chat template's preamble: columns [0, shared)) run
once, the columns before grad_from run forward only, and only the rest is
differentiated (`activemem.inject.policy_forward`). To put every row's first latent in
one column, rows get masked gap columns after the shared preamble (RoPE positions skip
them), unless that would lengthen the rows' bucket; then grad_from is the earliest
first latent. Several hosts agree on grad_from and share no preamble.
"""

from __future__ import annotations

import numpy as np

from activemem_jax.activemem import collate
from activemem_jax.shapes import ROW_ALIGN, batch_rows, pow2, round_up, row_length

# batch keys the update does not take (host-side bookkeeping)
HOST_KEYS = ("episode", "reward", "path", "action_mask", "old_logp", "resp_old_logp", "tree_only", "split")
ALIGN = ROW_ALIGN  # grad_from and the shared preamble are multiples of this (few compiled splits)


def frozen_split(steps, budget: int, hosts) -> tuple[tuple[int, int], list[int], int]:
    """((shared, grad_from), gaps per row, row length before bucketing) for these turns."""
    total = [len(s.prompt_ids) + max(len(s.response_ids), budget) for s in steps]
    # the first column that depends on phi: the first latent, or without latents the last
    # prompt token (its hidden state predicts the first response token)
    first = [s.latent_pos[0] if len(s.latent_pos) else len(s.prompt_ids) - 1 for s in steps]
    (longest,) = hosts.agree(max(total))
    shared = 0
    if hosts.count == 1:
        ref = steps[0].prompt_ids
        shared = min(first)
        for s in steps:
            n = 0
            while n < shared and s.prompt_ids[n] == ref[n]:
                n += 1
            shared = n
        shared -= shared % ALIGN
    column = round_up(max(first), ALIGN) if max(first) > 0 else 0
    tail = max(n - f for n, f in zip(total, first))
    column, tail, neg_earliest = hosts.agree(column, tail, -min(first))
    if row_length(column + tail) <= row_length(longest):
        return (shared, column), [column - f for f in first], column + tail
    start = -neg_earliest
    return (shared, max(shared, start - start % ALIGN)), [0] * len(steps), longest


def pad_rows(result, adv_rows, tree_adv_rows, extra, *, k: int, budget: int, path_len: int,
             mini_batch_rows: int, hosts, frozen: bool = False, micro_batch_rows: int = 0) -> dict:
    """This host's rows of `result` (a RolloutResult) as padded numpy arrays, scored rows
    first, each group padded to whole mini-batches of mini_batch_rows / processes but
    its last, which pads to a power of two of its rows (>= 8). frozen: the backbone is
    not trained, so the batch gets a "split" (module docstring)."""
    steps = [s for tr in result.trajectories for s in tr.steps]
    (resp,) = hosts.agree(max(max(len(s.response_ids) for s in steps), budget))
    # only scored rows run the backbone: the row length and the split are theirs (tree-only
    # rows carry no tokens); a host without one keeps all its rows' tokens (hosts agree anyway)
    token_rows = [bool(s.scored) for s in steps]
    if not any(token_rows):
        token_rows = [True] * len(steps)
    measured = [s for s, t in zip(steps, token_rows) if t]
    split, gaps, longest = (0, 0), None, None
    if frozen:
        split, own, longest = frozen_split(measured, budget, hosts)
        own = iter(own)
        gaps = [next(own) if t else 0 for t in token_rows]
    else:
        (longest,) = hosts.agree(max(len(s.prompt_ids) + max(len(s.response_ids), budget) for s in measured))
    batch = collate(result.trajectories, k, max_len=row_length(longest), resp_len=pow2(resp),
                    path_len=path_len, gaps=gaps, gap_at=split[0], token_rows=token_rows)
    r = batch["tokens"].shape[0]
    batch["adv"], batch["tree_adv"] = adv_rows.astype(np.float32), tree_adv_rows.astype(np.float32)
    batch["row_valid"] = np.ones((r,), bool)
    batch.update(extra or {})
    scored = batch.pop("scored")
    n_scored, n_other = hosts.agree(int(scored.sum()), int((~scored).sum()))
    mb = mini_batch_rows // hosts.count

    def group(rows, total):
        part = {key: v[rows] for key, v in batch.items()}
        full, last = divmod(total, mb)
        pad = full * mb + (_last_rows(last, mb, micro_batch_rows, hosts.count) if last else 0) - len(rows)
        part = {key: np.concatenate([v, np.zeros((pad,) + v.shape[1:], v.dtype)]) for key, v in part.items()}
        part["latent_pos"][len(rows):] = -1
        part["resp_pos"][len(rows):] = -1
        if "search_pick" in part:  # padding rows searched nothing
            part["search_pick"][len(rows):] = -1
        return part

    first = group(np.flatnonzero(scored), n_scored)
    rest = group(np.flatnonzero(~scored), n_other)
    rest["resp_mask"][:] = False
    padded = {key: np.concatenate([first[key], rest[key]]) for key in batch}
    padded["tree_only"] = np.arange(len(padded["tokens"])) >= len(first["tokens"])
    if split != (0, 0):
        padded["split"] = split
    return padded


def _last_rows(last: int, mb: int, micro: int, count: int) -> int:
    """Rows (per host) of a group's last mini-batch holding `last` rows: a power of two
    >= 8, at most mb; a whole mini-batch when micro-batches of `micro` rows cannot cut it."""
    rows = min(mb, batch_rows(last))
    if micro and micro < rows * count and (rows * count) % micro:
        return mb
    return rows


def _bounds(batch: dict, mb: int) -> list[tuple[int, int]]:
    """(first, end) rows of every mini-batch: each group (scored rows, then the tree-only
    ones) in whole mini-batches of mb rows but its last."""
    n = batch["tokens"].shape[0]
    scored = int(np.sum(~batch["tree_only"]))
    starts = [*range(0, scored, mb), *range(scored, n, mb)]
    return list(zip(starts, [*starts[1:], n]))


def chunks(batch: dict, mini_batch_rows: int, hosts) -> list[tuple[dict, bool]]:
    """(global chunk, tree_only) per mini-batch of this host's padded rows."""
    out = []
    for i, j in _bounds(batch, mini_batch_rows // hosts.count):
        chunk = hosts.shard({k: v[i:j] for k, v in batch.items() if k != "split"}, skip=HOST_KEYS)
        if "split" in batch and not batch["tree_only"][i]:
            chunk["split"] = batch["split"]
        out.append((chunk, bool(batch["tree_only"][i])))
    return out


def rollout_logprobs(batch: dict, mini_batch_rows: int, hosts) -> list:
    """Per mini-batch of `chunks`, the engine's log-probs of the sampled responses
    ("resp_old_logp" [R, A]: the model's distribution at the policy that sampled them),
    placed as the chunk is: PPO's old log-probs without another forward pass."""
    return [hosts.shard({"old_logp": batch["resp_old_logp"][i:j]})["old_logp"]
            for i, j in _bounds(batch, mini_batch_rows // hosts.count)]


__all__ = ["ALIGN", "HOST_KEYS", "chunks", "frozen_split", "pad_rows", "rollout_logprobs"]
