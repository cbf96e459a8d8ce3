"""HyMem's evaluation: HyMem and the flat baselines on a registered benchmark
(`activemem_jax.tasks`: synthetic, gaia, browsecomp_plus), several tasks in flight.

    from hymem import evaluate
    summary = evaluate.evaluate(cfg)              # cfg: configs/agents_synthetic.py
    summary = evaluate.evaluate(cfg, client=...)  # any `complete(messages, **sampling)` client

`python -m launch.eval_agents` is the command line over it.

Writes under cfg.out_dir: traces/<agent>/<task>[.trial<k>].jsonl (every model call with its
context space and tokens, every tool call, context sizes after every turn, folds),
results.jsonl, summary.json, and PNG plots (context growth as the HyMem paper's
Figure 4; accuracy vs tokens and vs tool calls as its Figure 3).

Nothing finished is lost: each task's row is appended to results.jsonl (with its error
counts) as soon as it finishes, and a re-run skips the (agent, task, trial) runs already
there. `trials` (the paper's A.1: at least 3) runs every task that many times, trial
k >= 1 sampling with seed + k; the summary has each agent's Pass@1 mean over trials and their
standard deviation, and its Pass@1 per group of the task family (N objectives, a level). A task that raises is recorded with its error and retried by the next
run. A dead endpoint (`model.max_consecutive_failures` failed calls in a row, after
retries with backoff) raises `EndpointDown`; finished rows and the summary are kept.

The config is checked at the start (`hymem.run_config`); its `data` section names the
task family and its files with the fields ActiveMem's configs use, and its options
(bad_rows, text_only, balance, retrieval_url) are the task families'
(activemem_jax/tasks/agents.py, synthetic.py); a task's tools are the family's search over
its corpus and parse_file over the task's own attachment only (`hymem.tools.task_toolbox`,
docs/design_hymem.md#benchmark-hygiene).

Importing this module imports no JAX.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import statistics
import sys
import time


def make_client(cfg):
    from hymem.llm import EngineClient, OpenAIClient

    if cfg.model.base_url:
        return OpenAIClient(cfg.model.base_url, model=cfg.model.name or None, api_key=cfg.model.api_key or None,
                            timeout=cfg.model.get("timeout", 600.0))
    return EngineClient.from_config(cfg)


def guard(client, cfg):
    """Retries with backoff and the consecutive-failure abort (`hymem.llm.GuardedClient`)."""
    from hymem.llm import GuardedClient

    if isinstance(client, GuardedClient):
        return client
    m = cfg.model
    return GuardedClient(client, retries=m.get("retries", 2), backoff_s=m.get("backoff_s", 1.0),
                         max_consecutive_failures=m.get("max_consecutive_failures", 3))


def make_aux(cfg, client):
    """The auxiliary model (phi(o | d), paper A.2): config `aux` names an endpoint; empty:
    the main client."""
    aux = cfg.get("aux")
    if not aux or not aux.get("base_url"):
        return client
    from hymem.llm import OpenAIClient

    return guard(OpenAIClient(aux.base_url, model=aux.get("name") or None, api_key=aux.get("api_key") or None,
                              timeout=aux.get("timeout", 600.0)), cfg)


def make_agent(name: str, client, tools, cfg, aux=None):
    """The agent registered as `name` (`hymem.protocol`): hymem, hymem_no_iso,
    hymem_no_memory, react, summary, resum, base, amem, thread."""
    from hymem.protocol import build

    return build(name, client, tools, cfg, aux)


ERROR_EVENTS = {"model_error": "model_errors", "invalid_action": "invalid_actions",
                "memory_failure": "memory_failures", "context_guard": "context_guards"}


def trial_config(cfg, trial: int):
    """cfg for one trial: trial 0 is the run as configured; trial k >= 1 samples with seed
    (sampling.seed or 0) + k, so that trials at temperature > 0 differ and each reproduces."""
    if trial == 0:
        return cfg
    out = cfg.copy_and_resolve_references() if hasattr(cfg, "copy_and_resolve_references") else dict(cfg)
    sampling = dict(out["sampling"])
    sampling["seed"] = int(sampling.get("seed") or 0) + trial
    out["sampling"] = sampling
    return out


def run_one(agent_name, task, client, tools, cfg, aux=None, trial: int = 0, score=None):
    """One (agent, task, trial): its row, with error counts; the trace written beside it.
    score(task, answer): the task family's scorer (default: exact match per question)."""
    from activemem_jax.tasks import answer_score
    from hymem.llm import EndpointDown

    agent = make_agent(agent_name, client, tools, trial_config(cfg, trial), aux=aux)
    t0 = time.perf_counter()
    try:
        result = agent.run(task["question"])
    except EndpointDown:
        raise
    except Exception as e:  # a bug must cost this task, not the evaluation; the next run retries it
        return {"agent": agent_name, "task": task["id"], "trial": trial, "answer": "", "confidence": None,
                "score": 0.0, "error": f"{type(e).__name__}: {e}"[:500],
                "wall_s": round(time.perf_counter() - t0, 3)}
    wall = time.perf_counter() - t0
    calls = [e for e in result.trace if e["type"] == "model_call"]
    space = agent.persistent_space  # the context that lives through the task (Figure 4's curve)
    planner = [e["prompt_tokens"] + e["completion_tokens"] for e in calls if e["space"] == space]
    row = {"agent": agent_name, "task": task["id"], "trial": trial, "space": space, "answer": result.answer,
           "confidence": result.confidence,
           "score": (score or answer_score)(task, result.answer),
           "tokens": sum(e["prompt_tokens"] + e["completion_tokens"] for e in calls),
           "model_calls": len(calls), "tool_calls": sum(e["type"] == "tool_call" for e in result.trace),
           "peak_planner_context": max(planner, default=0), "planner_turns": len(planner),
           "wall_s": round(wall, 3),
           "folds": sum(e["type"] == "fold" for e in result.trace),
           "tool_errors": sum(e["type"] == "tool_call" and not e["ok"] for e in result.trace),
           **{key: sum(e["type"] == kind for e in result.trace) for kind, key in ERROR_EVENTS.items()}}
    path = trace_path(cfg.out_dir, agent_name, task["id"], trial)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for event in result.trace:
            f.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
    return row


