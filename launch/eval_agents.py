"""Evaluate HyMem and the flat baselines on a benchmark, several tasks in flight.

    python -m launch.eval_agents --config configs/agents_synthetic.py [--config.n_tasks=20]

Writes under config.out_dir: traces/<agent>/<task>.jsonl (every model call with its
context space and tokens, every tool call, context sizes after every turn, folds),
results.jsonl, summary.json, and PNG plots (context growth as the HyMem paper's
Figure 4; accuracy vs tokens and vs tool calls as its Figure 3).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import sys
import time

from absl import app
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", "configs/agents_synthetic.py", "agents config file")


def load_tasks(cfg):
    """[{id, question, answers: [[gold...]...]}] for the configured benchmark."""
    b = cfg.benchmark
    if b.name == "synthetic":
        from activemem_jax.data import synthetic_world

        world = synthetic_world.generate(seed=b.seed, n_entities=b.n_entities)
        tasks = []
        for n in b.n_objectives:
            tasks += synthetic_world.make_tasks(world, b.split, n, b.n_tasks, seed=b.seed)
        return tasks, world.documents, []
    if b.name == "gaia":
        from activemem_jax.data.loaders import load_gaia

        rows = load_gaia(b.path)[: b.n_tasks]
        return ([{"id": r["id"], "question": r["question"], "answers": [[r["answer"]]], "gold": r["answer"]}
                 for r in rows], [], [b.path])
    if b.name == "browsecomp_plus":
        from activemem_jax.data.loaders import load_browsecomp_plus

        data = load_browsecomp_plus(b.queries, b.corpus, canary=b.canary or None)
        rows = data["queries"][: b.n_tasks]
        return ([{"id": r["id"], "question": r["question"], "answers": [r["answers"]]} for r in rows],
                data["corpus"], [])
    raise ValueError(f"benchmark.name={b.name!r}: synthetic, gaia or browsecomp_plus")


def score(task, answer: str, benchmark: str) -> float:
    from activemem_jax import metrics

    if benchmark == "gaia":
        return float(metrics.gaia_score(answer, task["gold"]))
    n = len(task["answers"])
    return metrics.multi_objective_score(answer, task["answers"]) / n if n > 1 else \
        metrics.exact_match(answer, task["answers"][0])


def make_client(cfg):
    from hymem.llm import EngineClient, OpenAIClient

    if cfg.model.base_url:
        return OpenAIClient(cfg.model.base_url, model=cfg.model.name or None, api_key=cfg.model.api_key or None)
    return EngineClient.from_model(cfg.model, max_slots=cfg.model.max_slots, max_len=cfg.model.max_len)


def make_agent(name: str, client, tools, cfg):
    from hymem import HyMemAgent, HyMemConfig
    from hymem.baselines import BaselineConfig, FlatAgent

    sampling = dict(cfg.sampling)
    if name.startswith("hymem"):
        h = HyMemConfig(**dict(cfg.hymem), sampling=sampling)
        if name == "hymem_no_iso":
            h.isolated_reasoning = False
        if name == "hymem_no_memory":
            h.memory_management = False
        return HyMemAgent(client, tools, h)
    return FlatAgent(client, tools, BaselineConfig(mode=name, sampling=sampling, **dict(cfg.baselines)))


def run_one(agent_name, task, client, tools, cfg):
    agent = make_agent(agent_name, client, tools, cfg)
    t0 = time.perf_counter()
    result = agent.run(task["question"])
    wall = time.perf_counter() - t0
    calls = [e for e in result.trace if e["type"] == "model_call"]
    planner = [e["prompt_tokens"] + e["completion_tokens"] for e in calls if e["space"] in ("planner",) + ("react", "summary", "resum")]
    row = {"agent": agent_name, "task": task["id"], "answer": result.answer, "confidence": result.confidence,
           "score": score(task, result.answer, cfg.benchmark.name),
           "tokens": sum(e["prompt_tokens"] + e["completion_tokens"] for e in calls),
           "model_calls": len(calls), "tool_calls": sum(e["type"] == "tool_call" for e in result.trace),
           "peak_planner_context": max(planner, default=0), "wall_s": round(wall, 3),
           "folds": sum(e["type"] == "fold" for e in result.trace)}
    path = os.path.join(cfg.out_dir, "traces", agent_name, f"{task['id']}.jsonl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for event in result.trace:
            f.write(json.dumps(event, ensure_ascii=False) + "\n")
    return row


def context_curve(trace: list, agent_name: str) -> dict:
    """Context per model call of the persistent context: HyMem planner and HyMem total
    (every space), flat agents' single context."""
    curves = {}
    if agent_name.startswith("hymem"):
        curves["planner"] = [e["prompt_tokens"] for e in trace if e["type"] == "model_call" and e["space"] == "planner"]
        total, run = [], 0
        for e in trace:
            if e["type"] == "model_call":
                run += e["prompt_tokens"] + e["completion_tokens"]
                total.append(run)
        curves["total"] = total
    else:
        curves["context"] = [e["prompt_tokens"] for e in trace if e["type"] == "model_call" and e["space"] == agent_name]
    return curves


