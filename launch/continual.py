"""Continual learning (the ActiveMem paper's Table 6) as one launch: one controller trained
on a sequence of datasets, each stage starting from the previous stage's controller, and
the final controller of every stage evaluated on every stage's held-out data.

    python -m launch.continual --config configs/activemem_continual_cpu.py [--config.seed=1 ...]

The config is a run config (every section of `activemem_jax/schema.py`: the model, the
policy, the optimizer, the eval section's sizes...) plus `stages`, a tuple of dicts:

    {"name": "aqua", "data": {...data section overrides...}, "steps": 40, "sft_steps": 30,
     "eval": {...eval section overrides, e.g. the held-out file...}}   # sft_steps, eval optional

Stage k trains under `<out_dir>/stage_<k>_<name>` with `checkpoint.init_from` the previous
stage's directory at its final step (stage 0: from scratch, or from the config's own
checkpoint.init_from): the controller (and LoRA) carry over; the optimizer, step counter,
data order and memory tree start fresh in each stage (`Trainer._init_from` says why).
Before any stage trains, every stage's config is checked and every data file it names
must exist (a missing one stops the launch naming the stage and the path). A rerun
resumes: a stage whose final checkpoint exists is not retrained; one stopped midway
resumes its own checkpoints.

Evaluation, after the last stage: the held-out tasks of each stage's dataset are those
launch.train scores (`launch.held_out.held_out_set`: the eval section's file and sizes,
`evaluate.evaluate`'s greedy tree actions, near-greedy decoding); each stage's final
controller and tree are loaded from its checkpoint (`restore_policy`), and the untrained
controller (init seed `seed`) is scored on the same tasks. The metric is `em`: the mean
reward per question over the held-out tasks (the environment's score, in [0, 1]: the
right letter for aqua / gpqa, the right number for gsm8k, the share of tests passed for
the code families). With L stages and M[i][j] the score after stage i on dataset j:

    forgetting        = mean over j < L-1 of ( max_{j <= i < L-1} M[i][j] - M[L-1][j] )
                        how much of the best score a dataset ever had the final
                        controller lost (> 0: forgotten; None with one stage)
    forward transfer  = mean over j >= 1 of ( M[j-1][j] - U[j] )
                        how much training on the earlier datasets helped dataset j before
                        training on it, against the untrained controller's U[j] measured
                        in this launch (None with one stage)

Writes `<out_dir>/continual.json` (datasets, rows, matrix, untrained, metric, the two
figures and their definitions, tasks per dataset, the stages' directories) and
`<out_dir>/continual.md` (the matrix as a Markdown table).
"""

from __future__ import annotations

import json
import os
import time

from launch import stage_runs

METRIC = stage_runs.METRIC
DEFINITIONS = {
    "matrix": "matrix[i][j]: held-out em on dataset j of the controller after stage i",
    "forgetting": "mean over j < L-1 of (max over j <= i < L-1 of matrix[i][j]) - matrix[L-1][j]",
    "forward_transfer": "mean over j >= 1 of matrix[j-1][j] - untrained[j] (the untrained controller, this launch)",
    "baselines": "baselines[rule][j]: held-out em on dataset j of a rule that needs no learning, on the same tasks "
                 "(the family's baselines; None where it has none)",
}


def split_config(cfg) -> tuple:
    """(the run config without `stages`, the stages as a list of dicts), each stage's keys
    checked."""
    from activemem_jax.schema import ConfigError

    if "stages" not in cfg or not cfg.stages:
        raise ConfigError("stages: the continual config needs a tuple of stages ({'name', 'data', 'steps', ...})")
    base = cfg.copy_and_resolve_references()
    stages = stage_runs.checked_entries(base.stages, "stages", train=True)
    with base.unlocked():  # a config read by absl's flag is locked
        del base["stages"]
    return base, stages


def stage_dir(out_dir: str, k: int, stage: dict) -> str:
    return os.path.join(out_dir, f"stage_{k}_{stage['name']}")


