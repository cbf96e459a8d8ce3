"""Train ActiveMem's controller (GRPO or SFT) from a config; evaluate before vs after.

    python -m launch.train --config configs/activemem_tiny_cpu.py [--config.train.steps=8 ...]

Multi-host: with config.distributed.num_processes > 1 (or on a TPU pod / SLURM, where JAX
finds the cluster itself when coordinator_address is empty and num_processes is -1)
`jax.distributed.initialize` runs first. Writes under config.out_dir: metrics.jsonl,
tensorboard/, checkpoints/ (orbax, resumed automatically), summary.json.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time

from absl import app
from absl import logging as absl_logging
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", "configs/activemem_tiny_cpu.py", "training config file")


def init_distributed(cfg) -> None:
    import jax

    d = cfg.distributed
    if d.num_processes == 1 and not d.coordinator_address:
        return
    kwargs = {}
    if d.coordinator_address:
        kwargs.update(coordinator_address=d.coordinator_address, num_processes=d.num_processes,
                      process_id=d.process_id)
    jax.distributed.initialize(**kwargs)


def held_out(trainer):
    """The registered task's held-out TaskSet (`launch.held_out.held_out_set`)."""
    from launch.held_out import held_out_set

    return held_out_set(trainer.run, trainer.model)


def evaluate_before_after(trainer) -> tuple:
    """(the before / after table by N, the held-out TaskSet it ran on)."""
    from activemem_jax.activemem import evaluate as ev
    from launch.held_out import evaluate_held_out

    ts = held_out(trainer)
    rows = []
    for name, restore in (("before", None), ("after", lambda p: _load_trained(p, trainer))):
        if trainer.params["lora"]:  # before: the backbone's own weights; after: the trained adapters merged in
            if name == "before":
                trainer.engine.set_weights(trainer.model.state)
            else:
                trainer._sync_policy()
        for r in evaluate_held_out(trainer.model, trainer.engine, ts, trainer.run, trainer.policy.config, restore):
            rows.append({**r, "variant": name})
    trainer._sync_policy()
    return ev.summarize(rows), ts


def _load_trained(policy, trainer):
    policy.params = trainer.params["controller"]
    policy.memory_state = trainer.policy.memory_state


def evaluate_recall_before_after(trainers, cfg) -> dict:
    """Held-out recall (test names, the same tasks for every seed) of each trained
    controller and of the untrained one at the same init seed, with the tree telemetry
    and the rules that need no training on those tasks. LEARNED needs the trained seeds'
    margin over each seed's untrained controller and over every no-training rule to have a
    95% interval above zero, the interval covering the seeds and the test tasks
    (`evaluate.recall_verdict`). With one seed there is no seed spread and no claim."""
    from activemem_jax import build
    from activemem_jax.activemem import evaluate as ev
    from launch import eval_report as report
    from activemem_jax.tasks import recall_codes

    codes = recall_codes(cfg.data)
    if cfg.data.name == "dossier":  # held-out streams, every episode in order (evaluate_streams)
        from activemem_jax.envs.dossier import NO_TRAINING, check_sizes, make_dossier_tasks

        sizes = check_sizes(cfg.data.dossier.to_dict())
        sizes["streams"] = max(1, cfg.eval.n_tasks // sizes["episodes"])
        tasks = make_dossier_tasks("test", seed=cfg.data.seed + 1, codes=codes, **sizes)
        evaluate, table = ev.evaluate_streams, report.format_stream_table
    else:
        from activemem_jax.envs.recall import NO_TRAINING, make_recall_tasks

        tasks = make_recall_tasks("test", cfg.eval.n_tasks, cfg.data.n_facts, seed=cfg.data.seed + 1,
                                  n_questions=cfg.data.n_questions, codes=codes)
        evaluate, table = ev.evaluate_recall, report.format_recall_table
    base = build.policy_config(cfg)
    rows = {}
    for trainer in trainers:
        seed = trainer.run.seed
        before = build.policy(cfg, trainer.gen_model, trainer.engine, seed=seed, config=base)
        rows[f"before (seed {seed})"] = evaluate(before, tasks, seed=cfg.seed, codes=codes)
    for trainer in trainers:
        after = build.policy(cfg, trainer.gen_model, trainer.engine, seed=trainer.run.seed, config=base)
        _load_trained(after, trainer)
        rows[f"after (seed {trainer.run.seed})"] = evaluate(after, tasks, seed=cfg.seed, codes=codes)
    summary = ev.recall_verdict(rows, NO_TRAINING)
    print(table(rows))
    print(report.verdict_line(summary))
    return summary


def seed_configs(cfg) -> list:
    """One config per training seed (cfg.train.seeds, else cfg.seed alone): seed k trains
    from init seed k on training tasks drawn with data seed data.seed + 2 (k - first seed)
    (another order and other tasks), under out_dir/seed_k when there are several."""
    from activemem_jax import schema

    seeds = tuple(schema.part(cfg, "train").seeds or (schema.part(cfg, "seed"),))
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"train.seeds={seeds}: seeds must be distinct")
    if len(seeds) == 1:
        c = cfg.copy_and_resolve_references()
        c.seed = seeds[0]
        return [c]
    out = []
    for s in seeds:
        c = cfg.copy_and_resolve_references()
        c.seed = s
        c.data.seed = cfg.data.seed + 2 * (s - seeds[0])
        c.out_dir = os.path.join(cfg.out_dir, f"seed_{s}")
        out.append(c)
    return out


