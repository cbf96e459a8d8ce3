"""Context growth of HyMem's planner vs ReAct and ReSum (the HyMem paper's Figure 4 claim),
on synthetic N-objective tasks (N = 1, 4, 8), same run.

Two clients: a scripted oracle (it follows each task's gold hop chain, so every agent does
the same searches and the contexts differ only by how each agent manages them; tokens are
counted with the embedded model's tokenizer) and, with --embedded, the embedded model
itself through the in-process engine (wall time and tokens at equal budgets), and the
oracle's replies paced by that engine (each call prefills the real prompt and decodes as
many tokens as the reply: both agents follow the gold protocol and pay real compute).

With --free, HyMem runs the oracle's own tasks on the embedded model through the real engine
with no oracle at all, each turn decoded under its protocol's grammar (constrained="on",
hymem/grammars.py): its accuracy, answered share, planner turns and tokens print beside the
oracle-driven run of the same tasks (the 135M may answer wrongly; the point is that it acts).

    python launch/bench_agents.py [--objectives 1,4,8] [--tasks 3] [--embedded [--weights bf16w] [--paced-only]]
    python launch/bench_agents.py --objectives 1,4 --tasks 3 --free [--free-turns 6]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # launch/, configs/

import argparse
import json
import statistics
import time

from hymem.oracle import OracleClient, PacedOracleClient
from launch.bench_report import write_json


def context_by_turn(trace, space):
    return [e["prompt_tokens"] for e in trace if e["type"] == "model_call" and e["space"] == space]


def gold(task) -> str:
    return "; ".join(a[0] for a in task["answers"])


def free_run(model, tools, by_n, ns, oracle_rows, planner_turns: int, max_tokens: int) -> list:
    """HyMem on the oracle's tasks with the embedded model deciding every turn (no oracle),
    each turn decoded under its protocol's grammar; a row per N beside the oracle's."""
    from hymem import HyMemAgent, HyMemConfig
    from hymem.llm import EngineClient

    from activemem_jax import build

    engine = build.engine(build.config(engine={"max_slots": 8, "max_len": 4096}), model)
    client = EngineClient(engine)
    cfg = HyMemConfig(planner_turns=planner_turns, constrained="on",
                      sampling={"temperature": 0.0, "max_tokens": max_tokens})
    out = []
    try:
        for n in ns:
            per = []
            for task in by_n[n]:
                engine.clear_prefix_cache()
                t0 = time.perf_counter()
                res = HyMemAgent(client, tools, cfg).run(task["question"])
                calls = [e for e in res.trace if e["type"] == "model_call"]
                per.append({"correct": res.answer == gold(task), "answered": bool(res.answer),
                            "turns": len(context_by_turn(res.trace, "planner")),
                            "tokens": sum(e["prompt_tokens"] + e["completion_tokens"] for e in calls),
                            "tools": sum(e["type"] == "tool_call" for e in res.trace),
                            "wall": time.perf_counter() - t0, "answer": res.answer, "gold": gold(task)})
            oracle = next(r for r in oracle_rows if r["agent"] == "hymem" and r["n_objectives"] == n)
            row = {"n_objectives": n, "tasks": len(per), "planner_turns_cap": planner_turns,
                   "accuracy": sum(p["correct"] for p in per) / len(per),
                   "answered": sum(p["answered"] for p in per) / len(per),
                   "turns": statistics.mean(p["turns"] for p in per),
                   "tokens": statistics.mean(p["tokens"] for p in per),
                   "tool_calls": statistics.mean(p["tools"] for p in per),
                   "wall_s": statistics.mean(p["wall"] for p in per), "per_task": per,
                   "oracle": {k: oracle[k] for k in ("oracle_solved", "turns", "tokens", "tool_calls")}}
            out.append(row)
            print(f"N={n} HyMem, embedded model, no oracle, constrained: accuracy {row['accuracy']:.2f} "
                  f"(oracle-driven {oracle['oracle_solved']:.2f}), answered {row['answered']:.2f}, planner turns "
                  f"{row['turns']:.1f} (oracle {oracle['turns']:.1f}), tokens {row['tokens']:.0f} "
                  f"(oracle {oracle['tokens']:.0f}), tool calls {row['tool_calls']:.1f} "
                  f"(oracle {oracle['tool_calls']:.1f}), {row['wall_s']:.0f} s a task")
    finally:
        engine.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objectives", default="1,4,8")
    ap.add_argument("--tasks", type=int, default=3)
    ap.add_argument("--embedded", action="store_true", help="also time the embedded model (slow)")
    ap.add_argument("--paced-only", action="store_true",
                    help="with --embedded: only the oracle paced by the engine (wall time, prefix-cache share)")
    ap.add_argument("--weights", choices=("f32", "bf16w"), default="f32",
                    help="embedded model: f32, or bf16 weights with f32 activations")
    ap.add_argument("--free", action="store_true",
                    help="also run HyMem on the same tasks on the embedded model, no oracle, turns constrained")
    ap.add_argument("--free-turns", type=int, default=6, help="with --free: planner turns per task")
    ap.add_argument("--free-max-tokens", type=int, default=256, help="with --free: tokens per model call")
    ap.add_argument("--out", default="bench_results/agents.json")
    args = ap.parse_args()

    from activemem_jax import build
    from activemem_jax.tasks import build_section
    from activemem_jax.tasks.synthetic import synthetic_section
    from hymem import HyMemAgent, HyMemConfig
    from hymem.baselines import BaselineConfig, FlatAgent
    from hymem.oracle import oracle_bench

    ns = [int(x) for x in args.objectives.split(",")]
    world, by_n, tools, model = oracle_bench(ns, args.tasks)  # the free run's one task: seed 2, below
    tok = model.tokenizer
    rows = []
    big = {"planner_turns": 40, "fold_executor_calls": 5}
    print(f"{'N':>3} {'agent':8} {'turns':>5} {'ctx@1':>6} {'ctx@12':>7} {'peak ctx':>8} {'tokens':>8} "
          f"{'tools':>5} {'wall s':>7}")
    for n in ns:
        tasks = by_n[n]
        for name in ("hymem", "react", "resum"):
            per = []
            for task in tasks:
                client = OracleClient(task, world, tok)
                agent = (HyMemAgent(client, tools, HyMemConfig(**big, context_window=8192))
                         if name == "hymem" else
                         FlatAgent(client, tools, BaselineConfig(mode=name, context_window=8192)))
                t0 = time.perf_counter()
                result = agent.run(task["question"])
                wall = time.perf_counter() - t0
                ctx = context_by_turn(result.trace, "planner" if name == "hymem" else name)
                calls = [e for e in result.trace if e["type"] == "model_call"]
                per.append({"turns": len(ctx), "ctx": ctx, "tokens": sum(e["prompt_tokens"] + e["completion_tokens"]
                                                                          for e in calls),
                            "tools": sum(e["type"] == "tool_call" for e in result.trace), "wall": wall,
                            "correct": result.answer == gold(task)})
            at = lambda k: statistics.mean(p["ctx"][min(k, len(p["ctx"])) - 1] for p in per)  # noqa: E731
            row = {"n_objectives": n, "agent": name, "turns": statistics.mean(p["turns"] for p in per),
                   "ctx_turn1": at(1), "ctx_turn12": at(12), "peak_ctx": max(max(p["ctx"]) for p in per),
                   "tokens": statistics.mean(p["tokens"] for p in per),
                   "tool_calls": statistics.mean(p["tools"] for p in per),
                   "wall_s": statistics.mean(p["wall"] for p in per),
                   "oracle_solved": sum(p["correct"] for p in per) / len(per)}
            rows.append(row)
            print(f"{n:>3} {name:8} {row['turns']:>5.1f} {row['ctx_turn1']:>6.0f} {row['ctx_turn12']:>7.0f} "
                  f"{row['peak_ctx']:>8} {row['tokens']:>8.0f} {row['tool_calls']:>5.1f} {row['wall_s']:>7.3f}")
    ratios = {}
    for n in ns:
        h = next(r for r in rows if r["agent"] == "hymem" and r["n_objectives"] == n)
        r = next(r for r in rows if r["agent"] == "react" and r["n_objectives"] == n)
        ratios[n] = h["ctx_turn12"] / r["ctx_turn12"]
    print("HyMem planner / ReAct context at turn 12 (or the last turn): "
          + ", ".join(f"N={n}: {v:.2f}" for n, v in ratios.items()))
    result = {"oracle": rows, "planner_over_react_turn12": ratios}
    if args.free:
        result["free"] = free_run(model, tools, by_n, ns, rows, args.free_turns, args.free_max_tokens)
    if args.embedded:
        from hymem.llm import EngineClient

        if args.weights == "bf16w":
            model = build.model(build.config(model={"path": "embedded", "dtype": "bfloat16",
                                                    "activation_dtype": "float32", "remat": False}))
        timing = {}
        if not args.paced_only:  # the embedded model's own free run
            engine = build.engine(build.config(engine={"max_slots": 8, "max_len": 4096}), model)
            client = EngineClient(engine, max_tokens=64)
            task = build_section(synthetic_section(world_seed=0, seed=2, n_objectives=(1,), n_tasks=1)).tasks[0]
            for rep in range(2):  # the first pass compiles every shape; the second is timed
                for name in ("hymem", "react"):
                    cfg = dict(sampling={"temperature": 0.0, "max_tokens": 64})
                    agent = (HyMemAgent(client, tools, HyMemConfig(planner_turns=4, execute_turns=2, **cfg))
                             if name == "hymem" else
                             FlatAgent(client, tools, BaselineConfig(mode="react", max_turns=4, **cfg)))
                    engine.clear_prefix_cache()  # only prefixes the run itself repeats are reused
                    t0 = time.perf_counter()
                    res = agent.run(task["question"])
                    calls = [e for e in res.trace if e["type"] == "model_call"]
                    timing[name] = {"wall_s": time.perf_counter() - t0, "model_calls": len(calls),
                                    "tokens": sum(e["prompt_tokens"] + e["completion_tokens"] for e in calls),
                                    "cached_tokens": sum(e.get("cached_tokens", 0) for e in calls)}
            engine.close()
        engine = build.engine(build.config(engine={"max_slots": 8, "max_len": 8192}), model)  # the server's slots
        paced = {}
        for n in ns:
            if n > 4:  # ReAct's flat context passes 8,192 tokens (11k at N=8): beyond this CPU's memory
                print(f"oracle paced by the engine, N={n}: skipped (ReAct's context outgrows the 8,192-token engine)")
                continue
            task = by_n[n][0]  # the first of the same draw (make_tasks draws task i the same for any count)
            for rep in range(2):  # the first pass compiles; the second is timed
                for name in ("hymem", "react"):
                    client = PacedOracleClient(OracleClient(task, world, tok), engine)
                    agent = (HyMemAgent(client, tools, HyMemConfig(**big, context_window=8192))
                             if name == "hymem" else
                             FlatAgent(client, tools, BaselineConfig(mode="react", context_window=8192)))
                    engine.clear_prefix_cache()
                    t0 = time.perf_counter()
                    res = agent.run(task["question"])
                    calls = [e for e in res.trace if e["type"] == "model_call"]
                    paced[f"{n}:{name}"] = {
                        "wall_s": time.perf_counter() - t0, "model_calls": len(calls),
                        "main_turns": len(context_by_turn(res.trace, "planner" if name == "hymem" else name)),
                        "completion_tokens": sum(e["completion_tokens"] for e in calls),
                        "prompt_tokens": sum(e["prompt_tokens"] for e in calls),
                        "cached_tokens": sum(e.get("cached_tokens", 0) for e in calls),
                        "engine_prefix_cache": engine.health()["prefix_cache"]}
                    paced[f"{n}:{name}"]["cached_share"] = (paced[f"{n}:{name}"]["cached_tokens"]
                                                            / max(paced[f"{n}:{name}"]["prompt_tokens"], 1))
            h, r = paced[f"{n}:hymem"], paced[f"{n}:react"]
            print(f"oracle paced by the engine, N={n}: HyMem {h['wall_s']:.2f} s ({h['model_calls']} calls, "
                  f"{h['main_turns']} planner turns, {h['completion_tokens']} decoded), ReAct {r['wall_s']:.2f} s "
                  f"({r['model_calls']} calls, {r['completion_tokens']} decoded): ratio {h['wall_s'] / r['wall_s']:.2f}; "
                  f"prompt tokens from the prefix cache: HyMem {h['cached_tokens']} of {h['prompt_tokens']} "
                  f"({h['cached_share']:.0%}), ReAct {r['cached_tokens']} of {r['prompt_tokens']} "
                  f"({r['cached_share']:.0%}) (target: HyMem >= 60%)")
        timing["oracle_paced"] = paced
        engine.close()
        timing["weights"] = args.weights
        if not args.paced_only:
            timing["ratio"] = timing["hymem"]["wall_s"] / timing["react"]["wall_s"]
            print(f"embedded model ({args.weights}), 4 planner/ReAct turns, second pass: {json.dumps(timing)}"
                  f"\nHyMem / ReAct wall time: {timing['ratio']:.2f}")
        result["embedded"] = timing
    write_json(args.out, result)


if __name__ == "__main__":
    main()
