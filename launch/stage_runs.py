"""Training runs described by config entries, and their final controllers' held-out
scores: the pieces launch.continual (stages in order, each from the last) and
launch.generalize (sources from scratch, scored on other datasets) share. No flags here,
so both launchers import it.

    entries = checked_entries(cfg.stages, "stages", train=True)   # plain dicts, keys checked
    c = run_config(base, entries[0], out_dir, "stages[0] (aqua)")   # checked by schema.load
    check_data([c], ["stage 0 (aqua)"])                             # every file it names exists
    trained_now = train_unless_saved(c, "stage 0 (aqua)", model, engine, log)
    scores = score_matrix([c], targets, names, ["after 0 aqua"], model, engine, log)
    # scores: untrained, matrix, tasks, and baselines (the rules that need no learning)

An entry is a dict {"name", "data": {...data section overrides...}, "eval": {...eval
section overrides...}, "steps", "sft_steps"} (eval and sft_steps optional; steps only for
a run that trains).
"""

from __future__ import annotations

import os
import re

ENTRY_KEYS = ("name", "data", "eval", "steps", "sft_steps")
METRIC = "em"
DATA_FILES = {"data": ("path", "qa_files", "corpus", "index", "queries"), "eval": ("path", "qa_files")}


def checked_entries(entries, what: str, *, train: bool) -> list:
    """entries (a config's tuple of dicts) as plain dicts, each one's keys checked: a known
    field, a distinct name usable in a directory, data with the family's name, and (train)
    steps >= 1. what: the config field, for the messages."""
    from activemem_jax.schema import ConfigError

    plain = lambda x: x.to_dict() if hasattr(x, "to_dict") else x  # noqa: E731
    out = [{k: plain(v) for k, v in plain(e).items()} for e in entries]
    known = ENTRY_KEYS if train else ("name", "data", "eval")
    seen = set()
    for k, e in enumerate(out):
        unknown = sorted(set(e) - set(known))
        if unknown:
            raise ConfigError(f"{what}[{k}].{unknown[0]}: no such field (known: {', '.join(known)})")
        name = e.get("name", "")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name in seen:
            raise ConfigError(f"{what}[{k}].name={name!r}: a distinct name of letters, digits, '_', '.' or '-'")
        seen.add(name)
        if train and (not isinstance(e.get("steps"), int) or e["steps"] < 1):
            raise ConfigError(f"{what}[{k}] ({name}).steps={e.get('steps')!r}: need an integer >= 1")
        if not isinstance(e.get("data"), dict) or "name" not in e["data"]:
            raise ConfigError(f"{what}[{k}] ({name}).data: a dict of data section fields with the family's name")
    return out


def one_seed(base, launch: str) -> None:
    """A launch of this module's runs trains one controller per run: train.seeds has at most one."""
    from activemem_jax import schema

    seeds = tuple(schema.part(base, "train").seeds)
    if len(seeds) > 1:
        raise schema.ConfigError(f"train.seeds={seeds}: a {launch} launch trains one controller per run; run one "
                                 "launch per seed (--config.seed=k --config.out_dir=...)")


def run_config(base, entry: dict, out_dir: str, label: str, init_from: tuple = ()):
    """The entry's run config: the base with its data / eval overrides, its steps and
    sft_steps (when it has steps), out_dir, and checkpoint.init_from / init_step from
    init_from=(directory, step) when given; checked by schema.load (errors name label)."""
    from activemem_jax import schema

    c = base.copy_and_resolve_references()
    try:
        c.data.update(entry["data"])
        c.eval.update(entry.get("eval", {}))
        if "steps" in entry:
            c.train.update(steps=entry["steps"], sft_steps=entry.get("sft_steps", c.train.sft_steps), seeds=())
    except (TypeError, KeyError, AttributeError) as e:
        raise schema.ConfigError(f"{label}: {e}") from None
    c.out_dir = out_dir
    if init_from:
        c.checkpoint.update(init_from=init_from[0], init_step=init_from[1])
    try:
        schema.load(c)
    except schema.ConfigError as e:
        raise schema.ConfigError(f"{label}: {e}") from None
    return c


def check_data(configs: list, labels: list) -> None:
    """Every data file each config names exists; else one line naming its label and the path."""
    from activemem_jax import schema

    for c, label in zip(configs, labels):
        for section, fields in DATA_FILES.items():
            part = schema.part(c, section)
            for field in fields:
                value = getattr(part, field)
                for p in (value if isinstance(value, tuple) else (value,)):
                    if p and "://" not in p and not os.path.exists(p):  # a URL is a server's
                        raise FileNotFoundError(f"{label}: {section}.{field}={p!r} does not exist; "
                                                "put the file there or change that entry's data / eval paths")


def final_step_saved(cfg) -> bool:
    """Whether the run holds the checkpoint of its last step (read only)."""
    from activemem_jax.rl.checkpoints import Checkpoints

    directory = os.path.join(cfg.out_dir, "checkpoints")
    if not os.path.isdir(directory):
        return False
    ckpt = Checkpoints(directory, async_save=False, read_only=True)
    try:
        return cfg.train.steps in ckpt.steps()
    finally:
        ckpt.close()