def plot(rows, out_dir):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agents = sorted({r["agent"] for r in rows})
    fig, ax = plt.subplots(figsize=(7, 4))
    for name in agents:
        series = {}
        for r in rows:
            if r["agent"] != name:
                continue
            with open(os.path.join(out_dir, "traces", name, f"{r['task']}.jsonl")) as f:
                trace = [json.loads(line) for line in f]
            for key, values in context_curve(trace, name).items():
                series.setdefault(key, []).extend(values)  # tasks concatenated, as the paper does
        for key, values in series.items():
            if key == "total":
                continue
            ax.plot(values, label=f"{name} {key}" if name.startswith("hymem") else name)
    ax.set_xlabel("model calls of the persistent context (tasks concatenated)")
    ax.set_ylabel("context tokens")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "context_growth.png"), dpi=120)
    plt.close(fig)
    for key, label in (("tokens", "total tokens per task"), ("tool_calls", "tool calls per task")):
        fig, ax = plt.subplots(figsize=(5, 4))
        for name in agents:
            rs = [r for r in rows if r["agent"] == name]
            ax.scatter([sum(r[key] for r in rs) / len(rs)], [sum(r["score"] for r in rs) / len(rs)], label=name)
        ax.set_xlabel(label)
        ax.set_ylabel("accuracy (Pass@1)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, f"accuracy_vs_{key}.png"), dpi=120)
        plt.close(fig)


def summarize(rows) -> dict:
    out = {}
    for name in sorted({r["agent"] for r in rows}):
        rs = [r for r in rows if r["agent"] == name]
        out[name] = {"tasks": len(rs), "pass@1": sum(r["score"] for r in rs) / len(rs),
                     "tokens": sum(r["tokens"] for r in rs) / len(rs),
                     "tool_calls": sum(r["tool_calls"] for r in rs) / len(rs),
                     "peak_planner_context": max(r["peak_planner_context"] for r in rs),
                     "wall_s": sum(r["wall_s"] for r in rs) / len(rs)}
    return out


def evaluate(cfg, client=None) -> dict:
    from hymem.tools import Toolbox, file_tool, search_tools
    from activemem_jax.data.retrieval import BM25Retriever, RemoteRetriever

    tasks, docs, roots = load_tasks(cfg)
    retriever = (RemoteRetriever(cfg.retrieval_url) if cfg.retrieval_url else
                 BM25Retriever(docs) if docs else None)  # GAIA without a corpus: files only
    tools = Toolbox((search_tools(retriever, docs) if retriever else []) + ([file_tool(roots)] if roots else []))
    client = client or make_client(cfg)
    os.makedirs(cfg.out_dir, exist_ok=True)
    jobs = [(a, t) for a in cfg.agents for t in tasks]
    rows = []
    from rich.progress import Progress

    with Progress(transient=not sys.stderr.isatty()) as progress, \
            concurrent.futures.ThreadPoolExecutor(cfg.concurrency) as pool:
        bar = progress.add_task("agents", total=len(jobs))
        futures = [pool.submit(run_one, a, t, client, tools, cfg) for a, t in jobs]
        for fut in concurrent.futures.as_completed(futures):
            rows.append(fut.result())
            progress.advance(bar)
    with open(os.path.join(cfg.out_dir, "results.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    summary = summarize(rows)
    with open(os.path.join(cfg.out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    plot(rows, cfg.out_dir)
    return summary


def main(argv):
    del argv
    cfg = _CONFIG.value
    summary = evaluate(cfg)
    print(f"{'agent':16} {'tasks':>5} {'pass@1':>7} {'tokens':>8} {'tools':>6} {'peak ctx':>9} {'wall s':>7}")
    for name, s in summary.items():
        print(f"{name:16} {s['tasks']:>5} {s['pass@1']:>7.3f} {s['tokens']:>8.0f} {s['tool_calls']:>6.1f} "
              f"{s['peak_planner_context']:>9} {s['wall_s']:>7.1f}")
    print(f"wrote {cfg.out_dir}")


if __name__ == "__main__":
    app.run(main)
