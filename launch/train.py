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


def evaluate_before_after(trainer, cfg) -> dict:
    from activemem_jax.activemem import evaluate as ev
    from activemem_jax.data import synthetic_world
    from activemem_jax.data.retrieval import BM25Retriever

    e, d = cfg.eval, cfg.data
    make_env = None
    if d.name == "synthetic":
        world = synthetic_world.generate(seed=d.seed, n_entities=d.n_entities)
        tasks = {n: synthetic_world.make_tasks(world, e.split, n, e.n_tasks, seed=d.seed + 1) for n in e.n_objectives}
        retriever = BM25Retriever(world.documents)
    else:  # a registered task: its held-out questions (eval.qa_files / eval.path, else the training files)
        from activemem_jax.rl.tasks import build_section

        held = d.copy_and_resolve_references()
        held.update({"n_objectives": tuple(e.n_objectives), "n_tasks": e.n_tasks, "seed": d.seed + 1})
        for key in ("qa_files", "path"):
            if e.get(key):
                held[key] = e[key]
        flat, env_factory, retriever = build_section(held, trainer.model, "data")
        tasks = {}
        for t in flat:
            tasks.setdefault(len(t["answers"]), []).append(t)
        make_env = lambda max_turns: env_factory(max_turns)  # noqa: E731
    turns = lambda n: min(e.max_turns_cap, e.turns_per_objective * n + e.extra_turns)  # noqa: E731
    base = trainer.policy.config
    rows = []
    for name, restore in (("before", None), ("after", lambda p: _load_trained(p, trainer))):
        if name == "before" and trainer.params["lora"]:
            trainer.engine.set_weights(trainer.model.state)
        for r in ev.evaluate(trainer.model, trainer.engine, retriever, base, ["activemem"], tasks, turns,
                             seed=cfg.seed, restore=restore, make_env=make_env):
            rows.append({**r, "variant": name})
    trainer._sync_policy()
    return ev.summarize(rows)


def _load_trained(policy, trainer):
    policy.params = trainer.params["controller"]
    policy.memory_state = trainer.policy.memory_state


def evaluate_recall_before_after(trainer, cfg) -> dict:
    """Held-out recall (test names) before and after training, each at two evaluation
    seeds (the untrained controller at init seeds seed and seed + 1), with the tree
    telemetry: the margin of after over before against the seed-to-seed spread."""
    from activemem_jax.activemem import ActiveMem, PolicyConfig
    from activemem_jax.activemem import evaluate as ev
    from activemem_jax.envs.recall import make_recall_tasks

    tasks = make_recall_tasks("test", cfg.eval.n_tasks, cfg.data.n_facts, seed=cfg.data.seed + 1,
                              n_questions=cfg.data.n_questions)
    base = PolicyConfig.from_dict(cfg.policy.to_dict())
    rows = {}
    for k in (0, 1):
        before = ActiveMem(trainer.gen_model, trainer.engine, base, seed=cfg.seed + k)
        rows[f"before (init seed {cfg.seed + k})"] = ev.evaluate_recall(before, tasks, seed=cfg.seed + k)
    for k in (0, 1):
        after = ActiveMem(trainer.gen_model, trainer.engine, base, seed=cfg.seed)
        _load_trained(after, trainer)
        rows[f"after (eval seed {cfg.seed + k})"] = ev.evaluate_recall(after, tasks, seed=cfg.seed + k)
    acc = {name: r["accuracy"] for name, r in rows.items()}
    b = [v for n, v in acc.items() if n.startswith("before")]
    a = [v for n, v in acc.items() if n.startswith("after")]
    spread = max(max(b) - min(b), max(a) - min(a))
    chance = next(iter(rows.values()))["chance"]
    summary = {"rows": rows, "before": sum(b) / 2, "after": sum(a) / 2, "spread": spread,
               "margin": sum(a) / 2 - max(sum(b) / 2, chance), "chance": chance}
    # learned: after beats both before and the chance rate by more than the seed-to-seed spread
    summary["learned"] = summary["margin"] > max(spread, 0.05)
    print(ev.format_recall_table(rows))
    print(f"held-out recall accuracy: before {summary['before']:.3f}, after {summary['after']:.3f} "
          f"(chance {chance:.3f}); margin over max(before, chance) {summary['margin']:+.3f} vs seed-to-seed "
          f"spread {spread:.3f}: {'LEARNED' if summary['learned'] else 'NOT LEARNED'}")
    return summary


def main(argv):
    del argv
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    absl_logging.set_verbosity(absl_logging.WARNING)  # orbax logs every file it writes at INFO
    cfg = _CONFIG.value
    from activemem_jax import compile_cache

    compile_cache.enable()  # $ACTIVEMEM_COMPILE_CACHE: a directory, or off
    init_distributed(cfg)
    import jax

    from activemem_jax.activemem import evaluate as ev
    from activemem_jax.rl.trainer import Trainer

    trainer = Trainer(cfg)
    try:
        history = trainer.train()
        summary = {"steps": trainer.step, "final": history[-1] if history else None,
                   "checkpoints": trainer.ckpt.directory}
        if cfg.eval.enabled and jax.process_count() > 1:
            print("before/after evaluation skipped: run launch.eval_activemem on one host with "
                  f"--config.checkpoint={trainer.ckpt.directory}")
        elif cfg.eval.enabled and cfg.data.name == "recall":
            summary["eval"] = evaluate_recall_before_after(trainer, cfg)
        elif cfg.eval.enabled:
            table = evaluate_before_after(trainer, cfg)
            summary["eval"] = {v: {str(n): s for n, s in by_n.items()} for v, by_n in table.items()}
            print(ev.format_table(table))
    finally:
        trainer.close()
    if jax.process_index() == 0:
        with open(os.path.join(cfg.out_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1, default=float)
        print(f"trained {trainer.step} steps; wrote {cfg.out_dir}")


if __name__ == "__main__":
    app.run(main)