def train_unless_saved(cfg, label: str, model, engine, log=print) -> bool:
    """Train the run unless its final checkpoint exists (one stopped midway resumes its own
    checkpoints); whether it trained now."""
    from activemem_jax.rl.trainer import Trainer

    if final_step_saved(cfg):
        log(f"{label}: step {cfg.train.steps} saved in {cfg.out_dir}; not retrained")
        return False
    log(f"{label}: {cfg.train.steps} steps on {cfg.data.name} in {cfg.out_dir}"
        + (f", from {cfg.checkpoint.init_from}" if cfg.checkpoint.init_from else ""))
    trainer = Trainer(cfg, model=model, engine=engine)
    try:
        trainer.train()
    finally:
        trainer.close()
    return True


def score_matrix(trained: list, targets: list, names: list, rows: list, model, engine, log=print) -> dict:
    """The untrained controller's held-out METRIC on every target (`untrained`, its init
    seed the first target's `seed`) and each trained run's final controller and tree on
    every target (`matrix[i][j]`), each the mean over the target's held-out tasks
    (launch.held_out: the eval section's file and sizes); `tasks`: tasks per target.
    trained, targets: checked run configs; names, rows: the targets' and the rows' labels."""
    from activemem_jax import build, schema
    from activemem_jax.rl.checkpoints import restore_policy
    from launch.held_out import evaluate_held_out, held_out_set

    runs = [schema.load(c) for c in targets]
    sets = [held_out_set(r, model) for r in runs]
    base = build.policy_config(runs[0])
    lora = bool(runs[0].lora.rank)

    def score(j: int, restore) -> float:
        engine.clear_prefix_cache()
        if lora:  # the backbone's own weights; restore_policy merges a trained run's LoRA
            engine.set_weights(model.state)
        scored = evaluate_held_out(model, engine, sets[j], runs[j], base, restore)
        return sum(r[METRIC] for r in scored) / max(len(scored), 1)

    line = lambda row: ", ".join(f"{n} {v:.3f}" for n, v in zip(names, row))  # noqa: E731
    untrained = [score(j, None) for j in range(len(runs))]
    log(f"untrained: {line(untrained)}")
    matrix = []
    for c, label in zip(trained, rows):
        directory, step = os.path.join(c.out_dir, "checkpoints"), c.train.steps
        row = [score(j, lambda p, d=directory, s=step: restore_policy(d, p, step=s)) for j in range(len(runs))]
        log(f"{label}: {line(row)}")
        matrix.append(row)
    if lora:
        engine.set_weights(model.state)
    return {"untrained": untrained, "matrix": matrix, "tasks": [len(ts.tasks) for ts in sets],
            "baselines": rule_scores(sets)}


def rule_scores(sets: list) -> dict:
    """{rule: [its held-out score on each target, None where that family has no such rule]}:
    the rules that need no learning (a TaskSet's `baselines`), on the very tasks the
    controllers are scored on; {} when no target's family has any."""
    per_target = [{k: v for k, v in ts.baselines(ts.tasks).items() if isinstance(v, float)}
                  if ts.baselines is not None else {} for ts in sets]
    rules = list(dict.fromkeys(k for rules in per_target for k in rules))
    return {rule: [rules.get(rule) for rules in per_target] for rule in rules}


def rule_lines(summary: dict, row) -> list:
    """Markdown table lines `row(label, values)` of the summary's rules (rule_scores), one a
    rule, labelled "rule: <name>"."""
    return [row(f"rule: {rule}", values) for rule, values in (summary.get("baselines") or {}).items()]


__all__ = ["METRIC", "check_data", "checked_entries", "final_step_saved", "one_seed", "rule_lines", "rule_scores",
           "run_config", "score_matrix", "train_unless_saved"]


def cli(run, markdown, default_config: str, written: str):
    """The command line of a launch built on these pieces (launch.continual,
    launch.generalize): `--config` (default `default_config`), INFO logs, a config error as
    one line, a preemption saved and named with its exit code, the Markdown table printed
    and `written` (the files, under out_dir) named. The flag is defined here, when run, not
    on import: both launches' tests import both modules into one process (absl refuses a
    flag defined twice)."""
    import logging
    import sys

    from absl import app
    from absl import logging as absl_logging
    from ml_collections import config_flags

    from activemem_jax.config_files import config_errors, flag_value, parse_flags
    from activemem_jax.rl import preemption

    flag = config_flags.DEFINE_config_file("config", default_config, "the launch's config file")

    def main(argv):
        del argv
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
        absl_logging.set_verbosity(absl_logging.INFO)
        for noisy in ("absl", "orbax", "jax", "etils", "matplotlib"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        logging.getLogger("activemem_jax").setLevel(logging.INFO)
        cfg = flag_value(flag)
        preemption.install()  # SIGTERM / SIGINT: the run in progress saves its step; a rerun resumes it
        try:
            with config_errors():  # a bad entry, a missing file, a refused init_from: one line naming it
                summary = run(cfg)
        except preemption.Preempted as e:
            print(f"preempted: {e}; rerun the same command to resume (exit {preemption.EXIT_PREEMPTED})",
                  file=sys.stderr)
            sys.exit(preemption.EXIT_PREEMPTED)
        print(markdown(summary))
        print(f"wrote {written} under {cfg.out_dir}")

    app.run(main, flags_parser=parse_flags)
