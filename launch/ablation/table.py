"""ActiveMem's ablation table (paper Table 2, with Table 9's SFT-only row) in miniature, on
dossier streams and the embedded model: `python -m launch.bench_memory --task dossier`
(its command line; this module holds the table, so tests and other launchers use it too).

    summary = run_table(args, base)   # base: configs/experiments/dossier_base.py's config
    summary = run_quick(args, base)   # --quick: one trained run, the evaluation ablations on it
    summary = merge_summaries([a, b], ["a.json", "b.json"])  # --merge: summaries of the same streams

Every variant of `activemem.ablations.ABLATIONS` trains from the base config once per
seed (seed k: init seed k, data seed data.seed + 2k, as launch.train's seeds), is
evaluated on the same held-out streams (`evaluate_streams`: every stream's episodes in
order, each stream from an empty tree), and the untrained controller and the rules that
need no training are scored on those streams too. Reports the mean and a 95% interval
across seeds (Student's t; one seed: no interval), the tree telemetry (nodes by depth,
prune / merge counts, the tree head's action mix on decoys and corrections) and a
learning curve per variant (held-out accuracy every --curve-every steps on a few streams),
as a markdown table, JSON and a PNG figure.

Variants that differ from "full" only after the SFT warm start ("SFT only", "w/o
hierarchical advantage": `ablations.shares_sft`) continue one SFT run per seed from its
checkpoint instead of repeating it; a resumed run repeats an uninterrupted one, so each
is still the variant's own run, and its curve and train_time_s include the shared part.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time

from activemem_jax.metrics.intervals import t_interval as interval

STEP_KEYS = ("step", "algo", "token_loss", "key_acc", "reward_mean", "tree_path_share", "tree_size",
             "tree_pruned", "tree_merged", "time_step")


def table_of(runs: dict) -> dict:
    """{variant: {"mean", "ci95", "seeds"}} over each variant's rows' accuracies."""
    return {v: dict(zip(("mean", "ci95"), interval([r["accuracy"] for r in rs])), seeds=len(rs))
            for v, rs in runs.items()}


def train_with_curve(trainer, steps: int, every: int, label: str, evaluate,
                     keys=STEP_KEYS) -> tuple[list, list]:
    """Train to `steps`, recording each step's `keys` and, every `every` steps and at
    the end, the accuracy, inserts and updates of `evaluate(policy)` (an evaluation row:
    a held-out learning curve). Returns (curve, history)."""
    curve, history = [], []
    while trainer.step < steps:
        m = trainer.train_step()
        history.append({k: m.get(k) for k in keys})
        if trainer.step % every == 0 or trainer.step == steps:
            row = evaluate(trainer.policy)
            acc = row["accuracy"]
            curve.append({"step": trainer.step, "algo": m["algo"], "accuracy": acc,
                          "inserts": row.get("inserts", 0), "updates": row.get("updates", 0),
                          "token_loss": m.get("token_loss"), "path_share": m.get("tree_path_share")})
            print(f"{label} step {trainer.step} ({m['algo']}): held-out accuracy {acc:.3f}", flush=True)
    return curve, history


def run_config(base, variant: str, seed: int, args, out_dir: str):
    """The run of `variant` and `seed` from the base config: args' phases and --set
    overrides, then the ablation, the seed's init and data seeds, no checkpoints kept."""
    from activemem_jax.activemem.ablations import apply_ablation
    from activemem_jax.config_files import apply_overrides

    cfg = base.copy_and_resolve_references()
    cfg.train.update(steps=args.sft_steps + args.grpo_steps, sft_steps=args.sft_steps, seeds=())
    apply_overrides(cfg, list(args.set))
    cfg = apply_ablation(cfg, variant)
    cfg.seed = seed
    cfg.data.seed = cfg.data.seed + 2 * seed
    cfg.out_dir = out_dir
    cfg.log.tensorboard = False
    cfg.eval.enabled = False
    cfg.checkpoint.update(every=10_000, resume=False, async_save=False, overwrite=True)
    return cfg


