"""End to end: the embedded model behind the real server runs HyMem and ReAct on 3
synthetic tasks within budgets and writes traces, results and plots (accuracy is
recorded, not asserted, for a 135M model)."""

import json
import os
import subprocess
import sys

import pytest

from activemem_jax.engine import Engine
from activemem_jax.server import make_app
from hymem.llm import OpenAIClient
from tests.serving import running

pytestmark = pytest.mark.slow


def test_hymem_and_react_on_the_synthetic_benchmark(tmp_path, embedded_model):
    import configs.agents_synthetic as base
    from hymem.evaluate import evaluate

    cfg = base.get_config()
    cfg.agents = ("hymem", "react")
    cfg.data.n_objectives = (1,)
    cfg.data.n_tasks = 3
    cfg.hymem.update(dict(planner_turns=2, execute_turns=2, max_iso_reasoning=1, max_iso_reasoning_turn=1,
                          context_window=3000))
    cfg.baselines.update(dict(max_turns=3, context_window=3000))
    cfg.sampling.max_tokens = 40
    cfg.concurrency = 6
    cfg.out_dir = str(tmp_path / "run")
    with Engine(embedded_model, max_slots=8, max_len=3072) as eng, running(make_app(eng, "m")) as url:
        summary = evaluate(cfg, client=OpenAIClient(url + "/v1", model="m"))
        cli = subprocess.run([sys.executable, "-m", "hymem", "Who founded the first company?", "--base-url",
                              url + "/v1", "--model", "m", "--planner-turns", "1", "--execute-turns", "1",
                              "--max-tokens", "24", "--constrained", "off"],  # grammars: test_constrained_protocol
                             capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr[-2000:]
    assert "--- planner" in cli.stderr and "[hymem] planner turn 1/1: " in cli.stderr  # turns shown live
    out = json.loads(cli.stdout)  # stdout is the JSON result alone
    assert isinstance(out["answer"], str) and isinstance(out["forced"], bool) and out["forced"] == ("why" in out)
    assert set(summary) == {"hymem", "react"} and all(s["tasks"] == 3 for s in summary.values())
    rows = [json.loads(line) for line in open(tmp_path / "run" / "results.jsonl")]
    assert len(rows) == 6 and all(0.0 <= r["score"] <= 1.0 for r in rows)
    for r in rows:
        trace = [json.loads(line) for line in open(tmp_path / "run" / "traces" / r["agent"] / f"{r['task']}.jsonl")]
        calls = [e for e in trace if e["type"] == "model_call"]
        assert trace[-1]["type"] == "answer" and calls
        if r["agent"] == "hymem":
            assert sum(e["space"] == "planner" for e in calls) <= 3  # 2 turns + a forced answer
            assert sum(e["space"] == "executor" for e in calls) <= 2 * 3
        else:
            assert sum(e["space"] == "react" for e in calls) <= 3
        assert not [e for e in trace if e["type"] == "model_error"]
    for png in ("context_growth.png", "accuracy_vs_tokens.png", "accuracy_vs_tool_calls.png"):
        assert os.path.getsize(tmp_path / "run" / png) > 1000
