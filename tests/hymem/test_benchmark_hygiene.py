"""Benchmark hygiene (docs/design_hymem.md#benchmark-hygiene): no tool reads benchmark metadata
(the gold answers); parse_file reads only the task's attachment; the question names it;
the A.1 text-only filter."""

import json
import os

import pytest

from hymem import ScriptedClient

GOLD = {"t1": "GOLD-PELICAN-7731", "t2": "GOLD-HERON-1193", "t3": "GOLD-EGRET-5520"}


@pytest.fixture
def gaia(tmp_path):
    d = tmp_path / "gaia"
    d.mkdir()
    (d / "t1.txt").write_text("The code word is PELICAN.")
    (d / "t3.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    rows = [{"task_id": "t1", "Question": "What is the code word in the file?", "Level": 1,
             "Final answer": GOLD["t1"], "file_name": "t1.txt"},
            {"task_id": "t2", "Question": "Who wrote Velmor's charter?", "Level": 2,
             "Final answer": GOLD["t2"], "file_name": ""},
            {"task_id": "t3", "Question": "What bird is in the picture?", "Level": 1,
             "Final answer": GOLD["t3"], "file_name": "t3.png"}]
    (d / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "metadata.parquet").write_text("gold: " + " ".join(GOLD.values()))
    return d


def _cfg(gaia, tmp_path, **bench):
    import configs.agents_synthetic as base

    cfg = base.get_config()
    cfg.data.update({"name": "gaia", "path": str(gaia), "n_tasks": 10, **bench})
    cfg.out_dir = str(tmp_path / "out")
    return cfg


def _probes(gaia):
    meta = ["metadata.jsonl", "metadata.parquet"]
    out = [str(gaia), ".", "..", "/", "*", "doc://metadata.jsonl", "t1.txt/../metadata.jsonl"]
    for m in meta:
        out += [m, f"./{m}", f"../gaia/{m}", str(gaia / m), f"t1.txt/../{m}", f"file://{gaia / m}"]
    return out + list(GOLD.values())


def test_no_tool_of_any_task_can_read_the_metadata(gaia, tmp_path):
    from activemem_jax.tasks import build_section
    from hymem.tools import task_toolbox

    ts = build_section(_cfg(gaia, tmp_path).data)
    tasks = ts.tasks
    assert [t["id"] for t in tasks] == ["t1", "t2", "t3"] and not ts.documents and ts.search is None
    assert list(ts.by_group()) == [1, 2]  # GAIA's levels
    for task in tasks:
        tools = task_toolbox(task, [])
        for tool in tools.tools.values():
            for probe in _probes(gaia):
                ok, text = tools.call(tool.name, {arg: probe for arg in tool.inputs})
                leaked = text.replace(probe, "")  # an error message may echo the argument
                assert not any(g in leaked for g in GOLD.values()), (task["id"], tool.name, probe)
                assert not ok or probe == "t1.txt"
    t1 = task_toolbox(tasks[0], [])
    assert t1.call("parse_file", {"file_path": "t1.txt"}) == (True, "The code word is PELICAN.")
    assert "Provided files: t1.txt" in t1.describe()
    assert "parse_file" not in task_toolbox(tasks[1], []).tools  # no attachment, no file tool


def test_the_question_names_the_attachment_and_the_run_never_sees_gold(gaia, tmp_path):
    from hymem.evaluate import evaluate

    cfg = _cfg(gaia, tmp_path, n_tasks=1)
    cfg.agents = ("hymem", "react")
    grab = '<tool_call>{"name": "parse_file", "arguments": {"file_path": "metadata.jsonl"}}</tool_call>'
    grab_abs = ('<tool_call>{"name": "parse_file", "arguments": {"file_path": "%s"}}</tool_call>'
                % (gaia / "metadata.jsonl"))
    read = '<tool_call>{"name": "parse_file", "arguments": {"file_path": "t1.txt"}}</tool_call>'
    client = ScriptedClient({"planner": ["<task>read the attached file</task>", "<answer>x</answer>"],
                             "executor": [grab, grab_abs, read, "<results>FINDINGS: PELICAN\nSTATUS: success</results>"],
                             "react": [grab, grab_abs, read, "<answer>PELICAN</answer>"]})
    evaluate(cfg, client=client)
    seen = json.dumps(client.calls)
    assert "PELICAN" in seen and not any(g in seen for g in GOLD.values())
    assert "attached file: t1.txt" in client.messages_for("planner")[0][1]["content"]
    assert "attached file: t1.txt" in client.messages_for("react")[0][1]["content"]
    assert "Provided files: t1.txt" in client.messages_for("executor")[0][0]["content"]
    for agent in ("hymem", "react"):
        trace = [json.loads(x) for x in open(tmp_path / "out" / "traces" / agent / "t1.jsonl")]
        reads = [(e["arguments"]["file_path"], e["ok"]) for e in trace if e["type"] == "tool_call"]
        assert [ok for _, ok in reads] == [False, False, True]


@pytest.mark.parametrize("text_only,ids", [("", ["t1", "t2", "t3"]), ("no_attachment", ["t2"]),
                                           ("readable_attachment", ["t1", "t2"])])
def test_text_only_filter(gaia, tmp_path, text_only, ids):
    from activemem_jax.tasks import build_section

    tasks = build_section(_cfg(gaia, tmp_path, text_only=text_only).data).tasks
    assert [t["id"] for t in tasks] == ids
    assert all(os.path.basename(f) in t["question"] for t in tasks for f in t["files"])


def test_the_runs_retrieval_server_is_the_search_of_every_agent_benchmark(gaia, tmp_path):
    from activemem_jax.data.retrieval import BM25Retriever, RemoteRetriever
    from activemem_jax.tasks import build_section

    cfg = _cfg(gaia, tmp_path)
    assert build_section(cfg.data).search is None  # GAIA without a server: files only
    cfg.data.retrieval_url = "http://127.0.0.1:9/"
    ts = build_section(cfg.data)
    assert isinstance(ts.search, RemoteRetriever) and ts.search.url == "http://127.0.0.1:9/retrieve"
    cfg.data.update(name="synthetic", n_entities=50, n_objectives=(1,), n_tasks=1)
    assert isinstance(build_section(cfg.data).search, RemoteRetriever)
    cfg.data.retrieval_url = ""
    assert isinstance(build_section(cfg.data).search, BM25Retriever)