def eval_tasks(cfg, streams: int, seed=None, split: str = "test"):
    """`streams` held-out streams of the config's dossier family (its test split, data
    seed + `seed`, default 1), as the task registry builds them. split="train": unseen
    streams of the training names (default data seed + 98, which no training run draws),
    to tell new names from new streams."""
    from activemem_jax.tasks import build_section

    if seed is None:
        seed = 1 if split == "test" else 98
    held = cfg.data.copy_and_resolve_references()
    held.update(split=split, seed=cfg.data.seed + seed)
    held.dossier.streams = streams
    return build_section(held, where="data").tasks


def score_variants(cfg, directory: str, names, model, engine, streams: int = 8, step=None,
                   log=print, split: str = "test", seed=None, forced_writes=()) -> dict:
    """A training run's checkpoint (`directory`, its newest step or `step`) scored on
    `streams` held-out streams once per variant: "full" (the policy as configured) or an
    evaluation ablation's policy switches (`ablations.evaluation_overrides`). Every variant
    takes the same restored controller, trees and query space (a head the variant does not
    build, such as the latent head under "w/o latent injection", is left out) and replays
    the same streams (`evaluate_streams`; `split` and `seed` as `eval_tasks`; `forced_writes`
    as there: a diagnosis). Returns
    {name: {"step", **evaluate_streams' row}}."""
    from activemem_jax import build
    from activemem_jax.activemem import PolicyConfig
    from activemem_jax.activemem import evaluate as ev
    from activemem_jax.activemem.ablations import evaluation_overrides
    from activemem_jax.rl.checkpoints import restore_policy
    from activemem_jax.tasks import recall_codes

    tasks = eval_tasks(cfg, streams, seed=seed, split=split)
    full = build.policy(cfg, model, engine)
    restored = restore_policy(directory, full, step)
    rows = {}
    for name in names:
        policy = full
        if name != "full":
            switches = evaluation_overrides(name)
            policy = build.policy(cfg, model, engine,
                                  config=PolicyConfig.from_dict({**cfg.policy.to_dict(), **switches}))
            policy.params = _take(policy.params, full.params, name)
            policy.memory_state = _take(policy.memory_state, full.memory_state, name)
        r = rows[name] = {"step": restored, **ev.evaluate_streams(policy, tasks, seed=cfg.seed,
                                                                  codes=recall_codes(cfg.data),
                                                                  forced_writes=forced_writes)}
        if log:
            log(f"{name} (step {restored}): accuracy {r['accuracy']:.3f}, pruned {r.get('pruned', 0)}, "
                f"merged {r.get('merged', 0)}, final nodes {r['tree_size']}")
    return rows


def _take(template, source, name: str):
    """`source`'s arrays in `template`'s structure (its static fields kept), each leaf found
    by its path; `source` may hold more (a head the template's config does not build)."""
    import jax

    have = {jax.tree_util.keystr(p): x for p, x in jax.tree_util.tree_flatten_with_path(source)[0]}
    paths, treedef = jax.tree_util.tree_flatten_with_path(template)
    leaves = []
    for p, t in paths:
        key = jax.tree_util.keystr(p)
        if key not in have or getattr(have[key], "shape", None) != getattr(t, "shape", None):
            raise ValueError(f"variant {name!r}: the trained run has no {key} of shape {getattr(t, 'shape', None)} "
                             "for it; train the variant instead (--variants)")
        leaves.append(have[key])
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _row(r: dict) -> dict:
    keep = ("accuracy", "format_failure", "inserts", "updates", "pruned", "merged", "tree_size",
            "depth_histogram", "actions", "questions", "turns_log_full")
    return {k: r[k] for k in keep if k in r}