def main(argv):
    del argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    absl_logging.set_verbosity(absl_logging.INFO)  # step lines are INFO; warnings stay warnings
    for noisy in ("absl", "orbax", "jax", "etils"):  # orbax logs every file it writes at INFO
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("activemem_jax").setLevel(logging.INFO)
    from activemem_jax.config_files import config_errors, flag_value

    cfg = flag_value(_CONFIG)
    from activemem_jax import schema

    with config_errors():
        schema.load(cfg)  # every field checked once, before anything is loaded
    from activemem_jax.tooling import compile_cache

    compile_cache.enable()  # $ACTIVEMEM_COMPILE_CACHE: a directory, or off
    init_distributed(cfg)
    import jax

    from launch import eval_report as report
    from activemem_jax.rl import preemption
    from activemem_jax.rl.trainer import Trainer

    preemption.install()  # SIGTERM / SIGINT: finish the step, save it, exit EXIT_PREEMPTED (75)
    with config_errors():
        configs = seed_configs(cfg)
    from launch.bench_report import provenance

    source = provenance(cfg)
    trainers, summary, started = [], {}, time.perf_counter()
    model = engine = None
    preempted = None
    try:
        for c in configs:  # the seeds share the backbone and the engine
            with config_errors():  # a field the trainer cannot use: one line naming it
                trainer = Trainer(c, model=model, engine=engine)
            if model is None:
                model, engine, owner = trainer.model, trainer.engine, trainer
            trainers.append(trainer)
            history = trainer.train()
            summary.setdefault("runs", []).append({"seed": c.seed, "steps": trainer.step,
                                                   "final": history[-1] if history else None,
                                                   "checkpoints": trainer.ckpt.directory})
        summary.update(steps=trainers[0].step, final=summary["runs"][0]["final"],
                       checkpoints=trainers[0].ckpt.directory)
        if cfg.eval.enabled and jax.process_count() > 1:
            print("before/after evaluation skipped: run launch.eval_activemem on one host with "
                  f"--config.checkpoint={trainers[0].ckpt.directory}")
        elif cfg.eval.enabled and cfg.data.name in ("recall", "dossier"):
            summary["eval"] = evaluate_recall_before_after(trainers, cfg)
        elif cfg.eval.enabled:
            table, ts = evaluate_before_after(trainers[0])
            summary["eval"] = {v: {str(n): s for n, s in by_n.items()} for v, by_n in table.items()}
            print(report.format_table(table))
            if ts.baselines is not None:  # the rules that need no learning, on the same held-out tasks
                rules = ts.baselines(ts.tasks)
                summary["eval"]["baselines"] = {k: v for k, v in rules.items() if k != "units"}
                print(f"baselines on the same {len(ts.tasks)} tasks, scored as the environment scores them: "
                      + report.rules_line(summary["eval"]["baselines"]))
    except preemption.Preempted as e:
        preempted = e
        summary["preempted"] = {"signal": e.signum, "step": e.step, "checkpoints": e.saved}
    finally:
        for trainer in trainers:
            if trainer is not owner:
                trainer.close()
        if trainers:
            owner.close()  # the engine's owner last
    if jax.process_index() == 0:
        summary["provenance"] = {**source, "wall_s": round(time.perf_counter() - started, 1)}
        os.makedirs(cfg.out_dir, exist_ok=True)
        with open(os.path.join(cfg.out_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1, default=float)
        if preempted is None:
            print(f"trained {summary['steps']} steps x {len(configs)} seed(s); wrote {cfg.out_dir}")
    if preempted is not None:
        print(f"preempted: {preempted}; rerun the same command to resume (exit {preemption.EXIT_PREEMPTED})",
              file=sys.stderr)
        sys.exit(preemption.EXIT_PREEMPTED)


if __name__ == "__main__":
    from activemem_jax.config_files import parse_flags

    app.run(main, flags_parser=parse_flags)
