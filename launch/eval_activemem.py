"""Evaluate ActiveMem (untrained or from a checkpoint) against the frozen model's
full-history and truncated-context variants, on any task registered in
`activemem_jax/tasks/` (data.name, default synthetic N-objective QA, with its data
paths in the data section, as a training config names them: multi_objective_qa,
single_qa, gsm8k, math, ...).

    python -m launch.eval_activemem --config configs/activemem_eval_synthetic.py
    python -m launch.eval_activemem --config configs/activemem_eval_qa.py \
        --config.data.qa_files="('data/hotpotqa/dev.jsonl',)" --config.data.index=indexes/wiki18

Writes under config.out_dir: trajectories.jsonl (one row per trajectory), summary.json (its
"baselines": the family's rules that need no learning on the same tasks, where it has any),
summary.md (the table printed at the end) and peak_tokens_vs_n.png.
"""

from __future__ import annotations

import json
import os

from absl import app
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", "configs/activemem_eval_synthetic.py",
                                          "evaluation config file")


def run(cfg) -> dict:
    from rich.console import Console

    from activemem_jax import build
    from activemem_jax.activemem import evaluate as ev
    from activemem_jax.activemem.text_memory import TextMemoryConfig
    from launch import eval_report as report
    from activemem_jax.tasks import build_section, require_env

    console = Console(stderr=True)
    base = build.policy_config(cfg)
    b = cfg.data
    model = build.model(cfg)
    if "name" not in b:  # a data section without a name is the synthetic world
        b = b.copy_and_resolve_references()
        with b.unlocked():
            b.name = "synthetic"
    ts = require_env(build_section(b, model), b.name)
    tasks, retriever, make_env = ts.by_group(), ts.search, ts.make_env  # tasks by N
    restore = None
    if cfg.checkpoint:
        from activemem_jax.rl.checkpoints import restore_policy

        restore = lambda policy: restore_policy(cfg.checkpoint, policy)  # noqa: E731
    os.makedirs(cfg.out_dir, exist_ok=True)
    out = open(os.path.join(cfg.out_dir, "trajectories.jsonl"), "w")

    def on_batch(variant, n, rows):
        for r in rows:
            out.write(json.dumps(r, ensure_ascii=False) + "\n")
        out.flush()
        em = sum(r["em"] for r in rows) / len(rows)
        peak = sum(r["peak_tokens"] for r in rows) / len(rows)
        console.log(f"{variant} N={n}: EM {em:.3f}, peak tokens {peak:.0f}")

    t = cfg.eval  # the same turn budget fields as a training config's eval section
    with build.engine(cfg, model) as engine:
        rows = ev.evaluate(model, engine, retriever, base, list(cfg.variants), tasks,
                           lambda n: min(t.max_turns_cap, t.turns_per_objective * n + t.extra_turns), seed=cfg.seed,
                           temperature=cfg.temperature, restore=restore, on_batch=on_batch, make_env=make_env,
                           text_memory=TextMemoryConfig.from_eval(t))
    out.close()
    summary = ev.summarize(rows)
    written = {v: {str(n): s for n, s in by_n.items()} for v, by_n in summary.items()}
    if ts.baselines is not None:  # the rules that need no learning, on the same tasks
        written["baselines"] = {k: v for k, v in ts.baselines(ts.tasks).items() if k != "units"}
        print("baselines on the same tasks: " + report.rules_line(written["baselines"]))
    with open(os.path.join(cfg.out_dir, "summary.json"), "w") as f:
        json.dump(written, f, indent=1)
    table = report.format_table(summary)
    with open(os.path.join(cfg.out_dir, "summary.md"), "w") as f:
        f.write(table + "\n")
    report.plot_peak_tokens(summary, os.path.join(cfg.out_dir, "peak_tokens_vs_n.png"))
    print(table)
    print(f"wrote {cfg.out_dir}")
    return summary


def main(argv):
    del argv
    from activemem_jax import schema
    from activemem_jax.config_files import config_errors, flag_value
    from activemem_jax.tooling import compile_cache

    cfg = flag_value(_CONFIG)
    with config_errors():
        schema.load_eval(cfg)  # every field checked once, before anything is loaded
    compile_cache.enable()  # $ACTIVEMEM_COMPILE_CACHE: a directory, or off
    run(cfg)


if __name__ == "__main__":
    from activemem_jax.config_files import parse_flags

    app.run(main, flags_parser=parse_flags)
