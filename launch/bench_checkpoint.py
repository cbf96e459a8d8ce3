"""How long a checkpoint save stalls training: orbax's asynchronous save (the trainer's
default, `checkpoint.async_save=True`) against a blocking one, on the state a run of
`--config` saves (controller parameters, optimizer state, memory trees and query space,
the shapes the config gives them; random values, no weights read), one run.

A "step" is a jitted matmul chain sized to take about --step-ms on this machine (the
stand-in for a training step's compute). Each mode runs --saves x --every steps, saving
every --every steps through the trainer's own `rl.checkpoints.Checkpoints`; the stall per
save is (that run's wall time - the same steps without saves) / saves. An asynchronous
save still competes with the next steps for cores and disk, so the stall counts the
steps after the save as well as the call; the wait for the last save to finish is
reported apart.

    python launch/bench_checkpoint.py [--config configs/experiments/dossier_base.py] [--saves 5]
        [--every 2] [--step-ms 500] [--set policy.capacity=4096]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/

from activemem_jax.config_files import parse_args  # noqa: E402
from launch.bench_report import peak_rss_gib, write_json


def checkpoint_state(cfg) -> tuple:
    """(params, opt_state, memory) of the config's run, random values in its shapes."""
    import jax
    import numpy as np

    from activemem_jax.activemem.rollout import initial_memory
    from activemem_jax.build import policy_config
    from activemem_jax.build import optimizer_from
    from activemem_jax.tooling.aot import abstract_controller, model_config, runtime_options

    model_cfg = model_config(cfg.model.path, runtime_options(cfg.model, platform=None))
    _, abstract = abstract_controller(cfg, model_cfg)
    rng = np.random.default_rng(0)
    state = jax.tree.map(lambda s: (0.02 * rng.standard_normal(s.shape)).astype(s.dtype), abstract)
    params = {"controller": state, "lora": {}}  # as the trainer holds them
    opt_state = optimizer_from(cfg).init(params)
    memory = initial_memory(policy_config(cfg), model_cfg.hidden_size)
    memory = jax.tree.map(np.asarray, memory)  # host arrays, as the trainer saves them
    return params, opt_state, memory


def step_fn(step_ms: float):
    """A jitted step of about step_ms here, and the call that runs it once."""
    import jax
    import jax.numpy as jnp

    x = jnp.ones((512, 512), jnp.float32) / 512.0

    @jax.jit
    def work(x, n):
        return jax.lax.fori_loop(0, n, lambda _, y: jnp.tanh(y @ x), x)

    work(x, 4).block_until_ready()
    t = time.perf_counter()
    work(x, 64).block_until_ready()
    n = max(1, int(64 * step_ms / 1000 / (time.perf_counter() - t)))
    return lambda: work(x, n).block_until_ready()


def run_mode(step, state, steps: int, every: int, async_save, directory: str) -> dict:
    """Wall time of `steps` steps saving every `every` (async_save None: no saves)."""
    from activemem_jax.rl.checkpoints import Checkpoints

    params, opt_state, memory = state
    ckpt = Checkpoints(directory, keep=2, async_save=bool(async_save)) if async_save is not None else None
    calls = []
    t0 = time.perf_counter()
    for s in range(1, steps + 1):
        step()
        if ckpt is not None and s % every == 0:
            t = time.perf_counter()
            ckpt.save(s, params, opt_state, memory, {"step": s})
            calls.append(time.perf_counter() - t)
    wall = time.perf_counter() - t0
    t = time.perf_counter()
    if ckpt is not None:
        ckpt.wait()
        ckpt.close()
    return {"wall_s": wall, "save_call_s": sum(calls) / max(len(calls), 1), "final_wait_s": time.perf_counter() - t}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/experiments/dossier_base.py")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    ap.add_argument("--saves", type=int, default=5)
    ap.add_argument("--every", type=int, default=2)
    ap.add_argument("--step-ms", type=float, default=500.0)
    ap.add_argument("--repeats", type=int, default=2, help="runs of each mode; the fastest counts")
    ap.add_argument("--json", default="runs/bench_checkpoint.json")
    args = parse_args(ap, argv)  # --config.a.b=v as well as --set a.b=v
    if args.saves < 1 or args.every < 1 or args.step_ms <= 0 or args.repeats < 1:
        ap.error("--saves, --every, --repeats >= 1 and --step-ms > 0")

    import jax

    from activemem_jax import schema
    from activemem_jax.config_files import load_config

    cfg = load_config(args.config, args.set)
    schema.load(cfg)
    state = checkpoint_state(cfg)
    size = sum(x.nbytes for x in jax.tree.leaves(state))
    step = step_fn(args.step_ms)
    steps = args.saves * args.every
    root = tempfile.mkdtemp(prefix="bench_ckpt_")
    modes = {"no saves": None, "blocking save": False, "async save": True}
    out = {}
    try:
        for rep in range(args.repeats):
            for name, mode in modes.items():
                r = run_mode(step, state, steps, args.every, mode, os.path.join(root, f"{rep}_{name[:5]}"))
                if name not in out or r["wall_s"] < out[name]["wall_s"]:
                    out[name] = r
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base = out["no saves"]["wall_s"]
    for name in ("blocking save", "async save"):
        out[name]["stall_per_save_s"] = max(out[name]["wall_s"] - base, 0.0) / args.saves
    print(f"{args.config}: checkpoint {size / 2**20:.1f} MiB; {steps} steps of ~{args.step_ms:.0f} ms, "
          f"a save every {args.every}; fastest of {args.repeats}")
    print(f"{'mode':<14} {'wall s':>8} {'save call s':>12} {'stall/save s':>13} {'last wait s':>12}")
    for name, r in out.items():
        print(f"{name:<14} {r['wall_s']:>8.2f} {r['save_call_s']:>12.3f} {r.get('stall_per_save_s', 0):>13.3f} "
              f"{r['final_wait_s']:>12.3f}")
    sync, asyn = out["blocking save"]["stall_per_save_s"], out["async save"]["stall_per_save_s"]
    ratio = sync / asyn if asyn > 0 else float("inf")
    print(f"stall per save: blocking {sync:.3f} s, async {asyn:.3f} s (blocking / async {ratio:.1f}x); "
          f"peak RSS {peak_rss_gib():.2f} GiB")
    result = {"config": args.config, "checkpoint_mib": size / 2**20, "steps": steps, "every": args.every,
              "step_ms": args.step_ms, "modes": out, "blocking_over_async": ratio}
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