def trace_path(out_dir: str, agent: str, task, trial: int = 0) -> str:
    return os.path.join(out_dir, "traces", agent, f"{task}.jsonl" if not trial else f"{task}.trial{trial}.jsonl")


def context_curve(trace: list, space: str) -> dict:
    """The paper's Figure 4, per call of the persistent context `space` (task progress):
    "context", that call's prompt tokens (HyMem: the planner's); "total", the tokens of
    every context space so far (HyMem-Total: planner, executor, isolated, memory and
    distillation calls together), which keeps growing while the planner's stays flat."""
    context, total, running = [], [], 0
    for e in trace:
        if e["type"] != "model_call":
            continue
        running += e["prompt_tokens"] + e["completion_tokens"]
        if e["space"] == space:
            context.append(e["prompt_tokens"])
            total.append(running)
    return {"context": context, "total": total}


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
            if r.get("trial", 0):  # Figure 4 is drawn from the first trial of each task
                continue
            with open(trace_path(out_dir, name, r["task"])) as f:
                trace = [json.loads(line) for line in f]
            for key, values in context_curve(trace, r.get("space", name)).items():
                series.setdefault(key, []).extend(values)  # tasks concatenated, as the paper does
        line = ax.plot(series.get("context", []), label=name)[0]
        if name.startswith("hymem"):  # HyMem-Total, dotted
            ax.plot(series.get("total", []), linestyle=":", color=line.get_color(), label=f"{name}-total")
    ax.set_xlabel("task progress: calls of the persistent context (tasks concatenated)")
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


def summarize(rows, group_of: dict | None = None) -> dict:
    """Per agent: means over its tasks (a task that raised scores 0 and is counted in
    `task_errors`) and the error counts summed. group_of: {task id: group}, the task
    family's grouping (N objectives, a difficulty level), adds `pass@1_by_group`."""
    out = {}
    for name in sorted({r["agent"] for r in rows}):
        rs = [r for r in rows if r["agent"] == name]
        mean = lambda key: sum(r.get(key) or 0 for r in rs) / len(rs)  # noqa: E731
        confident = [r["confidence"] for r in rs if isinstance(r.get("confidence"), (int, float))]
        by_trial = {}
        for r in rs:
            by_trial.setdefault(r.get("trial", 0), []).append(r.get("score") or 0)
        trial_means = [sum(v) / len(v) for _, v in sorted(by_trial.items())]
        spread = statistics.stdev(trial_means) if len(trial_means) > 1 else 0.0
        out[name] = {"tasks": len(rs) // max(len(by_trial), 1), "trials": len(by_trial),
                     "pass@1": mean("score"), "pass@1_std": spread, "pass@1_per_trial": trial_means,
                     "tokens": mean("tokens"),
                     "planner_turns": mean("planner_turns"),  # Table 2's "Plan."
                     "confidence": sum(confident) / len(confident) if confident else None,  # "Conf."
                     "tool_calls": mean("tool_calls"),
                     "peak_planner_context": max(r.get("peak_planner_context") or 0 for r in rs),
                     "wall_s": mean("wall_s"), "task_errors": sum(bool(r.get("error")) for r in rs),
                     **{key: sum(r.get(key) or 0 for r in rs)
                        for key in ("model_errors", "tool_errors", "invalid_actions", "memory_failures",
                                    "context_guards")}}
        groups = {str(r["task"]): (group_of or {}).get(str(r["task"])) for r in rs}
        if any(g is not None for g in groups.values()):
            by_group: dict = {}
            for r in rs:
                by_group.setdefault(str(groups[str(r["task"])]), []).append(r.get("score") or 0)
            out[name]["pass@1_by_group"] = {k: sum(v) / len(v) for k, v in sorted(by_group.items())}
    return out


