"""`describe(tree)`: what a researcher wants to know about a memory tree, on the host."""

from __future__ import annotations

import numpy as np

QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)


def describe(tree) -> dict:
    """Counts, depth histogram, branching factor and utility quantiles of one tree."""
    valid = np.asarray(tree.valid)
    if valid.ndim != 1:
        raise ValueError("describe takes one tree; index a batch first (jax.tree.map(lambda x: x[i], t))")
    nodes = valid.copy()
    nodes[0] = False
    depth = np.asarray(tree.depth)[nodes]
    fanout = (np.asarray(tree.children) >= 0).sum(-1)[valid]
    internal = fanout[fanout > 0]
    util = np.asarray(tree.utility_ema)[nodes]
    visits = np.asarray(tree.visits)[nodes]
    return {
        "capacity": int(valid.shape[0]),
        "nodes": int(nodes.sum()),
        "free_slots": int((~valid).sum()),
        "max_depth": int(tree.max_depth),
        "depth_histogram": {int(d): int(c) for d, c in zip(*np.unique(depth, return_counts=True))},
        "leaves": int(((np.asarray(tree.children) >= 0).sum(-1) == 0)[nodes].sum()),
        "branching_mean": float(internal.mean()) if internal.size else 0.0,
        "branching_max": int(fanout.max()) if fanout.size else 0,
        "root_children": int(fanout[0]) if fanout.size else 0,
        "utility_quantiles": ({f"p{int(q * 100)}": float(np.quantile(util, q)) for q in QUANTILES}
                              if util.size else {}),
        "visits_total": int(visits.sum()),
        "never_visited": int((visits == 0).sum()),
    }


def format_description(info: dict) -> str:
    lines = [f"HLMT: {info['nodes']} nodes / capacity {info['capacity']} "
             f"({info['free_slots']} free), max_depth {info['max_depth']}",
             f"  depth histogram: {info['depth_histogram']}",
             f"  branching: mean {info['branching_mean']:.2f}, max {info['branching_max']}, "
             f"root {info['root_children']}; leaves {info['leaves']}",
             f"  visits: {info['visits_total']} total, {info['never_visited']} nodes never visited"]
    if info["utility_quantiles"]:
        q = ", ".join(f"{k} {v:.3f}" for k, v in info["utility_quantiles"].items())
        lines.append(f"  utility: {q}")
    return "\n".join(lines)
