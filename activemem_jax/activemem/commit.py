"""Episode end (docs/design_memory.md#rollout-and-commit): commit the rollouts' op logs to the
persistent tree, credit the activated paths with the episode returns, run the
maintenance; and the tree telemetry every training step line and evaluation row reports.

    tree, resolved, counts = finish(cfg, tree, logs, overlay_paths, turns, returns)   # jitted
    stats = telemetry(trajectories, counts, tree)
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from activemem_jax.memory import tree as hlmt


def finish(c, tree, logs, overlay_paths, turns, returns):
    """c: PolicyConfig (static). Returns (tree, resolved [E, turns, D] persistent slots,
    counts {inserts, updates, pruned, merged})."""
    tree, assigned = hlmt.commit(tree, logs, return_slots=True)
    resolved = jax.vmap(hlmt.resolve_slots)(logs, assigned, overlay_paths)
    e, n_turns, depth = resolved.shape
    real = jnp.arange(n_turns)[None, :] < turns[:, None]
    resolved = jnp.where(real[..., None], resolved, -1)

    def credit(t, xs):
        nodes, r = xs
        length = jnp.sum(nodes >= 0).astype(jnp.int32)
        return hlmt.record_activations(t, hlmt.Path(nodes, length, jnp.zeros((depth,))), r), None

    flat = resolved.reshape(e * n_turns, depth)
    tree, _ = jax.lax.scan(credit, tree, (flat, jnp.repeat(returns, n_turns)))
    if c.credit_writes:
        tree = hlmt.credit_slots(tree, assigned, returns[:, None])
    tree, pruned, merged = _maintain(c, tree)
    entries = jnp.arange(logs.op.shape[-1])[None, :] < logs.length[:, None]
    updates = jnp.sum(entries & (logs.op == hlmt.OP_UPDATE))
    counts = {"inserts": jnp.sum(assigned >= 0), "updates": updates, "pruned": pruned, "merged": merged}
    return tree, resolved, counts


def _maintain(c, tree):
    idle, first = c.idle_utility == "decay", c.utility_start == "first"
    if c.maintenance:
        return hlmt.end_episode(tree, c.ema_beta, c.prune_fraction, c.tau_merge, return_counts=True,
                                idle_decay=idle, first_sets=first)
    # w/o merge/delete: utilities still tracked, nothing pruned or merged
    return hlmt.end_episode(tree, c.ema_beta, 0.0, 2.0, return_counts=True, idle_decay=idle, first_sets=first)


def finish_groups(c, group_size: int, snapshots, logs, overlay_paths, credit_paths, turns, returns):
    """tree_scope='stream' (activemem/streams.py): episodes come in groups of group_size
    consecutive rollouts of one episode, each group reading one snapshot (snapshots [E],
    equal within a group). Per group, the first rollout's log is committed to the
    snapshot; every member's activations of snapshot nodes (credit_paths [E, turns, D],
    `streams.snapshot_paths`) and the first rollout's activations of its own new nodes
    are credited with the member's return; then the maintenance. Returns (trees [groups],
    resolved [E, turns, D] (the first rollout's paths in the committed tree, the others'
    snapshot nodes), summed counts)."""
    e = logs.op.shape[0]
    g = e // group_size

    def grouped(x):
        return x.reshape((g, group_size) + x.shape[1:])

    def one(snap, log, paths, credit, turn, ret):
        tree = jax.tree.map(lambda x: x[0], snap)
        first = jax.tree.map(lambda x: x[:1], log)
        tree, assigned = hlmt.commit(tree, first, return_slots=True)
        own = hlmt.resolve_slots(jax.tree.map(lambda x: x[0], log), assigned[0], paths[0])
        n_turns, depth = own.shape
        real = jnp.arange(n_turns)[None, :] < turn[:, None]
        resolved = jnp.where(real[..., None], credit.at[0].set(own), -1)

        def credit_one(t, xs):
            nodes, r = xs
            return hlmt.record_activations(t, hlmt.Path(nodes, jnp.sum(nodes >= 0).astype(jnp.int32),
                                                        jnp.zeros((depth,))), r), None

        tree, _ = jax.lax.scan(credit_one, tree, (resolved.reshape(-1, depth), jnp.repeat(ret, n_turns)))
        if c.credit_writes:
            tree = hlmt.credit_slots(tree, assigned[0], ret[0])
        tree, pruned, merged = _maintain(c, tree)
        entries = jnp.arange(first.op.shape[-1]) < first.length[0]
        counts = {"inserts": jnp.sum(assigned >= 0), "updates": jnp.sum(entries & (first.op[0] == hlmt.OP_UPDATE)),
                  "pruned": pruned, "merged": merged}
        return tree, resolved, counts

    trees, resolved, counts = jax.vmap(one)(jax.tree.map(grouped, snapshots), jax.tree.map(grouped, logs),
                                            grouped(overlay_paths), grouped(credit_paths), grouped(turns),
                                            grouped(returns))
    return trees, resolved.reshape((e,) + resolved.shape[2:]), {k: jnp.sum(v) for k, v in counts.items()}


def finish_episodes(c, empty, logs, overlay_paths, turns, returns):
    """tree_scope='episode': each episode's log committed to its own fresh tree and
    maintained there (vmapped). Returns (trees [E, ...], resolved, summed counts)."""
    def one(log, path, turn, ret):
        tree, resolved, counts = finish(c, empty, jax.tree.map(lambda x: x[None], log), path[None],
                                        turn[None], ret[None])
        return tree, resolved[0], counts

    trees, resolved, counts = jax.vmap(one)(logs, overlay_paths, turns, returns)
    return trees, resolved, {k: jnp.sum(v) for k, v in counts.items()}


def telemetry(trajectories: Sequence, counts: dict, tree, logs=None) -> dict:
    """Tree telemetry of one rollout batch: share of turns with a non-empty path, mean
    path length, tree actions taken, inserts / updates committed, nodes pruned / merged,
    tree size and depth (for a batch of episode trees: the mean size, the max depth) and,
    given the rollouts' op logs, `turns_log_full`: turns after a rollout's log filled
    (`policy.max_ops` entries), which could only noop."""
    lengths = [s.path_len for t in trajectories for s in t.steps]
    actions = [s.tree_action for t in trajectories for s in t.steps]
    valid = np.asarray(tree.valid)
    depth = np.asarray(tree.depth)
    size = float(np.mean(valid.reshape(-1, valid.shape[-1]).sum(-1) - 1))
    out = {"turns": len(lengths),
           "path_share": float(np.mean([n > 0 for n in lengths])) if lengths else 0.0,
           "path_len": float(np.mean(lengths)) if lengths else 0.0,
           "act_insert": int(sum(a == 1 for a in actions)), "act_update": int(sum(a == 2 for a in actions)),
           "tree_size": size, "tree_depth": int(depth[valid].max()) if valid.any() else 0}
    if logs is not None:
        length, turn = np.asarray(logs.length), np.asarray(logs.turn)
        out["turns_log_full"] = int(sum(len(t.steps) - 1 - turn[i, -1] for i, t in enumerate(trajectories)
                                        if length[i] >= turn.shape[1]))
    out.update({k: int(v) for k, v in (counts or {}).items()})
    return out


def format_telemetry(t: dict) -> str:
    """One line; says so loudly when no turn retrieved a path."""
    line = (f"paths {t['path_share']:.2f} of {t['turns']} turns (mean len {t['path_len']:.2f}), "
            f"+{t.get('inserts', 0)} inserted, {t.get('updates', 0)} updated, "
            f"-{t.get('pruned', 0)} pruned, -{t.get('merged', 0)} merged; tree {t['tree_size']:.1f} nodes, "
            f"depth {t['tree_depth']}")
    if t.get("turns_log_full"):
        line += f"; {t['turns_log_full']} turns after an op log filled could not write (raise policy.max_ops)"
    if t["turns"] and t["path_share"] == 0.0:
        line += "  [NO TURN RETRIEVED A PATH: the memory is not read]"
    return line


__all__ = ["finish", "finish_episodes", "finish_groups", "format_telemetry", "telemetry"]