def read_rows(path: str) -> list[dict]:
    """results.jsonl as rows, the last row of each (agent, task, trial) winning; a torn
    last line (a killed run) is skipped."""
    latest = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    row = json.loads(line)
                    latest[(row["agent"], str(row["task"]), row.get("trial", 0))] = row
                except (ValueError, KeyError, TypeError):
                    continue
    return list(latest.values())


def evaluate(cfg, client=None) -> dict:
    """Every (agent, task, trial) not finished in cfg.out_dir; the summary (see `summarize`)."""
    from activemem_jax.tasks import build_section
    from hymem.llm import EndpointDown
    from hymem.run_config import load
    from hymem.tools import search_tools, task_toolbox

    load(cfg)  # every field checked before a model is read (a ConfigError names the first bad one)
    ts = build_section(cfg.data, where="data")
    tasks = ts.tasks
    search = search_tools(ts.search, list(ts.documents)) if ts.search is not None else []  # GAIA: files only
    client = guard(client or make_client(cfg), cfg)
    aux = make_aux(cfg, client)
    os.makedirs(cfg.out_dir, exist_ok=True)
    results_path = os.path.join(cfg.out_dir, "results.jsonl")
    done = {(r["agent"], str(r["task"]), r.get("trial", 0)) for r in read_rows(results_path) if not r.get("error")}
    trials = int(cfg.get("trials", 1))
    jobs = [(a, t, k) for k in range(trials) for a in cfg.agents for t in tasks if (a, str(t["id"]), k) not in done]
    down = None
    from rich.progress import Progress

    with Progress(transient=not sys.stderr.isatty()) as progress, \
            concurrent.futures.ThreadPoolExecutor(cfg.concurrency) as pool, \
            open(results_path, "a", encoding="utf-8") as out:
        bar = progress.add_task(f"agents ({len(done)} done before)", total=len(jobs))
        futures = [pool.submit(run_one, a, t, client, task_toolbox(t, search), cfg, aux, k, ts.score)
                   for a, t, k in jobs]
        for fut in concurrent.futures.as_completed(futures):
            try:
                row = fut.result()
            except EndpointDown as e:
                down = down or e
                for f in futures:
                    f.cancel()
                continue
            except concurrent.futures.CancelledError:
                continue
            out.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            out.flush()
            progress.advance(bar)
    rows = read_rows(results_path)
    summary = summarize(rows, {str(t["id"]): ts.group(t) for t in tasks})
    with open(os.path.join(cfg.out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    if down is not None:
        raise down
    plot([r for r in rows if not r.get("error")], cfg.out_dir)
    return summary


def format_summary(summary: dict) -> str:
    """The summary as the table the command line prints (Table 2's columns)."""
    lines = [f"{'agent':16} {'tasks':>5} {'trials':>6} {'pass@1':>7} {'+-':>6} {'plan.':>6} {'conf.':>6} "
             f"{'tokens':>8} {'tools':>6} {'peak ctx':>9} {'wall s':>7}"]
    for name, s in summary.items():
        conf = f"{s['confidence']:>6.2f}" if s["confidence"] is not None else f"{'-':>6}"
        lines.append(f"{name:16} {s['tasks']:>5} {s['trials']:>6} {s['pass@1']:>7.3f} {s['pass@1_std']:>6.3f} "
                     f"{s['planner_turns']:>6.1f} {conf} {s['tokens']:>8.0f} {s['tool_calls']:>6.1f} "
                     f"{s['peak_planner_context']:>9} {s['wall_s']:>7.1f}")
    return "\n".join(lines)
