"""Benchmark: does ActiveMem's memory decide the score? Recall on held-out names.

    python -m launch.bench_memory [--sft-steps 100 --grpo-steps 2 --eval-tasks 32 --set optim.lr_controller=1e-3]
    python -m launch.bench_memory --task dossier [--quick]   # the ablation table: launch/ablation/table.py
    python -m launch.bench_memory --task dossier --config configs/experiments/dossier_long.py  # maintenance acts
    python -m launch.bench_memory --task dossier --runs runs.json  # score runs trained elsewhere (one job each)
    python -m launch.bench_memory --task dossier --merge results/dossier_span/*.json  # one table of several
    # a run's entry {"run": DIR, "select": [620, 640]}: the checkpoint chosen on validation streams

For each variant (full ActiveMem, w/o HLMT, w/o latent injection, w/o tree action head =
the static threshold rule) one CPU training run on the embedded model from the same
seed (SFT warm start through the tree, then GRPO; configs/activemem_tiny_cpu.py), then
held-out accuracy on the recall task (envs/recall.py: facts shown one per turn, asked
later, no text channel across turns, 8 codes: chance 0.125), plus the untrained
controller. Prints a table with the tree telemetry and a learning curve per variant,
and writes bench_results/memory.json (with every step's token loss, path share and
rollout / update time). A benchmark, not a test: it takes tens of minutes.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # launch/, configs/

import argparse
import json
import shutil
import tempfile
import time

from activemem_jax.activemem.ablations import ABLATIONS  # noqa: E402 (after the path line)
from activemem_jax.config_files import parse_args  # noqa: E402

# the recall table's rows: the ablation table's own entries ("activemem" is "full"; on the
# recall config SFT already follows the threshold rule, so the tree-head row is unchanged)
VARIANTS = {"activemem": ABLATIONS["full"],
            **{k: ABLATIONS[k] for k in ("w/o HLMT", "w/o latent injection", "w/o tree action head")}}
# what each training step records in the JSON (the per-step learning curve and its cost)
STEP_KEYS = ("step", "algo", "token_loss", "reward_mean", "tree_path_share", "tree_size", "grad_latent",
             "grad_insert", "time_rollout", "time_update", "time_step")


def _config(overrides: dict, args, out_dir: str):
    from activemem_jax.config_files import apply_overrides
    from configs import activemem_tiny_cpu

    cfg = activemem_tiny_cpu.get_config()
    cfg.out_dir = out_dir
    cfg.log.tensorboard = False
    cfg.checkpoint.update(every=10_000, resume=False, async_save=False, overwrite=True)
    cfg.train.update(steps=args.sft_steps + args.grpo_steps, sft_steps=args.sft_steps)
    cfg.data.update(n_facts=args.n_facts, n_questions=args.n_facts + 2, max_turns=2 * args.n_facts + 2)
    apply_overrides(cfg, [*args.set, *overrides.items()])  # "--set a.b=False" -> False, "1e-3" -> 0.001
    return cfg


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", choices=("recall", "dossier"), default="recall",
                   help="recall: the table below; dossier: the ablation table (launch/ablation/table.py)")
    p.add_argument("--sft-steps", type=int, default=None, help="recall 100, dossier the config's (600)")
    p.add_argument("--grpo-steps", type=int, default=None, help="recall 2, dossier 20")
    p.add_argument("--config", default="configs/experiments/dossier_mix.py",
                   help="dossier: the base config file (the default: the recipe where GRPO beats SFT; "
                        "configs/experiments/dossier_long.py: 12-episode streams, where maintenance acts)")
    p.add_argument("--runs", default=None, metavar="MANIFEST.json",
                   help="dossier: train nothing; score the checkpoints a JSON manifest names, {variant: [{\"run\": "
                        "out_dir, \"step\": N, \"seed\": k}, ...]} (one launch.train job per variant and seed, "
                        "e.g. in parallel on a pod; \"evaluate\": true scores another variant's run with this "
                        "variant's evaluation switches; \"sft_run\": the run a GRPO run continued, for its curve; "
                        "\"select\": [N, ...] in place of \"step\": the checkpoint among these that scores "
                        "highest on --val-streams streams of the training names)")
    p.add_argument("--merge", nargs="+", default=None, metavar="SUMMARY.json",
                   help="dossier: train and score nothing; one table from summaries scored on the same held-out "
                        "streams (runs scored in different jobs or sessions, e.g. results/dossier_span/*.json), "
                        "written to --out")
    p.add_argument("--val-streams", type=int, default=8,
                   help="dossier --runs: validation streams (training names) that choose a \"select\" checkpoint")
    p.add_argument("--val-seed", type=int, default=99,
                   help="dossier --runs: the validation streams' data seed over the config's (99: the one "
                        "published span table was chosen with)")
    p.add_argument("--seeds", type=int, default=3, help="dossier: training seeds of the main variants")
    p.add_argument("--other-seeds", type=int, default=3, help="dossier: seeds of the other variants")
    p.add_argument("--three-seed-variants", default="full,SFT only,w/o tree action head,flat tree",
                   help="dossier: the variants that get --seeds (the others get --other-seeds)")
    p.add_argument("--eval-streams", type=int, default=8, help="dossier: held-out streams")
    p.add_argument("--quick", action="store_true",
                   help="dossier: one run of full (150 SFT + 4 GRPO steps), SFT only from its SFT checkpoint and "
                        "the evaluation ablations scored on its last checkpoint (not trained), 4 held-out streams")
    p.add_argument("--n-facts", type=int, default=4)
    p.add_argument("--eval-tasks", type=int, default=32)
    p.add_argument("--curve-every", type=int, default=25, help="evaluate on 8 tasks every N steps")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config field of configs/activemem_tiny_cpu.py (repeatable)")
    p.add_argument("--out", default="bench_results/memory.json")
    args = parse_args(p)  # --config.a.b=v as well as --set a.b=v
    if args.task == "dossier":
        return _dossier(args)
    args.sft_steps = 100 if args.sft_steps is None else args.sft_steps
    args.grpo_steps = 2 if args.grpo_steps is None else args.grpo_steps

    import jax

    from activemem_jax import build
    from activemem_jax.activemem import evaluate as ev
    from launch import eval_report as report
    from activemem_jax.tasks import build_section
    from activemem_jax.rl.trainer import Trainer
    from launch.ablation.table import train_with_curve

    t_start = time.perf_counter()
    base = _config({}, args, "")
    model = build.model(base, dtype="float32")  # the published table's precision on any CPU
    held = base.data.copy_and_resolve_references()  # the recall family's test split (activemem_jax/tasks/)
    held.update(split="test", n_tasks=args.eval_tasks, seed=1)
    test = build_section(held, where="data").tasks
    curve_tasks = test[:8]
    rows, curves, steps, times = {}, {}, {}, {}
    with build.engine(base, model) as engine:  # the config's 16 slots x 256 tokens
        untrained = build.policy(base, model, engine)
        rows["untrained controller"] = ev.evaluate_recall(untrained, test)
        for name in args.variants.split(","):
            out = tempfile.mkdtemp(prefix="bench_memory_")
            cfg = _config(VARIANTS[name], args, out)
            t0 = time.perf_counter()
            trainer = Trainer(cfg, model=model, engine=engine)
            try:
                curve, history = train_with_curve(
                    trainer, cfg.train.steps, args.curve_every, name,
                    lambda policy: ev.evaluate_recall(policy, curve_tasks, seed=1), keys=STEP_KEYS)
                rows[name] = ev.evaluate_recall(trainer.policy, test)
            finally:
                trainer.close()
                shutil.rmtree(out, ignore_errors=True)
            curves[name], steps[name], times[name] = curve, history, time.perf_counter() - t0
            jax.clear_caches()
    print(report.format_recall_table(rows))
    full, no_tree = rows.get("activemem"), rows.get("w/o HLMT")
    summary = {"rows": rows, "curves": curves, "steps": steps, "train_time_s": times, "total_time_s": time.perf_counter() - t_start,
               "args": vars(args)}
    if full and no_tree:
        summary["full_minus_no_hlmt"] = full["accuracy"] - no_tree["accuracy"]
        summary["no_hlmt_minus_chance"] = no_tree["accuracy"] - no_tree["chance"]
        print(f"full ActiveMem {full['accuracy']:.3f} (target >= 0.8); full - w/o HLMT "
              f"{summary['full_minus_no_hlmt']:+.3f} (target >= 0.3); w/o HLMT - chance "
              f"{summary['no_hlmt_minus_chance']:+.3f} (target within 0.1)")
    print(f"total {summary['total_time_s']:.0f} s")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1, default=float)


def _read_summary(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"--merge {path}: cannot read it as JSON ({e})")


def _dossier(args):
    from activemem_jax.activemem.ablations import ABLATIONS
    from launch.ablation import table as ablation_table

    from activemem_jax.config_files import config_errors, load_config

    with config_errors():
        base = load_config(args.config)
    t = base.train  # the config's own phases by default; --quick: one run of "full" (150 SFT
    # steps, the rate falling over them, then 4 GRPO steps), "SFT only" from its SFT
    # checkpoint and the evaluation ablations on its last one, 4 held-out streams
    # (ablation_table.run_quick)
    quick = dict(sft_steps=150, grpo_steps=4, eval_streams=4) if args.quick else {}
    args.sft_steps = quick.get("sft_steps", t.sft_steps) if args.sft_steps is None else args.sft_steps
    args.grpo_steps = quick.get("grpo_steps", t.steps - t.sft_steps) if args.grpo_steps is None else args.grpo_steps
    if args.variants == ",".join(VARIANTS):
        args.variants = ",".join(ABLATIONS)
    if args.curve_every == 25:
        args.curve_every = args.sft_steps if args.quick else 50
    if args.quick:
        args.seeds = args.other_seeds = 1
        args.eval_streams = quick["eval_streams"] if args.eval_streams == 8 else args.eval_streams
    if args.out == "bench_results/memory.json":
        args.out = "bench_results/memory_table_quick.json" if args.quick else "bench_results/memory_table.json"
    if args.merge:
        summary = ablation_table.merge_summaries([_read_summary(path) for path in args.merge], args.merge)
    elif args.runs:
        summary = ablation_table.score_runs(ablation_table.read_manifest(args.runs), base, args)
    else:
        summary = (ablation_table.run_quick if args.quick else ablation_table.run_table)(args, base)
    print(ablation_table.format_table(summary))
    print(f"total {summary['total_time_s']:.0f} s")
    ablation_table.write(summary, args.out)


if __name__ == "__main__":
    main()
