"""The generalization matrix (the ActiveMem paper's Figures 2 and 5) as one launch: a
controller trained on one dataset, evaluated on structurally different ones.

    python -m launch.generalize --config configs/activemem_generalize_cpu.py [--config.seed=1 ...]

The config is a run config (every section of `activemem_jax/schema.py`) plus

    sources = ({"name": "gsm8k", "data": {...data section overrides...}, "steps": 8,
                "sft_steps": 6, "eval": {...eval section overrides...}}, ...)  # sft_steps, eval optional
    targets = ({"name": "gpqa", "data": {"name": "gpqa", ...}, "eval": {"path": ...}}, ...)  # optional

Source i trains under `<out_dir>/train_<name>`, from scratch (or from the config's own
checkpoint.init_from, as every source); targets (default: the sources themselves, their
data and eval overrides) are the held-out sets it is scored on. Before anything trains,
every source's and target's config is checked and every data file it names must exist (a
missing one stops the launch naming the source or target and the path). A rerun resumes:
a source whose final checkpoint exists is not retrained (launch/stage_runs.py, the pieces
launch.continual uses too).

Evaluation: each source's final controller and tree, and the untrained controller (init
seed `seed`), on every target's held-out tasks (`launch.held_out`: the target's eval
section, greedy tree actions); the metric is `em`, the mean reward per question (in
[0, 1]). M[i][j] is source i's controller on target j, U[j] the untrained one's, and the
gain M[i][j] - U[j] what training on source i did for target j.

Writes `<out_dir>/generalize.json` (sources, targets, metric, matrix, untrained, gain,
tasks per target, the sources' runs), `<out_dir>/generalize.md` (the matrix with the
untrained row, and the gains, as Markdown tables) and `<out_dir>/generalize.png` (a
heatmap of the gains: source rows, target columns, each cell annotated).
"""

from __future__ import annotations

import json
import os
import time

from launch import stage_runs

METRIC = stage_runs.METRIC
DEFINITIONS = {
    "matrix": "matrix[i][j]: held-out em on target j of the controller trained on source i",
    "untrained": "untrained[j]: held-out em on target j of the untrained controller (init seed `seed`)",
    "gain": "gain[i][j] = matrix[i][j] - untrained[j]",
    "baselines": "baselines[rule][j]: held-out em on target j of a rule that needs no learning, on the same tasks "
                 "(the family's baselines; None where it has none)",
}


def split_config(cfg) -> tuple:
    """(the run config without `sources` / `targets`, the sources, the targets) as lists of
    checked dicts; no targets: the sources' name, data and eval."""
    from activemem_jax.schema import ConfigError

    if "sources" not in cfg or not cfg.sources:
        raise ConfigError("sources: the generalization config needs a tuple of sources ({'name', 'data', 'steps', "
                          "...})")
    base = cfg.copy_and_resolve_references()
    sources = stage_runs.checked_entries(base.sources, "sources", train=True)
    given = base.get("targets") or ()
    targets = (stage_runs.checked_entries(given, "targets", train=False) if given else
               [{k: s[k] for k in ("name", "data", "eval") if k in s} for s in sources])
    with base.unlocked():  # a config read by absl's flag is locked
        del base["sources"]
        if "targets" in base:
            del base["targets"]
    return base, sources, targets


def run_configs(base, sources: list, targets: list) -> tuple:
    """(the sources' run configs, each in <out_dir>/train_<name>; the targets' configs),
    every one checked (`schema.load`) before anything trains."""
    stage_runs.one_seed(base, "generalization")
    trained = [stage_runs.run_config(base, s, os.path.join(base.out_dir, f"train_{s['name']}"),
                                     f"sources[{i}] ({s['name']})") for i, s in enumerate(sources)]
    scored = [stage_runs.run_config(base, t, base.out_dir, f"targets[{j}] ({t['name']})")
              for j, t in enumerate(targets)]
    return trained, scored


def gains(matrix: list, untrained: list) -> list:
    return [[m - u for m, u in zip(row, untrained)] for row in matrix]


