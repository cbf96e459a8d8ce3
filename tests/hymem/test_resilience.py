"""Evaluation that cannot be lost: endpoint failures (HTTP 200 with a non-JSON body,
5xx, a dead server, an engine fault of any type), retries with backoff and a clear
abort, results appended per task and resumed, error counts, context guards."""

import http.server
import json
import socket
from contextlib import contextmanager

import pytest

from hymem import HyMemAgent, HyMemConfig, ScriptedClient
from hymem.llm import EndpointDown, EngineClient, GuardedClient, ModelError, OpenAIClient, traced_complete
from tests.hymem.test_agent import ANSWER, RESULTS, TASK, toolbox
from tests.serving import handler_server


@contextmanager
def serving(replies):
    """A local HTTP server answering POSTs from `replies`: (status, body bytes), in turn
    (the last repeats). Yields (base_url, hits)."""
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status, body = replies[min(len(hits), len(replies) - 1)]
            hits.append(status)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with handler_server(Handler) as url:
        yield f"{url}/v1", hits


def _ok(text="<answer>1821</answer>"):
    return 200, json.dumps({"choices": [{"message": {"content": text}}],
                            "usage": {"prompt_tokens": 7, "completion_tokens": 3}}).encode()


def _dead_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return f"http://127.0.0.1:{port}/v1"


def test_http_200_with_a_non_json_body_is_a_failed_call_not_a_crash():
    with serving([(200, b"<html>upstream gone</html>"), (200, b'{"choices": "no"}'), _ok()]) as (url, hits):
        client = OpenAIClient(url, timeout=5)
        for _ in range(2):
            with pytest.raises(ModelError) as e:
                client.complete([{"role": "user", "content": "hi"}])
            assert not e.value.transient
        assert client.complete([{"role": "user", "content": "hi"}]).text == "<answer>1821</answer>"
        usage, trace = {}, []
        out = traced_complete(OpenAIClient(url, timeout=5), [], "planner", {}, usage, trace)
        assert out.text == "<answer>1821</answer>"


def test_transient_errors_are_retried_with_backoff():
    sleeps = []
    with serving([(503, b"busy"), (429, b"slow down"), _ok()]) as (url, hits):
        client = GuardedClient(OpenAIClient(url, timeout=5), retries=2, backoff_s=0.5, sleep=sleeps.append)
        assert client.complete([{"role": "user", "content": "hi"}]).text == "<answer>1821</answer>"
    assert hits == [503, 429, 200] and sleeps == [0.5, 1.0] and client.consecutive_failures == 0
    with serving([(400, b"prompt too long"), _ok()]) as (url, hits):  # permanent: not retried
        client = GuardedClient(OpenAIClient(url, timeout=5), retries=2, backoff_s=0, sleep=sleeps.append)
        with pytest.raises(ModelError):
            client.complete([{"role": "user", "content": "hi"}])
        assert hits == [400] and client.consecutive_failures == 0  # a refused request: the endpoint is fine


def test_engine_failures_of_any_type_are_failed_calls(monkeypatch):
    import sys
    import types

    # a stand-in for activemem_jax.engine, so this test imports no JAX
    monkeypatch.setitem(sys.modules, "activemem_jax.engine", types.SimpleNamespace(SamplingParams=dict))

    class Future:
        def __init__(self, error):
            self.error = error

        def result(self):
            raise self.error

    class Engine:
        def __init__(self):
            self.errors = iter([RuntimeError("XLA fault"), KeyError("slot"), MemoryError(), ValueError("too long")])

        def submit(self, messages, params):
            error = next(self.errors)
            if isinstance(error, KeyError):
                raise error  # raised by submit itself
            return Future(error)

    client = EngineClient(Engine())
    for _ in range(4):
        with pytest.raises(ModelError):
            client.complete([{"role": "user", "content": "hi"}])


def test_a_dead_server_stops_the_run_quickly_and_clearly():
    calls = []
    client = GuardedClient(OpenAIClient(_dead_url(), timeout=2), retries=1, backoff_s=0,
                           max_consecutive_failures=3, sleep=calls.append)
    agent = HyMemAgent(client, toolbox(), HyMemConfig())
    with pytest.raises(EndpointDown, match="failed 3 calls in a row"):
        agent.run("q")
    assert len(calls) == 3  # one retry for each of the 3 failed calls, then the abort
    with pytest.raises(EndpointDown):  # every later call aborts at once
        client.complete([])


