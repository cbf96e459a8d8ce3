"""Benchmark: the time of one training step, this checkout against an earlier commit.

    python -m launch.bench_step [--against 9986f37 --sft 4 --grpo 3 --set model.dtype=float32]
    python -m launch.bench_step --recipe experiments.dossier_base --against 5735324

Runs README command 1's config (configs/activemem_tiny_cpu.py, one seed; `--recipe` names
another module of configs/) for a few SFT steps and then a few GRPO steps, in this
checkout and in a git worktree of `--against` (made under /tmp if missing), one after the
other in fresh processes with the compile cache off, and prints the median of each phase
(rollout, reference pass, update, whole step; each algorithm's first step, which
compiles, left out) with the ratio old / new. `--set` overrides config fields in both
runs, so they share one config (a field the old commit lacks is skipped there). Writes
bench_results/step.json. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHASES = ("time_rollout", "time_reference", "time_update", "time_step")
COMPILED_S = 0.5  # a step that spent this long compiling is left out of the medians

_CHILD = r"""
import json, statistics, sys
from jax import monitoring
COMPILE = [0.0]
def _listen(event, duration, **kw):
    if event in ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                 "/jax/core/compile/backend_compile_duration"):
        COMPILE[0] += duration
monitoring.register_event_duration_secs_listener(_listen)
from activemem_jax.config_files import apply_overrides
import importlib
from activemem_jax.rl.trainer import Trainer
n_sft, n_grpo, out, sets = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
cfg = importlib.import_module("configs." + sys.argv[5]).get_config()
cfg.out_dir = out
cfg.log.tensorboard = False
cfg.checkpoint.update(every=10_000, resume=False, async_save=False)
if "overwrite" in cfg.checkpoint:  # a fresh run whatever the directory holds (older commits lack the field)
    cfg.checkpoint.overwrite = True
cfg.train.update(steps=n_sft + n_grpo, sft_steps=n_sft)
if "seeds" in cfg.train:
    cfg.train.seeds = ()
def known(key):  # a field this commit's config has
    *path, name = key.split("=", 1)[0].split(".")
    node = cfg
    for p in path:
        if p not in node:
            return False
        node = node[p]
    return name in node
apply_overrides(cfg, [s for s in sets if known(s)])
tr = Trainer(cfg)
rows = []
while tr.step < n_sft + n_grpo:
    c0 = COMPILE[0]
    m = tr.train_step()
    rows.append({**{k: m[k] for k in ("algo",) + tuple(%r)}, "compile_s": COMPILE[0] - c0})
tr.close()
print("STEPS " + json.dumps(rows))
""" % (PHASES,)


def _worktree(commit: str) -> str:
    path = os.path.join("/tmp", f"activemem-bench-{commit}")
    if not os.path.isdir(path):
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "-f", path, commit], check=True,
                       capture_output=True, text=True)
    return path


def _run(tree: str, args, sets) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "ACTIVEMEM_COMPILE_CACHE": "off",
           "PYTHONPATH": tree}
    out = os.path.join("/tmp", f"activemem-bench-run-{os.getpid()}-{os.path.basename(tree)}")
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(args.sft), str(args.grpo), out, json.dumps(sets),
                           args.recipe],
                          cwd=tree, env=env, capture_output=True, text=True)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("STEPS ")), None)
    if proc.returncode or line is None:
        raise RuntimeError(f"the run in {tree} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    rows = json.loads(line[len("STEPS "):])
    medians = {}
    for algo in ("sft", "grpo"):
        steps = [r for r in rows if r["algo"] == algo]
        timed = [r for r in steps if r["compile_s"] < COMPILED_S]
        if not timed:
            raise RuntimeError(f"every {algo} step in {tree} compiled: give more steps (--{algo})")
        medians[algo] = {k: statistics.median(r[k] for r in timed) for k in PHASES}
        medians[algo].update(steps=len(steps), compiled=len(steps) - len(timed),
                             compile_s=sum(r["compile_s"] for r in steps))
    return medians


def main():
    sys.path.insert(0, ROOT)
    from activemem_jax.config_files import parse_args

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--against", default="9986f37", help="the commit to compare with")
    p.add_argument("--sft", type=int, default=6)
    p.add_argument("--grpo", type=int, default=6)
    p.add_argument("--recipe", default="activemem_tiny_cpu", help="the config module under configs/")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--out", default="bench_results/step.json")
    args = parse_args(p)  # --config.a.b=v as well as --set a.b=v
    if min(args.sft, args.grpo) < 2:
        p.error("--sft and --grpo need >= 2 steps each (the first one compiles)")
    old = _run(_worktree(args.against), args, args.set)
    new = _run(ROOT, args, args.set)
    print(f"| step | phase | {args.against} (s) | this checkout (s) | ratio |")
    print("|---|---|---|---|---|")
    for algo in ("sft", "grpo"):
        for k in PHASES:
            a, b = old[algo][k], new[algo][k]
            ratio = f"{a / b:.2f}x" if b > 0.05 else "-"
            print(f"| {algo} | {k[5:]} | {a:.2f} | {b:.2f} | {ratio} |")
    for algo in ("sft", "grpo"):
        print(f"{algo}: steps that compiled (left out) {old[algo]['compiled']}/{old[algo]['steps']} "
              f"({old[algo]['compile_s']:.0f} s compiling) at {args.against}, {new[algo]['compiled']}/"
              f"{new[algo]['steps']} ({new[algo]['compile_s']:.0f} s) here")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"against": args.against, "recipe": args.recipe, "set": args.set, "old": old, "new": new}, f,
                  indent=1)


if __name__ == "__main__":
    main()