def run_table(args, base) -> dict:
    """Every variant of args.variants for its seeds (see the module docstring); `base` is
    the dossier run config the variants start from."""
    import jax

    from activemem_jax import build
    from activemem_jax.activemem import evaluate as ev
    from activemem_jax.activemem.ablations import ABLATIONS, shares_sft
    from activemem_jax.rl.trainer import Trainer

    t_start = time.perf_counter()
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in ABLATIONS]
    if unknown:
        raise SystemExit(f"--variants: unknown {unknown}; choose from {list(ABLATIONS)}")
    base_cfg = base
    base = run_config(base_cfg, "full", 0, args, "")
    model = build.model(base)
    test = eval_tasks(base, args.eval_streams)
    curve_tasks = eval_tasks(base, max(1, args.eval_streams // 4), seed=7)
    runs: dict = {}
    with build.engine(base, model) as engine:
        untrained = build.policy(base, model, engine, seed=0)
        reference = ev.evaluate_streams(untrained, test, seed=1)
        runs["untrained"] = [_row(reference)]
        warm: dict = {}  # seed -> (its SFT run's checkpoints, curve, step lines, seconds): shared
        for variant in variants:
            seeds = args.seeds if variant in args.three_seed_variants.split(",") else args.other_seeds
            for seed in range(seeds):
                out = tempfile.mkdtemp(prefix="memory_table_")
                cfg = run_config(base_cfg, variant, seed, args, out)
                shared = shares_sft(variant) and cfg.train.sft_steps > 0
                if shared and seed in warm:  # continue the seed's SFT run (its checkpoint)
                    shutil.copytree(warm[seed][0], os.path.join(out, "checkpoints"))
                    cfg.checkpoint.update(resume=True, overwrite=False)
                t0 = time.perf_counter()
                trainer = Trainer(cfg, model=model, engine=engine)
                label = f"{variant} seed {seed}"
                accuracy = lambda policy: ev.evaluate_streams(policy, curve_tasks, seed=1)  # noqa: E731
                try:
                    curve, history, sft_s = [], [], 0.0
                    if shared and seed in warm:
                        curve, history, sft_s = [dict(c) for c in warm[seed][1]], list(warm[seed][2]), warm[seed][3]
                    elif shared:
                        curve, history = train_with_curve(trainer, cfg.train.sft_steps, args.curve_every, label,
                                                          accuracy)
                        trainer.save()
                        trainer.ckpt.wait()
                        keep = tempfile.mkdtemp(prefix="memory_table_sft_")
                        shutil.copytree(trainer.ckpt.directory, os.path.join(keep, "checkpoints"))
                        sft_s = time.perf_counter() - t0
                        warm[seed] = (os.path.join(keep, "checkpoints"), [dict(c) for c in curve], list(history),
                                      sft_s)
                        t0 = time.perf_counter()
                    more, steps = train_with_curve(trainer, cfg.train.steps, args.curve_every, label, accuracy)
                    curve, history = curve + more, history + steps
                    row = _row(ev.evaluate_streams(trainer.policy, test, seed=1))
                finally:
                    trainer.close()
                    shutil.rmtree(out, ignore_errors=True)
                # train_time_s: the variant's whole training (the shared SFT run's seconds included)
                row.update(seed=seed, curve=curve, steps=history, train_time_s=time.perf_counter() - t0 + sft_s,
                           shared_sft=bool(shared))
                runs.setdefault(variant, []).append(row)
                print(f"{variant} seed {seed}: {row['accuracy']:.3f} ({row['train_time_s']:.0f} s)", flush=True)
                jax.clear_caches()
    for path, *_ in warm.values():
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    summary = {"runs": runs, "baselines": reference["baselines"], "args": vars(args),
               "total_time_s": time.perf_counter() - t_start}
    summary["table"] = table_of(runs)
    return summary


def run_quick(args, base, model=None, engine=None) -> dict:
    """--quick: one seed of "full" trained (args' SFT and GRPO steps), its SFT checkpoint
    scored as "SFT only" (that variant is the same run stopped there: `ablations.shares_sft`),
    and every evaluation ablation (`ablations.evaluation_ablations`) scored on full's final
    checkpoint: those rows are not trained on their own and say so (`evaluated_on`). The
    training-only ablations ("w/o hierarchical advantage") are left out. Same summary as
    `run_table` (scored by `score_runs`). `model` / `engine`: reuse these (default: the config's)."""
    import contextlib

    from activemem_jax import build
    from activemem_jax.activemem import evaluate as ev
    from activemem_jax.activemem.ablations import evaluation_ablations
    from activemem_jax.rl.trainer import Trainer
    from activemem_jax.tasks import recall_codes

    t_start = time.perf_counter()
    out = tempfile.mkdtemp(prefix="memory_table_quick_")
    cfg = run_config(base, "full", 0, args, out)
    model = model or build.model(cfg)
    # the curve on the table's own held-out streams, scored as score_runs scores them: its SFT point is
    # the "SFT only" row and its last point the "full" row (on 1 stream of other draws, 16 questions, the
    # published quick curve fell 0.44 -> 0.25 over GRPO while the rows rose 0.31 -> 0.50)
    held_out, codes = eval_tasks(cfg, args.eval_streams), recall_codes(cfg.data)
    accuracy = lambda policy: ev.evaluate_streams(policy, held_out, seed=cfg.seed, codes=codes)  # noqa: E731
    sft_step, last = cfg.train.sft_steps, cfg.train.steps
    try:
        with contextlib.nullcontext(engine) if engine else build.engine(cfg, model) as engine:
            t0 = time.perf_counter()
            trainer = Trainer(cfg, model=model, engine=engine)
            try:
                curve, history = train_with_curve(trainer, sft_step, args.curve_every, "full seed 0", accuracy)
                trainer.save()
                sft_s = time.perf_counter() - t0
                more, steps = train_with_curve(trainer, last, args.curve_every, "full seed 0", accuracy)
                trainer.save()
                trainer.ckpt.wait()
            finally:
                trainer.close()
            train_s = time.perf_counter() - t0
            own = {"run": out, "step": last, "seed": 0, "name": "full seed 0"}
            manifest = {"full": [own]}
            if last > sft_step:
                manifest["SFT only"] = [{**own, "step": sft_step}]
            manifest.update({name: [{**own, "evaluate": True}] for name in evaluation_ablations()})
            summary = score_runs(manifest, cfg, args, model=model, engine=engine)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    runs = summary["runs"]
    runs["full"][0].update(curve=curve + more, steps=history + steps, train_time_s=train_s)
    if "SFT only" in runs:
        runs["SFT only"][0].update(curve=curve, steps=history, train_time_s=sft_s, shared_sft=True)
    summary.update(quick=True, total_time_s=time.perf_counter() - t_start)
    return summary


def read_manifest(path: str) -> dict:
    """A `score_runs` manifest from a JSON file, checked: {variant: [{"run": out_dir, "step":
    N, optional "seed", "name", "evaluate", "sft_run"}]}, or "select": [N, ...] in place of
    "step" (the checkpoint is chosen among these on validation streams: `score_runs`); a
    clear error for anything else."""
    from activemem_jax.activemem.ablations import ABLATIONS, evaluation_overrides

    try:
        with open(path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"--runs {path}: cannot read it as JSON ({e})")
    if not isinstance(manifest, dict) or not manifest:
        raise SystemExit(f"--runs {path}: need an object {{variant: [{{\"run\": dir, \"step\": N}}, ...]}}")
    for variant, entries in manifest.items():
        if variant not in ABLATIONS:
            raise SystemExit(f"--runs {path}: unknown variant {variant!r}; choose from {list(ABLATIONS)}")
        if not isinstance(entries, list) or not entries:
            raise SystemExit(f"--runs {path}: {variant!r} needs a list of runs")
        for e in entries:
            if not isinstance(e, dict) or not isinstance(e.get("run"), str) or (
                    ("select" in e) == isinstance(e.get("step"), int)):
                raise SystemExit(f"--runs {path}: {variant!r}: each run is {{\"run\": out_dir, \"step\": N}} or "
                                 f"{{\"run\": out_dir, \"select\": [N, ...]}} (one of the two), got {e!r}")
            steps = e["select"] if "select" in e else [e["step"]]
            if not isinstance(steps, list) or not steps or not all(type(n) is int for n in steps):
                raise SystemExit(f"--runs {path}: {variant!r}: \"select\" is a list of checkpoint steps, got "
                                 f"{steps!r}")
            if e.get("evaluate"):
                try:
                    evaluation_overrides(variant)
                except ValueError as err:
                    raise SystemExit(f"--runs {path}: {err}")
            for step in steps:
                step_dir = os.path.join(e["run"], "checkpoints", str(step))
                if not os.path.isdir(step_dir):
                    raise SystemExit(f"--runs {path}: {variant!r}: no checkpoint {step_dir} (\"run\" is a training "
                                     "run's out_dir, \"step\" or each of \"select\" one of its checkpoints)")
            if e.get("sft_run") and not os.path.isdir(e["sft_run"]):
                raise SystemExit(f"--runs {path}: {variant!r}: \"sft_run\" {e['sft_run']} is not a directory")
    return manifest


def _history(entry: dict) -> list:
    """The step lines (STEP_KEYS) of the run an entry names up to its step, after those of
    the run it continued ("sft_run") before its own first step; [] without metrics.jsonl."""
    def read(run, upto, before=None):
        path = os.path.join(run, "metrics.jsonl")
        if not os.path.isfile(path):
            return []
        with open(path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        return [{k: m.get(k) for k in STEP_KEYS} for m in lines
                if m.get("step", 0) <= upto and (before is None or m.get("step", 0) < before)]

    own = read(entry["run"], entry["step"])
    if entry.get("sft_run"):
        first = own[0]["step"] if own else entry["step"] + 1
        own = read(entry["sft_run"], entry["step"], before=first) + own
    return own


def pick_step(scores: dict) -> int:
    """The step of {step: validation accuracy} with the highest accuracy; a tie goes to the
    later step (the longer-trained checkpoint)."""
    return max(scores, key=lambda step: (scores[step], step))


def _select_steps(manifest: dict, cfg, args, model, engine) -> dict:
    """The manifest with each "select" entry's "step" set to its candidate with the highest
    validation accuracy (see `score_runs`) and "selected" = {"streams", "stream_seed",
    "accuracy": {step: validation accuracy}}; entries without "select" unchanged."""
    from activemem_jax.activemem.ablations import apply_ablation

    chosen: dict = {}  # (run, candidates) -> the entry's "selected" with "step"

    def choose(e, variant_cfg):
        key = (e["run"], tuple(e["select"]))
        if key not in chosen:
            streams, seed = args.val_streams, args.val_seed
            scores = {}
            for step in e["select"]:
                got = score_variants(variant_cfg, os.path.join(e["run"], "checkpoints"), ["full"], model, engine,
                                     streams, step=step, split="train", seed=seed, log=None)["full"]
                scores[step] = got["accuracy"]
            best = pick_step(scores)
            print(f"{e['run']}: step {best} chosen on {streams} validation streams ("
                  + ", ".join(f"{k}: {v:.3f}" for k, v in scores.items()) + ")", flush=True)
            chosen[key] = {"step": best, "streams": streams, "stream_seed": seed,
                           "accuracy": {str(k): v for k, v in scores.items()}}
        return chosen[key]

    # trained entries first, under their own variant: an evaluated entry of the same run takes that choice
    ordered = sorted(((bool(e.get("evaluate")), v, i) for v, es in manifest.items() for i, e in enumerate(es)))
    out = {v: [dict(e) for e in es] for v, es in manifest.items()}
    for evaluate, variant, i in ordered:
        e = out[variant][i]
        if "select" in e:
            got = choose(e, cfg if evaluate else apply_ablation(cfg, variant))
            e["step"] = got["step"]
            e["selected"] = {k: got[k] for k in ("streams", "stream_seed", "accuracy")}
    return out


def score_runs(manifest: dict, base, args, model=None, engine=None) -> dict:
    """The table from runs trained elsewhere (one training job per variant and seed, as on a
    pod): each manifest entry's checkpoint is scored on the same `args.eval_streams`
    held-out streams of `base` (its --set overrides applied). A trained entry is scored
    under its variant's config (`apply_ablation`: a flat tree restores and searches as
    one); an "evaluate" entry is a run of another variant (usually "full") scored with this
    variant's evaluation switches and marked not trained. Each row carries the run's step
    lines from its metrics.jsonl (with "sft_run": the SFT run it continued, first) and the
    training seconds they add up to. Same summary as `run_table`.

    An entry with "select": [N, ...] instead of "step" takes the checkpoint among those
    with the highest accuracy on `args.val_streams` validation streams (streams of the
    *training* names, data seed + `args.val_seed`: `eval_tasks(split="train")`; a tie goes
    to the later step), scored under the entry's variant; the held-out streams never
    decide it. The row keeps each candidate's validation accuracy ("selected"). An
    "evaluate" entry with the same run and candidates takes the step chosen for that run's
    trained entry (or, with none in the manifest, chosen under "full")."""
    import contextlib

    from activemem_jax import build
    from activemem_jax.activemem import evaluate as ev
    from activemem_jax.activemem.ablations import apply_ablation
    from activemem_jax.config_files import apply_overrides
    from activemem_jax.tasks import recall_codes

    t_start = time.perf_counter()
    cfg = base.copy_and_resolve_references()
    apply_overrides(cfg, list(args.set))
    model = model or build.model(cfg)
    runs: dict = {}
    with contextlib.nullcontext(engine) if engine else build.engine(cfg, model) as engine:
        untrained = build.policy(cfg, model, engine, seed=0)
        reference = ev.evaluate_streams(untrained, eval_tasks(cfg, args.eval_streams), seed=cfg.seed,
                                        codes=recall_codes(cfg.data))
        runs["untrained"] = [_row(reference)]
        manifest = _select_steps(manifest, cfg, args, model, engine)
        # the evaluation ablations asked of one checkpoint: one restore, every variant on it
        asked: dict = {}
        for variant, entries in manifest.items():
            for e in entries:
                if e.get("evaluate"):
                    asked.setdefault((e["run"], e["step"]), []).append(variant)
        evaluated = {(run, step): score_variants(cfg, os.path.join(run, "checkpoints"), names, model, engine,
                                                 args.eval_streams, step=step)
                     for (run, step), names in asked.items()}
        for variant, entries in manifest.items():
            for i, e in enumerate(entries):
                name = e.get("name") or os.path.basename(os.path.normpath(e["run"]))
                if e.get("evaluate"):
                    got = evaluated[(e["run"], e["step"])][variant]
                else:
                    directory = os.path.join(e["run"], "checkpoints")
                    got = score_variants(apply_ablation(cfg, variant), directory, ["full"], model, engine,
                                         args.eval_streams, step=e["step"])["full"]
                row = {**_row(got), "seed": e.get("seed", i), "run": e["run"], "step": got["step"]}
                if "selected" in e:
                    row["selected"] = e["selected"]
                if e.get("evaluate"):
                    row["evaluated_on"] = f"{name}, step {got['step']}"
                else:
                    row["steps"] = _history(e)
                    row["train_time_s"] = sum(s.get("time_step") or 0.0 for s in row["steps"])
                runs.setdefault(variant, []).append(row)
    summary = {"runs": runs, "baselines": reference["baselines"], "args": vars(args),
               "total_time_s": time.perf_counter() - t_start}
    summary["table"] = table_of(runs)
    return summary


# what two summaries must agree on to be one table: the streams and model they were scored on
SAME_ARGS = ("config", "eval_streams", "set")


def merge_summaries(summaries: list, names: list) -> dict:
    """One table from summaries of `score_runs` / `run_table` scored on the same held-out
    streams (say, runs trained and scored in different sessions or jobs): each variant's
    rows in the order given, the table's means and intervals recomputed over them.
    Refuses (SystemExit naming the file and field) summaries whose config, held-out
    streams or --set overrides differ, whose rules or untrained controller scored
    differently on those streams (another stream set or another code), a run scored
    twice under one variant (it would count one seed twice), or a variant whose rows mix
    runs trained as that variant with another variant's runs evaluated under its switches
    (say, the static rule trained, and applied at evaluation to full's checkpoints)."""
    if not summaries:
        raise SystemExit("--merge: name at least one summary JSON")
    for s, name in zip(summaries, names):
        if not isinstance(s, dict) or not all(k in s for k in ("runs", "baselines", "args")):
            raise SystemExit(f"--merge {name}: not a bench_memory --task dossier summary (needs runs, baselines, args)")
    first, first_name = summaries[0], names[0]
    runs: dict = {}
    seen: set = set()
    for s, name in zip(summaries, names):
        for key in SAME_ARGS:
            if s["args"].get(key) != first["args"].get(key):
                raise SystemExit(f"--merge {name}: {key} is {s['args'].get(key)!r}, {first_name} has "
                                 f"{first['args'].get(key)!r}: not the same held-out streams; score both the same way")
        for rule, value in first["baselines"].items():
            if isinstance(value, float) and abs(s["baselines"].get(rule, float("nan")) - value) > 1e-9:
                raise SystemExit(f"--merge {name}: rule {rule} scores {s['baselines'].get(rule)} where {first_name} "
                                 f"has {value}: the streams differ; score both with one config and --eval-streams")
        for variant, rows in s["runs"].items():
            if variant == "untrained":
                got, want = rows[0]["accuracy"], runs.setdefault("untrained", [{**rows[0], "summary": name}])[0]
                if abs(got - want["accuracy"]) > 1e-9:
                    raise SystemExit(f"--merge {name}: the untrained controller scores {got} where {want['summary']} "
                                     f"has {want['accuracy']}: another model or code scored them; rescore one of them")
                continue
            for r in rows:
                key = (variant, r.get("run"), r.get("step"))
                if r.get("run") is not None and key in seen:
                    raise SystemExit(f"--merge {name}: {variant!r} holds {r['run']} step {r['step']} again (it would "
                                     "count one trained seed twice); leave it out of one summary")
                seen.add(key)
                had = runs.setdefault(variant, [])
                if had and bool(had[0].get("evaluated_on")) != bool(r.get("evaluated_on")):
                    kinds = {True: "evaluated on another variant's checkpoints", False: "trained as this variant"}
                    raise SystemExit(f"--merge {name}: {variant!r} rows {kinds[bool(r.get('evaluated_on'))]} join rows "
                                     f"{kinds[bool(had[0].get('evaluated_on'))]} (from {had[0]['summary']}): two "
                                     "experiments under one name; leave one kind out of its summary's manifest")
                had.append({**r, "summary": name})
    summary = {"runs": runs, "baselines": first["baselines"], "args": {**first["args"], "merge": list(names)},
               "total_time_s": sum(s.get("total_time_s", 0.0) for s in summaries)}
    summary["table"] = table_of(runs)
    return summary


def format_table(summary: dict) -> str:
    lines = ["| variant | accuracy (mean) | 95% interval | seeds | nodes by depth | pruned | merged | "
             "decoys: noop / insert / update | corrections: noop / insert / update |",
             "|---|---|---|---|---|---|---|---|---|"]

    def mix(rows, kind):
        got = [r["actions"].get(kind) for r in rows if r.get("actions", {}).get(kind)]
        if not got:
            return "-"
        return " / ".join(f"{sum(a[k] for a in got) / len(got):.2f}" for k in ("noop", "insert", "update"))

    for v, rs in summary["runs"].items():
        t = summary["table"][v]
        depth: dict = {}
        for r in rs:
            for d, n in r.get("depth_histogram", {}).items():
                depth[d] = depth.get(d, 0) + n / len(rs)
        hist = ", ".join(f"{d}: {n:.1f}" for d, n in sorted(depth.items(), key=lambda x: int(x[0]))) or "-"
        ci = "-" if math.isnan(t["ci95"]) else f"+/- {t['ci95']:.3f}"
        pruned = sum(r.get("pruned", 0) for r in rs) / len(rs)
        merged = sum(r.get("merged", 0) for r in rs) / len(rs)
        more = f" and {len(rs) - 1} more" if len(rs) > 1 else ""  # an evaluation ablation on several runs
        notes = [f"on {rs[0]['evaluated_on']}{more}, not trained"] if rs[0].get("evaluated_on") else []
        if any(r.get("selected") for r in rs):  # the steps `select` chose on validation streams
            notes.append(f"steps {' / '.join(str(r['step']) for r in rs)} chosen on validation")
        name = f"{v} ({'; '.join(notes)})" if notes else v
        lines.append(f"| {name} | {t['mean']:.3f} | {ci} | {t['seeds']} | {hist} | {pruned:.1f} | {merged:.1f} | "
                     f"{mix(rs, 'decoy')} | {mix(rs, 'correction')} |")
    b = summary["baselines"]
    rules = ", ".join(f"{k} {b[k]:.3f}" for k in b if isinstance(b[k], float))
    lines.append(f"rules that need no training, on the same streams: {rules}")
    return "\n".join(lines)


def plot(summary: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (bars, curves) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = list(summary["table"])
    means = [summary["table"][v]["mean"] for v in names]
    errs = [0.0 if math.isnan(summary["table"][v]["ci95"]) else summary["table"][v]["ci95"] for v in names]
    bars.bar(range(len(names)), means, yerr=errs, capsize=4)
    rules = {k: v for k, v in summary["baselines"].items() if isinstance(v, float) and k != "ceiling"}
    strongest = max(rules, key=rules.get) if rules else None
    lines = [(strongest, "-", f"{strongest} (the best rule computed)")] if strongest else []
    lines += [(k, style, k) for k, style in (("episode_only", ":"), ("store_all", "--"), ("best_constant", "-."))
              if k in rules and k != strongest]
    for rule, style, label in lines:
        bars.axhline(rules[rule], linestyle=style, color="gray", label=label)
    bars.set_xticks(range(len(names)), names, rotation=35, ha="right")
    bars.set_ylabel("held-out accuracy (mean, 95% interval)")
    bars.legend(fontsize=8)
    for n, (v, rs) in enumerate(summary["runs"].items()):
        color = f"C{n % 10}"  # one colour per variant, its seeds alike
        for i, r in enumerate(rs):
            pts = r.get("curve") or []
            if pts:
                curves.plot([p["step"] for p in pts], [p["accuracy"] for p in pts], alpha=0.7, color=color,
                            label=v if i == 0 else None)
                continue
            # a run scored from its checkpoint (score_runs): its GRPO reward, 5-step means (SFT's
            # reward is the expert's answers', 1 by construction)
            reward = [(s["step"], s["reward_mean"]) for s in r.get("steps") or []
                      if s.get("algo") == "grpo" and s.get("reward_mean") is not None]
            if len(reward) >= 5:
                x = [reward[k + 4][0] for k in range(len(reward) - 4)]
                y = [sum(w for _, w in reward[k:k + 5]) / 5 for k in range(len(reward) - 4)]
                curves.plot(x, y, linestyle="--", alpha=0.7, color=color,
                            label=f"{v} (GRPO reward)" if i == 0 else None)
    curves.set_xlabel("training step")
    curves.set_ylabel("held-out accuracy / GRPO reward (dashed)")
    curves.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(summary: dict, out: str) -> None:
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        json.dump(summary, f, indent=1, default=float)
    plot(summary, os.path.splitext(out)[0] + ".png")


__all__ = ["eval_tasks", "format_table", "interval", "merge_summaries", "pick_step", "plot", "read_manifest",
           "run_config", "run_quick", "run_table", "score_runs", "score_variants", "table_of", "train_with_curve",
           "write"]
