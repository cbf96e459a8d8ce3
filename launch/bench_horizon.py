"""Cost at long horizons by token accounting: HyMem vs ReAct on N-objective synthetic
tasks, N up to 32, under the gold protocol, with no engine (so N is not limited by
memory).

Both agents are driven by the scripted oracle of `bench_agents` (it follows each task's
gold hop chains: every agent does the same searches, and the contexts differ only by how
each agent manages them). Every call's prompt is rendered with the embedded model's chat
template and counted with its tokenizer; the reply is counted the same way. Per (N,
agent), means over the tasks:

- planner context: the largest prompt of the persistent context (HyMem's planner,
  ReAct's single context);
- prompt tokens, and the prompt tokens an engine prefix cache of `--slots` x `--rows`
  tokens would not have served (`PrefixCacheModel`: the engine's own slot policy);
- decoded tokens;
- dependency length (docs/design.md#metrics, MEM1's definition): for every call with c
  prompt tokens and l generated ones, (c + l / 2) * l, summed.

    python -m launch.bench_horizon [--objectives 1,2,4,8,16,32] [--tasks 2] [--slots 8 --rows 32768]
    python -m launch.bench_horizon --agents amem,thread,react --objectives 1,4,16   # the other baselines
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # launch/, configs/

import argparse
import statistics
import time

from hymem.oracle import METRICS, AccountingClient, OracleClient
from launch.bench_report import write_json

def run(agent_name, task, world, tools, model, slots, rows) -> dict:
    from activemem_jax.engine.prefix_policy import PrefixCacheModel
    from hymem import build

    hops = sum(len(h) for h in task["hops"])
    client = AccountingClient(OracleClient(task, world, model.tokenizer), model, PrefixCacheModel(slots, rows))
    turns = max(100, hops + 4)
    agent = build(agent_name, client, tools, {
        "hymem": {"planner_turns": hops + 4, "context_window": rows},
        "baselines": {"max_turns": turns, "context_window": 10 * rows},
        "amem": {"max_turns": turns}, "thread": {"root_turns": turns, "max_children": hops + 1}})
    client.persistent_space = agent.persistent_space
    result = agent.run(task["question"])
    solved = result.answer == "; ".join(a[0] for a in task["answers"])
    events = [e["type"] for e in result.trace]
    return {**client.totals, "hops": hops, "solved": solved, "folds": events.count("fold"),
            "notes": events.count("memory_write"), "spawns": events.count("spawn")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objectives", default="1,2,4,8,16,32")
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--agents", default="hymem,react", help="registered agents (hymem.names()); ratios: first / react")
    ap.add_argument("--slots", type=int, default=8, help="prefix cache: engine slots")
    ap.add_argument("--rows", type=int, default=32768, help="prefix cache: tokens per slot (the context)")
    ap.add_argument("--out", default="bench_results/horizon.json")
    args = ap.parse_args(argv)

    from hymem.oracle import oracle_bench

    ns = [int(x) for x in args.objectives.split(",")]
    world, by_n, tools, model = oracle_bench(ns, args.tasks)
    rows, t0 = [], time.perf_counter()
    print(f"prefix cache model: {args.slots} slots x {args.rows} tokens; means over {args.tasks} tasks")
    print(f"{'N':>3} {'agent':6} {'hops':>5} {'planner ctx':>11} {'prompt':>10} {'uncached':>10} "
          f"{'decoded':>8} {'dependency':>14} {'calls':>6} {'solved':>6} {'folds/notes/spawns':>18}")
    for n in ns:
        tasks = by_n[n]
        for name in args.agents.split(","):
            per = [run(name, task, world, tools, model, args.slots, args.rows) for task in tasks]
            row = {"n_objectives": n, "agent": name, "hops": statistics.mean(p["hops"] for p in per),
                   **{k: statistics.mean(p[k] for p in per) for k in METRICS},
                   "solved": sum(p["solved"] for p in per) / len(per),
                   **{k: statistics.mean(p[k] for p in per) for k in ("folds", "notes", "spawns")}}
            rows.append(row)
            print(f"{n:>3} {name:6} {row['hops']:>5.0f} {row['planner_context']:>11.0f} {row['prompt_tokens']:>10.0f} "
                  f"{row['uncached_prompt_tokens']:>10.0f} {row['decoded_tokens']:>8.0f} "
                  f"{row['dependency_length']:>14.3g} {row['model_calls']:>6.0f} {row['solved']:>6.2f} "
                  f"{row['folds']:>6.1f}/{row['notes']:.1f}/{row['spawns']:.1f}")
    first = args.agents.split(",")[0]
    if first == "react" or "react" not in args.agents.split(","):
        write_json(args.out, {"rows": rows, "slots": args.slots, "cache_rows": args.rows})
        return
    ratios = {}
    for n in sorted({r["n_objectives"] for r in rows}):
        h, r = (next(x for x in rows if x["n_objectives"] == n and x["agent"] == a) for a in (first, "react"))
        ratios[n] = {k: h[k] / r[k] for k in METRICS if r[k]}
    print(f"{first} / ReAct: " + "; ".join(
        f"N={n}: dependency {v['dependency_length']:.2f}, uncached prompt {v['uncached_prompt_tokens']:.2f}, "
        f"planner ctx {v['planner_context']:.2f}" for n, v in ratios.items()))
    dep = {n: v["dependency_length"] for n, v in ratios.items()}
    ns = sorted(dep)
    falling = all(dep[a] >= dep[b] for a, b in zip(ns, ns[1:]) if a >= 4)
    if first == "hymem" and 16 in dep:
        print(f"target: dependency length ratio at N=16 <= 1/3: {dep[16]:.3f} "
              f"({'met' if dep[16] <= 1 / 3 else 'NOT met'}); falling with N from N=4: {'yes' if falling else 'no'}")
    write_json(args.out, {"rows": rows, f"{first}_over_react": ratios, "slots": args.slots, "cache_rows": args.rows,
                          "wall_s": time.perf_counter() - t0})


if __name__ == "__main__":
    main()