def markdown(summary: dict) -> str:
    """The matrix with the untrained row, then the gains, as Markdown tables."""
    names = summary["targets"]
    head = ["| controller | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    row = lambda label, vals, f: f"| {label} | " + " | ".join(f(v) for v in vals) + " |"  # noqa: E731
    em, gain = (lambda v: f"{v:.3f}"), (lambda v: f"{v:+.3f}")
    lines = [f"Held-out {summary['metric']} (rows: the controller, trained on one source; columns: the target)", "",
             *head, row("untrained", summary["untrained"], em)]
    lines += stage_runs.rule_lines(summary, lambda label, vals: row(label, vals, lambda v: "-" if v is None else em(v)))
    lines += [row(f"trained on {s}", vals, em) for s, vals in zip(summary["sources"], summary["matrix"])]
    lines += ["", f"Gain over the untrained controller ({DEFINITIONS['gain']})", "", *head]
    lines += [row(f"trained on {s}", vals, gain) for s, vals in zip(summary["sources"], summary["gain"])]
    lines += ["", f"Tasks per target: {', '.join(f'{n} {t}' for n, t in zip(names, summary['tasks']))}."]
    return "\n".join(lines) + "\n"


def plot_gain(summary: dict, path: str) -> None:
    """A heatmap of the gains (source rows, target columns), each cell annotated with its
    gain and the trained controller's em; the colour scale is symmetric about 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gain, sources, targets = summary["gain"], summary["sources"], summary["targets"]
    limit = max([abs(v) for r in gain for v in r] + [0.05])
    fig, ax = plt.subplots(figsize=(1.6 * len(targets) + 2.5, 0.9 * len(sources) + 1.8))
    image = ax.imshow(gain, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    ax.set_xticks(range(len(targets)), targets)
    ax.set_yticks(range(len(sources)), [f"trained on {s}" for s in sources])
    ax.set_xlabel("target (held-out)")
    for i, row in enumerate(gain):
        for j, v in enumerate(row):
            ax.text(j, i, f"{v:+.3f}\n({summary['matrix'][i][j]:.3f})", ha="center", va="center", fontsize=9,
                    color="white" if abs(v) > 0.6 * limit else "black")
    fig.colorbar(image, ax=ax, label=f"{summary['metric']} gain over the untrained controller")
    ax.set_title(f"Held-out {summary['metric']} gain (trained {summary['metric']} in brackets)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_generalize(cfg, *, model=None, engine=None, log=print) -> dict:
    """Train each source (a finished one is kept), score the matrix, write generalize.json,
    .md and .png under cfg.out_dir; returns the summary. model / engine: ones already built
    (tests share them); else built from the config."""
    from activemem_jax import build

    base, sources, targets = split_config(cfg)
    trained, scored = run_configs(base, sources, targets)
    stage_runs.check_data(trained + scored, [f"source {s['name']}" for s in sources]
                          + [f"target {t['name']}" for t in targets])
    started = time.perf_counter()
    own_engine = engine is None
    model = model if model is not None else build.model(trained[0])
    engine = engine if engine is not None else build.engine(trained[0], model)
    names = [t["name"] for t in targets]
    try:
        now = [stage_runs.train_unless_saved(c, f"source {s['name']}", model, engine, log)
               for c, s in zip(trained, sources)]
        scores = stage_runs.score_matrix(trained, scored, names, [f"trained on {s['name']}" for s in sources],
                                         model, engine, log)
    finally:
        if own_engine:
            engine.close()
    summary = {"sources": [s["name"] for s in sources], "targets": names,
               "target_families": [t["data"]["name"] for t in targets], "metric": METRIC, **scores,
               "gain": gains(scores["matrix"], scores["untrained"]), "definitions": DEFINITIONS,
               "runs": [{"name": s["name"], "family": s["data"]["name"], "dir": c.out_dir, "steps": c.train.steps,
                         "sft_steps": c.train.sft_steps, "init_from": c.checkpoint.init_from, "trained_now": t}
                        for s, c, t in zip(sources, trained, now)],
               "wall_s": round(time.perf_counter() - started, 1)}
    os.makedirs(base.out_dir, exist_ok=True)
    with open(os.path.join(base.out_dir, "generalize.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(base.out_dir, "generalize.md"), "w") as f:
        f.write(markdown(summary))
    plot_gain(summary, os.path.join(base.out_dir, "generalize.png"))
    return summary


if __name__ == "__main__":
    stage_runs.cli(run_generalize, markdown, "configs/activemem_generalize_cpu.py", "generalize.json, generalize.md and generalize.png")