def stage_configs(base, stages: list) -> list:
    """Each stage's run config: the base with the stage's data / eval overrides, steps and
    sft_steps, its own out_dir, and checkpoint.init_from the previous stage's directory at
    its final step. Every one is checked (`schema.load`) before anything trains."""
    stage_runs.one_seed(base, "continual")
    return [stage_runs.run_config(base, s, stage_dir(base.out_dir, k, s), f"stages[{k}] ({s['name']})",
                                  init_from=(stage_dir(base.out_dir, k - 1, stages[k - 1]), stages[k - 1]["steps"])
                                  if k else ())
            for k, s in enumerate(stages)]


def stage_labels(stages: list) -> list:
    return [f"stage {k} ({s['name']})" for k, s in enumerate(stages)]


def figures(matrix: list, untrained: list) -> dict:
    """Forgetting and forward transfer (module doc), and their terms per dataset."""
    n = len(matrix)
    if n < 2:
        return {"forgetting": None, "forward_transfer": None, "forgetting_by_dataset": [],
                "forward_transfer_by_dataset": []}
    lost = [max(matrix[i][j] for i in range(j, n - 1)) - matrix[n - 1][j] for j in range(n - 1)]
    gained = [matrix[j - 1][j] - untrained[j] for j in range(1, n)]
    return {"forgetting": sum(lost) / len(lost), "forward_transfer": sum(gained) / len(gained),
            "forgetting_by_dataset": lost, "forward_transfer_by_dataset": gained}


def markdown(summary: dict) -> str:
    """The matrix as a Markdown table, the figures below it."""
    names = summary["datasets"]
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    lines = [f"Held-out {summary['metric']} (rows: the controller after each stage; columns: the dataset)", "",
             "| controller | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|",
             "| untrained | " + " | ".join(fmt(v) for v in summary["untrained"]) + " |"]
    lines += stage_runs.rule_lines(summary, lambda label, vals: f"| {label} | " + " | ".join(fmt(v) for v in vals) + " |")
    lines += [f"| {row} | " + " | ".join(fmt(v) for v in vals) + " |"
              for row, vals in zip(summary["rows"], summary["matrix"])]
    lines += ["", f"Forgetting {fmt(summary['forgetting'])}: {DEFINITIONS['forgetting']}.",
              f"Forward transfer {fmt(summary['forward_transfer'])}: {DEFINITIONS['forward_transfer']}.",
              f"Tasks per dataset: {', '.join(f'{n} {t}' for n, t in zip(names, summary['tasks']))}."]
    return "\n".join(lines) + "\n"


def run_continual(cfg, *, model=None, engine=None, log=print) -> dict:
    """Train the stages in order (a finished stage is kept), evaluate the matrix, write
    continual.json and continual.md under cfg.out_dir; returns the summary. model / engine:
    ones already built (tests share them); else built from the config."""
    from activemem_jax import build

    base, stages = split_config(cfg)
    configs = stage_configs(base, stages)
    labels = stage_labels(stages)
    stage_runs.check_data(configs, labels)
    started = time.perf_counter()
    own_engine = engine is None
    model = model if model is not None else build.model(configs[0])
    engine = engine if engine is not None else build.engine(configs[0], model)
    names = [s["name"] for s in stages]
    rows = [f"after {k} {n}" for k, n in enumerate(names)]
    try:
        trained = [stage_runs.train_unless_saved(c, label, model, engine, log) for c, label in zip(configs, labels)]
        scores = stage_runs.score_matrix(configs, configs, names, rows, model, engine, log)
    finally:
        if own_engine:
            engine.close()
    summary = {"datasets": names, "families": [s["data"]["name"] for s in stages], "metric": METRIC,
               "rows": rows, **scores, **figures(scores["matrix"], scores["untrained"]), "definitions": DEFINITIONS,
               "stages": [{"name": s["name"], "dir": c.out_dir, "steps": c.train.steps,
                           "sft_steps": c.train.sft_steps, "init_from": c.checkpoint.init_from,
                           "trained_now": t} for s, c, t in zip(stages, configs, trained)],
               "wall_s": round(time.perf_counter() - started, 1)}
    os.makedirs(base.out_dir, exist_ok=True)
    with open(os.path.join(base.out_dir, "continual.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(base.out_dir, "continual.md"), "w") as f:
        f.write(markdown(summary))
    return summary


if __name__ == "__main__":
    stage_runs.cli(run_continual, markdown, "configs/activemem_continual_cpu.py", "continual.json and continual.md")
