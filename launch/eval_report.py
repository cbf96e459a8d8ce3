"""What the evaluations print and plot: markdown tables of `activemem.evaluate`'s results
and the LEARNED line of its verdict. The library returns data; the launchers format it.

    print(format_recall_table(rows)); print(verdict_line(ev.recall_verdict(rows, NO_TRAINING)))
"""

from __future__ import annotations

from typing import Optional


def format_table(summary: dict) -> str:
    lines = ["| variant | N | tasks | EM | F1 | peak tokens | task statement | peak beyond the task "
             "| dependency | time/traj s (no compile) | compile s | turns | format failures |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for v, by_n in summary.items():
        for n, s in by_n.items():
            lines.append(f"| {v} | {n} | {s['tasks']} | {s['em']:.3f} | {s['f1']:.3f} | "
                         f"{s['peak_tokens']:.0f} | {s['task_tokens']:.0f} | {s['peak_beyond_task']:.0f} | "
                         f"{s['dependency_length']:.3g} | {s['time_s']:.1f} | "
                         f"{s['compile_s']:.1f} | {s['turns']:.1f} | "
                         + (f"{s['format_failure']:.2f} |" if "format_failure" in s else "- |"))
    return "\n".join(lines)


def plot_peak_tokens(summary: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (v, by_n) in enumerate(summary.items()):
        ns = sorted(by_n)
        line, = ax.plot(ns, [by_n[n]["peak_tokens"] for n in ns], marker="o", label=f"{v}: peak")
        ax.plot(ns, [by_n[n]["peak_beyond_task"] for n in ns], marker="x", linestyle="--",
                color=line.get_color(), label=f"{v}: peak beyond the task statement")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("objectives per task (N)")
    ax.set_ylabel("peak tokens (mean over tasks)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def format_episode_table(rows: dict) -> str:
    """rows: {name: evaluate_streams(...)} -> a markdown table of accuracy and mean nodes
    per tree after each episode, one column per row."""
    names = list(rows)
    lines = ["| episode | " + " | ".join(f"{n}: accuracy / nodes" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for i in range(max(len(r.get("per_episode", ())) for r in rows.values())):
        cells = []
        for n in names:
            e = rows[n]["per_episode"][i]
            cells.append(f"{e['accuracy']:.3f} / {e['nodes']:.1f}")
        lines.append(f"| {i} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_recall_table(rows: dict, baselines: Optional[dict] = None) -> str:
    """rows: {name: evaluate_recall(...)} -> a markdown table; then the rules that need no
    training on the same tasks (`baselines`, else the first row's)."""
    lines = ["| variant | accuracy | answers not a code | turns with a path | mean path length | inserts | "
             "updates | nodes per tree |", "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['accuracy']:.3f} | {r.get('format_failure', 0.0):.2f} | "
                     f"{r['path_share']:.2f} | {r['path_len']:.2f} | {r.get('inserts', 0)} | "
                     f"{r.get('updates', 0)} | {r['tree_size']:.1f} |")
    baselines = baselines or next((r["baselines"] for r in rows.values() if "baselines" in r), None)
    if baselines:
        lines.append(format_recall_baselines(baselines))
    return "\n".join(lines)


def format_stream_table(rows: dict) -> str:
    """rows: {name: evaluate_streams(...)} -> a markdown table (accuracy, accuracy on the
    questions asked after a correction, the share of questions that found a path, format
    failures, the commits' telemetry, the final tree's depth histogram, the tree head's
    action mix on decoys and corrections), then the rules that need no training on the
    same tasks."""
    lines = ["| variant | accuracy | after a correction | questions with a path | answers not a code | inserts | "
             "updates | pruned | merged | nodes by depth | decoys: noop / insert / update | "
             "corrections: noop / insert / update |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def mix(r, kind):
        a = r["actions"].get(kind)
        return " / ".join(f"{a[k]:.2f}" for k in ("noop", "insert", "update")) if a else "-"

    for name, r in rows.items():
        depth = ", ".join(f"{d}: {n}" for d, n in sorted(r["depth_histogram"].items())) or "-"
        q = r.get("questions", {})
        corrected = f"{q['after a correction']['accuracy']:.3f}" if "after a correction" in q else "-"
        path = f"{q['all']['path']:.2f}" if "all" in q else "-"
        lines.append(f"| {name} | {r['accuracy']:.3f} | {corrected} | {path} | {r['format_failure']:.2f} | "
                     f"{r.get('inserts', 0)} | "
                     f"{r.get('updates', 0)} | {r.get('pruned', 0)} | {r.get('merged', 0)} | {depth} | "
                     f"{mix(r, 'decoy')} | {mix(r, 'correction')} |")
    b = next((r["baselines"] for r in rows.values()), None)
    if b:
        ks = sorted(int(k.split("_")[1]) for k in b if k.startswith("memory_"))
        memory = ", ".join(f"{k}: {b[f'memory_{k}']:.3f}" for k in ks)
        lines.append(f"baselines on the same tasks (no training): chance in the code set {b['chance']:.3f}, best "
                     f"constant code ({b['best_constant_code']}) {b['best_constant']:.3f}, last code shown "
                     f"{b['last_code']:.3f}, store everything (the threshold rule, perfect retrieval) "
                     f"{b['store_all']:.3f}, ignore corrections {b['no_corrections']:.3f}, memory emptied each "
                     f"episode {b['episode_only']:.3f}; a perfect memory of the k newest attributes, k = {memory}; "
                     f"ceiling {b['ceiling']:.3f}")
    return "\n".join(lines)


def format_recall_baselines(b: dict) -> str:
    """One line: the no-training rules and the perfect k-fact memories on the same tasks."""
    ks = sorted(int(k.split("_")[1]) for k in b if k.startswith("memory_"))
    memory = ", ".join(f"{k}: {b[f'memory_{k}']:.3f}" for k in ks)
    return (f"baselines on the same tasks (no training): chance in the code set {b['chance']:.3f}, best constant "
            f"code ({b['best_constant_code']}) {b['best_constant']:.3f}, last fact shown {b['last_fact']:.3f}; "
            f"a perfect memory of the last k facts, k = {memory}; ceiling {b['ceiling']:.3f}")


def rules_line(rules: dict) -> str:
    """The rules that need no learning as one line: "chance 0.200, majority 0.250, ..."
    (scores to 3 places, other values, e.g. the majority letter, as they are)."""
    return ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in rules.items())


def verdict_line(summary: dict) -> str:
    """The line that states `recall_verdict`'s summary: the means, the margin over the best
    untrained comparison and, with two seeds or more, the interval and the verdict."""
    line = (f"held-out recall accuracy: before {summary['before']:.3f}, after {summary['after']:.3f} "
            f"(mean of {summary['seeds']} seed(s)); best untrained ({summary['best_untrained_rule']}) "
            f"{summary['best_untrained']:.3f}, margin {summary['margin']:+.3f}")
    m = summary.get("interval")
    if not m:
        return f"{line}; one seed: no spread (train.seeds lists the seeds to train)"
    k, memories = summary["beats_memory"], summary["memories"]
    memory = (f"beats memory_{k} (a perfect memory of the last {k}) by its interval, "
              + (f"not memory_{memories[memories.index(k) + 1]}" if k != memories[-1] else "the largest")
              if k else "beats no perfect memory_k by its interval")
    return (f"{line}; vs {m['against']} ({m['margin']:+.3f}) the 95% interval over {m['seeds']} seeds and "
            f"{m['units']} test units is [{m['lo']:+.3f}, {m['hi']:+.3f}]: "
            f"{'LEARNED' if summary['learned'] else 'NOT LEARNED'}; {memory}")


__all__ = ["format_episode_table", "format_recall_baselines", "format_recall_table", "format_stream_table",
           "format_table", "plot_peak_tokens", "verdict_line"]