def _eval_cfg(tmp_path, **model):
    import configs.agents_synthetic as base

    cfg = base.get_config()
    cfg.agents = ("hymem", "react")
    cfg.data.update(dict(n_entities=50, n_objectives=(1,), n_tasks=2))
    cfg.model.update(dict(backoff_s=0.0, **model))
    cfg.concurrency = 2
    cfg.out_dir = str(tmp_path / "out")
    return cfg


def _rows(tmp_path):
    return [json.loads(x) for x in open(tmp_path / "out" / "results.jsonl")]


def test_results_are_appended_per_task_and_a_rerun_skips_them(tmp_path):
    from hymem.evaluate import evaluate

    cfg = _eval_cfg(tmp_path)
    def script(tag, messages):  # each task: one invalid action, then a clean finish
        last = messages[-1]["content"]
        if tag == "planner":
            return TASK if len(messages) == 2 else ANSWER
        if tag == "executor":
            return "<tool_call>{bad}</tool_call>" if last.startswith("Search target") else RESULTS
        return "no action" if len(messages) == 2 else ANSWER

    first = evaluate(cfg, client=ScriptedClient(script))
    rows = _rows(tmp_path)
    assert len(rows) == 4 and {r["agent"] for r in rows} == {"hymem", "react"}
    for r in rows:
        assert r["invalid_actions"] == 1 and r["model_errors"] == 0 and r["tool_errors"] == 0
        assert {"memory_failures", "context_guards"} <= set(r)

    class Untouchable:
        def complete(self, *a, **k):
            raise AssertionError("a finished task was run again")

    assert evaluate(cfg, client=Untouchable()) == first
    assert len(_rows(tmp_path)) == 4


def test_a_dead_server_keeps_finished_rows_and_the_rerun_finishes_the_rest(tmp_path):
    from hymem.evaluate import evaluate

    cfg = _eval_cfg(tmp_path, max_consecutive_failures=2, retries=0)
    cfg.concurrency = 1
    calls = []

    def script(tag, messages):  # the server dies after 2 calls (2 tasks answered)
        calls.append(tag)
        if len(calls) > 2:
            raise ModelError("connection refused", transient=True)
        return {"planner": ANSWER, "react": ANSWER}.get(tag, RESULTS)

    with pytest.raises(EndpointDown, match="re-run"):
        evaluate(cfg, client=ScriptedClient(script))
    done = {(r["agent"], r["task"]) for r in _rows(tmp_path)}
    assert len(done) == 2 and len(calls) == 2 + 2  # 2 failed calls, then the abort
    summary = json.load(open(tmp_path / "out" / "summary.json"))
    assert sum(s["tasks"] for s in summary.values()) == len(done)
    rerun = ScriptedClient({"planner": [ANSWER], "react": [ANSWER]})
    evaluate(cfg, client=rerun)
    assert len({(r["agent"], r["task"]) for r in _rows(tmp_path)}) == 4
    assert len(rerun.calls) == 4 - len(done)  # one call per unfinished task


def test_a_task_that_raises_is_recorded_and_retried(tmp_path, monkeypatch):
    import hymem.evaluate as ev

    cfg = _eval_cfg(tmp_path)
    cfg.agents = ("react",)
    real = ev.make_agent

    def broken(name, client, tools, cfg, aux=None):
        agent = real(name, client, tools, cfg, aux=aux)
        agent.run = lambda q: 1 / 0
        return agent

    monkeypatch.setattr(ev, "make_agent", broken)
    summary = ev.evaluate(cfg, client=ScriptedClient({"react": [ANSWER]}))
    assert summary["react"]["task_errors"] == 2 and all("ZeroDivisionError" in r["error"] for r in _rows(tmp_path))
    monkeypatch.setattr(ev, "make_agent", real)
    summary = ev.evaluate(cfg, client=ScriptedClient({"react": [ANSWER]}))
    assert summary["react"]["task_errors"] == 0 and summary["react"]["tasks"] == 2


def test_context_guard_ends_a_session_that_would_overflow():
    huge = "<think>" + "word " * 5000 + "</think>"  # each executor reply adds 5,000 tokens
    client = ScriptedClient({"planner": [TASK, "<isoReason><prompt>p</prompt></isoReason>", ANSWER],
                             "executor": [huge], "iso": [huge]})
    result = HyMemAgent(client, toolbox(), HyMemConfig(context_window=8000, fold_executor_failures=10)).run("q")
    guards = [e for e in result.trace if e["type"] == "context_guard"]
    assert {g["space"] for g in guards} == {"executor", "iso"}
    assert all(g["prompt_tokens"] > 8000 for g in guards)
    assert result.usage["executor"]["calls"] == 2 and result.usage["iso"]["calls"] == 2
    assert any("context was full" in m["content"] for m in client.messages_for("planner")[-1])
