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
pass.
"""

from __future__ import annotations

import numpy as np

from activemem_jax.activemem import collate

# batch keys the update does not take (host-side bookkeeping)
HOST_KEYS = ("episode", "reward", "path", "action_mask", "old_logp", "resp_old_logp", "tree_only")


def bucket(n: int, lo: int = 32) -> int:
    """Row length: a power of two up to 512, then a multiple of 256 (few compiles, little padding)."""
    b = lo
    while b < n and b < 512:
        b *= 2
    return b if b >= n else -(-n // 256) * 256


def pad_rows(result, adv_rows, tree_adv_rows, extra, *, k: int, budget: int, path_len: int,
             mini_batch_rows: int, hosts) -> dict:
    """This host's rows of `result` (a RolloutResult) as padded numpy arrays, scored rows
    first, each group padded to a multiple of mini_batch_rows / processes."""
    steps = [s for tr in result.trajectories for s in tr.steps]
    longest, resp = hosts.agree(max(len(s.prompt_ids) + max(len(s.response_ids), budget) for s in steps),
                                max(max(len(s.response_ids) for s in steps), budget))
    batch = collate(result.trajectories, k, max_len=bucket(longest), resp_len=1 << max(resp - 1, 0).bit_length(),
                    path_len=path_len)
    r = batch["tokens"].shape[0]
    batch["adv"], batch["tree_adv"] = adv_rows.astype(np.float32), tree_adv_rows.astype(np.float32)
    batch["row_valid"] = np.ones((r,), bool)
    batch.update(extra or {})
    scored = batch.pop("scored")
    n_scored, n_other = hosts.agree(int(scored.sum()), int((~scored).sum()))
    mb = mini_batch_rows // hosts.count

    def group(rows, total):
        part = {key: v[rows] for key, v in batch.items()}
        pad = -(-total // mb) * mb - len(rows)
        part = {key: np.concatenate([v, np.zeros((pad,) + v.shape[1:], v.dtype)]) for key, v in part.items()}
        part["latent_pos"][len(rows):] = -1
        part["resp_pos"][len(rows):] = -1
        return part

    first = group(np.flatnonzero(scored), n_scored)
    rest = group(np.flatnonzero(~scored), n_other)
    rest["resp_mask"][:] = False
    padded = {key: np.concatenate([first[key], rest[key]]) for key in batch}
    padded["tree_only"] = np.arange(len(padded["tokens"])) >= len(first["tokens"])
    return padded


def chunks(batch: dict, mini_batch_rows: int, hosts) -> list[tuple[dict, bool]]:
    """(global chunk, tree_only) per mini-batch of this host's padded rows."""
    mb = mini_batch_rows // hosts.count
    return [(hosts.shard({k: v[i:i + mb] for k, v in batch.items()}, skip=HOST_KEYS), bool(batch["tree_only"][i]))
            for i in range(0, batch["tokens"].shape[0], mb)]


__all__ = ["HOST_KEYS", "bucket", "chunks", "pad_rows"]
