"""ActiveMem per-turn overhead on the embedded model, batch 16, same prompts, same run.

A turn of the plain model: generate from the turn prompt. A turn of ActiveMem: encode the
prompt (h_t), traverse the tree + controller + masked tree action (one jitted step for
the batch), then generate from the same prompt with K latent vectors spliced in. Both
decode the same number of tokens (greedy, EOS ignored), so the difference is the
ActiveMem machinery. Also prints peak tokens vs N from an evaluation summary, if given.

    python launch/bench_activemem.py [--batch 16] [--new-tokens 64] [--latents 4]
        [--weights f32|bf16w] [--latent-slots after_observation] [--eval-summary runs/activemem_eval_synthetic/summary.json]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # launch/, configs/

import argparse
import json
import time

from launch.bench_report import peak_rss_gib, write_json


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--latents", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--latent-slots", choices=("before_observation", "after_observation"),
                    default="before_observation",
                    help="where the K placeholders go (docs/design_memory.md#latent-injection)")
    ap.add_argument("--weights", choices=("f32", "bf16w"), default="f32",
                    help="f32, or bf16 weights with f32 activations (faster on CPUs with bf16 units)")
    ap.add_argument("--eval-summary", default="")
    ap.add_argument("--out", default="bench_results/activemem.json")
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp
    import numpy as np

    from activemem_jax import build
    from activemem_jax.engine import SamplingParams
    from activemem_jax.memory import tree as hlmt
    from configs.activemem_base import base_config, policy_defaults

    b = args.batch
    cfg = base_config()  # the run's parts from one config, as a training run builds them
    cfg.model.update(dtype="float32", remat=False)
    if args.weights == "bf16w":
        cfg.model.update(dtype="bfloat16", activation_dtype="float32")
    cfg.mesh.update(data=1, fsdp=1, tensor=1)  # one device
    cfg.engine.update(max_slots=b, max_len=2048)
    cfg.policy = policy_defaults(num_latents=args.latents, capacity=4096, latent_slots=args.latent_slots)
    cfg.data.update(name="synthetic", seed=0, n_entities=2000, split="test", n_objectives=(2,), n_tasks=b,
                    max_turns=4)
    model = build.model(cfg)
    task_set = build.tasks(cfg)
    env = task_set.make_env()
    tasks = task_set.tasks
    first = env.reset(tasks)
    # a second-turn prompt per task: the task, a previous response, retrieved documents
    actions = [f"<think>I look up {t['hops'][0][0]['entity']}.</think><search>{t['hops'][0][0]['entity']}</search>"
               for t in tasks]
    obs, _, _, _ = env.step(actions)
    params = SamplingParams(temperature=0, max_tokens=args.new_tokens, ignore_eos=True)
    res = {"batch": b, "new_tokens": args.new_tokens, "latents": args.latents, "weights": args.weights,
           "latent_slots": args.latent_slots}
    with build.engine(cfg, model) as eng:
        policy = build.policy(cfg, model, eng)
        # a persistent tree with some structure, as after training
        rng = np.random.default_rng(0)
        tree = policy.tree
        for i in range(512):
            tree, _ = hlmt.insert_node(tree, int(rng.integers(0, max(1, i // 8))) if i else 0,
                                       rng.normal(size=model.config.hidden_size))
        policy.tree = tree
        turns = [policy.layout.render(p, [(a, o)]) for p, a, o in zip(first, actions, obs)]
        res["prompt_tokens_mean"] = float(np.mean([len(t.ids) for t in turns]))
        stack = lambda x: jax.tree.map(lambda a: jnp.broadcast_to(a, (b,) + a.shape), x)  # noqa: E731

        def plain_turn():
            eng.clear_prefix_cache()
            t0 = time.perf_counter()
            eng.generate([t.plain_ids for t in turns], params)
            return {"total": time.perf_counter() - t0}

        def activemem_turn():
            eng.clear_prefix_cache()
            t0 = time.perf_counter()
            h, _, q = policy.read(obs)  # the observation's last-token state and query vector
            t1 = time.perf_counter()
            overlays = stack(policy.tree)
            logs = stack(hlmt.new_log(policy.config.max_ops, model.config.hidden_size))
            keys = jax.vmap(jax.random.PRNGKey)(jnp.arange(b))
            _, _, out = policy._step(policy.graphdef, policy.params, overlays, logs, jnp.asarray(h), jnp.asarray(q),
                                     keys, jnp.ones((b,), bool), jnp.int32(1), policy.config.step_config)
            latents = np.asarray(out.latents)
            t2 = time.perf_counter()
            with eng.batch():
                handles = [eng.submit(t.ids, params, latents=latents[i], latent_positions=t.latent_pos)
                           for i, t in enumerate(turns)]
            [hd.result() for hd in handles]
            t3 = time.perf_counter()
            return {"total": t3 - t0, "encode": t1 - t0, "tree_controller": t2 - t1, "generate": t3 - t2}

        for name, fn in (("plain", plain_turn), ("activemem", activemem_turn)):
            fn()  # compile
            runs = [fn() for _ in range(args.repeats)]
            res[name] = {k: float(np.median([r[k] for r in runs])) for k in runs[0]}
    res["overhead"] = res["activemem"]["total"] / res["plain"]["total"] - 1.0
    res["peak_rss_gib"] = peak_rss_gib()
    p, a = res["plain"], res["activemem"]
    print(f"batch {b}, {res['prompt_tokens_mean']:.0f}-token prompts, {args.new_tokens} new tokens, "
          f"K={args.latents}, weights {args.weights}, latents {args.latent_slots}")
    print(f"plain turn      {p['total']:.2f} s")
    print(f"ActiveMem turn  {a['total']:.2f} s  (encode {a['encode']:.2f}, tree+controller "
          f"{a['tree_controller']:.3f}, generate {a['generate']:.2f})")
    print(f"overhead        {100 * res['overhead']:+.1f}%  (target <= +10%)")
    if args.eval_summary:
        with open(args.eval_summary) as f:
            summary = json.load(f)
        res["peak_tokens_vs_n"] = {v: {n: s["peak_tokens"] for n, s in by_n.items()} for v, by_n in summary.items()}
        for v, by_n in res["peak_tokens_vs_n"].items():
            print(f"peak tokens {v:10s} " + "  ".join(f"N={n}: {t:.0f}" for n, t in by_n.items()))
    write_json(args.out, res)


if __name__ == "__main__":
    main()
