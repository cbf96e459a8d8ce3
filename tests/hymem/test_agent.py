"""HyMem with a scripted client: isolation, fold triggers, budgets, typed returns,
memory failures, and a fuzz of random model outputs."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activemem_jax.data.retrieval import BM25Retriever
from hymem import HyMemAgent, HyMemConfig, ScriptedClient, Toolbox, search_tools

MARKER = "ZX-MARKER-4417"
DOCS = [{"docid": "d1", "title": "Velmor", "text": f"Velmor was founded in 1821 by Ada Kest. {MARKER} footer."},
        {"docid": "d2", "title": "Ada Kest", "text": "Ada Kest was born in Ostra in 1790."}]
TASK = "<think>need data</think><task>find when Velmor was founded</task>"
SEARCH = '<think>s</think><tool_call>{"name": "web_search", "arguments": {"keywords": "Velmor"}}</tool_call>'
RESULTS = "<results>FINDINGS: founded 1821\nSOURCES: d1\nSTATUS: success\nGAPS: none</results>"
FAILED = "<results>FINDINGS: nothing\nSTATUS: failed\nGAPS: all</results>"
ANSWER = "<think>done</think><answer>1821</answer><confidence>0.8</confidence>"
EPISODE = json.dumps({"task_description": "EPISODE-SENTINEL", "key_events": [], "current_progress": "p"})
WORKING = json.dumps({"immediate_goal": "WORKING-SENTINEL", "current_challenges": "",
                      "active_hypotheses": [], "next_actions": []})
TOOLMEM = json.dumps({"tools_used": [{"tool_name": "web_search", "call_count": 1}],
                      "derived_rules": ["TOOL-SENTINEL"], "useful_sources": []})


def toolbox():
    return Toolbox(search_tools(BM25Retriever(DOCS)))


def agent(script, **cfg):
    client = ScriptedClient(script)
    return HyMemAgent(client, toolbox(), HyMemConfig(**cfg)), client


def folds(result):
    return [e["trigger"] for e in result.trace if e["type"] == "fold"]


def memory_script(**extra):
    return {"memory:episode": [EPISODE], "memory:working": [WORKING], "memory:tool": [TOOLMEM], **extra}


def test_raw_observations_never_reach_the_planner_and_results_do():
    a, client = agent({"planner": [TASK, ANSWER], "executor": [SEARCH, RESULTS]})
    result = a.run("When was Velmor founded?")
    assert result.answer == "1821" and result.confidence == 0.8
    executor_seen = " ".join(m["content"] for msgs in client.messages_for("executor") for m in msgs)
    assert MARKER in executor_seen  # the executor did read the raw document
    for msgs in client.messages_for("planner"):
        assert all(MARKER not in m["content"] for m in msgs)
    last = client.messages_for("planner")[-1]
    assert any(m["content"].startswith("<results>") and "FINDINGS: founded 1821" in m["content"]
               and "STATUS: success" in m["content"] for m in last)
    assert result.usage["planner"]["calls"] == 2 and result.usage["executor"]["calls"] == 2


def test_executor_sees_tool_memory_only_and_iso_sees_all():
    script = memory_script(planner=["<to_memory>", TASK,
                                    "<isoReason><description>check</description><prompt>verify year</prompt></isoReason>",
                                    ANSWER],
                           executor=[RESULTS], iso=["<return>CONCLUSION: 1821 KEY EVIDENCE: d1 "
                                                    "CONFIDENCE: 0.9 NOTES: none</return>"])
    a, client = agent(script)
    result = a.run("When was Velmor founded?")
    assert folds(result) == ["to_memory"]
    ex = " ".join(m["content"] for msgs in client.messages_for("executor") for m in msgs)
    assert "TOOL-SENTINEL" in ex and "EPISODE-SENTINEL" not in ex and "WORKING-SENTINEL" not in ex
    iso = " ".join(m["content"] for msgs in client.messages_for("iso") for m in msgs)
    assert all(s in iso for s in ("TOOL-SENTINEL", "EPISODE-SENTINEL", "WORKING-SENTINEL"))
    planner_last = client.messages_for("planner")[-1]
    ret = [m["content"] for m in planner_last if m["content"].startswith("<return>")]
    assert ret and "CONCLUSION: 1821" in ret[0] and "CONFIDENCE: 0.9" in ret[0]
    assert all(m["content"] != "<to_memory>" for m in planner_last[1:])  # history cleared by the fold


@pytest.mark.parametrize("trigger,cfg,planner,executor,turn", [
    ("executor_calls", dict(fold_executor_calls=3), [TASK] * 6 + [ANSWER], [RESULTS], 3),
    ("executor_failures", dict(fold_executor_failures=2), [TASK] * 6 + [ANSWER], [FAILED], 2),
    ("planner_turns", dict(fold_planner_turns=4), ["<think>hmm</think>"] * 6 + [ANSWER], [RESULTS], 4),
    ("tool_calls", dict(fold_tool_calls=4), [TASK] * 6 + [ANSWER], [SEARCH, SEARCH, RESULTS] * 6, 2),
])
def test_each_fold_trigger_fires_exactly_at_its_threshold(trigger, cfg, planner, executor, turn):
    script = memory_script(planner=planner, executor=executor)
    a, client = agent(script, **cfg)
    result = a.run("When was Velmor founded?")
    events = [e for e in result.trace if e["type"] == "fold"]
    assert events and events[0]["trigger"] == trigger
    assert events[0]["turn"] == turn
    assert all(e["trigger"] == trigger for e in events)


def test_context_utilization_fires_when_the_planner_context_crosses_99_percent():
    script = memory_script(planner=[TASK] * 6 + [ANSWER], executor=[RESULTS])
    probe, _ = agent(script, fold_executor_calls=100)
    sizes = [e["prompt_tokens"] + e["completion_tokens"] for e in probe.run("q").trace
             if e["type"] == "model_call" and e["space"] == "planner"]
    assert sizes[0] < sizes[1] < sizes[2]  # the planner context grows turn by turn
    window = (sizes[2] - 1) / 0.99  # crossed on the third planner turn, not before
    a, _ = agent(script, fold_executor_calls=100, context_window=window)
    events = [e for e in a.run("q").trace if e["type"] == "fold"]
    assert events[0]["trigger"] == "context_utilization" and events[0]["turn"] == 3


def test_budgets_stop_the_run_with_one_forced_answer():
    a, client = agent({"planner": ["<think>no action</think>"] * 5 + [ANSWER], "executor": [RESULTS]},
                      planner_turns=5, fold_planner_turns=100)
    result = a.run("q")
    assert result.usage["planner"]["calls"] == 6  # 5 turns + the forced answer
    assert any(e["type"] == "forced_answer" for e in result.trace) and result.answer == "1821"
    # executor and isolated-reasoning budgets
    a, client = agent({"planner": [TASK, "<isoReason><prompt>x</prompt></isoReason>", ANSWER],
                       "executor": [SEARCH], "iso": ["<think>still thinking</think>"]},
                      execute_turns=3, max_iso_reasoning_turn=2)
    result = a.run("q")
    assert result.usage["executor"]["calls"] == 3 and result.usage["iso"]["calls"] == 2
    planner_last = client.messages_for("planner")[-1]
    assert any("STATUS: failed" in m["content"] for m in planner_last)
    assert any("no conclusion within the turn budget" in m["content"] for m in planner_last)
    a, client = agent({"planner": ["<isoReason><prompt>x</prompt></isoReason>"] * 3 + [ANSWER],
                       "iso": ["<return>CONCLUSION: y</return>"]}, max_iso_reasoning=1)
    result = a.run("q")
    assert result.usage["iso"]["calls"] == 1


def test_invalid_memory_json_is_retried_then_survived():
    script = {"planner": ["<to_memory>", "<to_memory>", ANSWER],
              "memory:episode": ["not json", EPISODE, "still not json", "{\"key_events\": 5}"],
              "memory:working": [WORKING], "memory:tool": [TOOLMEM]}
    a, client = agent(script)
    result = a.run("q")
    assert folds(result) == ["to_memory", "to_memory"]
    assert len(client.messages_for("memory:episode")) == 4  # each fold: one try + one retry
    failures = [e for e in result.trace if e["type"] == "memory_failure"]
    assert len(failures) == 1 and failures[0]["module"] == "episode"
    last_planner = " ".join(m["content"] for m in client.messages_for("planner")[-1])
    assert "EPISODE-SENTINEL" in last_planner  # the previous (valid) memory was kept


def test_tool_call_errors_are_corrective_not_fatal():
    bad = ['<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>',
           '<tool_call>{"name": "web_search", "arguments": {"query": "x"}}</tool_call>',
           "<tool_call>{not json}</tool_call>",
           '<tool_call>{"name": "web_parse", "arguments": {"link": "nope", "query": "q"}}</tool_call>',
           RESULTS]
    a, client = agent({"planner": [TASK, ANSWER], "executor": bad})
    result = a.run("q")
    seen = [m["content"] for m in client.messages_for("executor")[-1]]
    assert any("unknown tool 'rm_rf'" in s for s in seen)
    assert any("missing argument(s) ['keywords']" in s for s in seen)
    assert any("not JSON" in s for s in seen)
    assert any("TOOL FAILED" in s and "no document" in s for s in seen)
    assert result.answer == "1821"


pieces = st.sampled_from(["<think>", "</think>", "<task>", "</task>", "<answer>", "</answer>",
                          "<confidence>", "</confidence>", "<isoReason>", "</isoReason>", "<prompt>",
                          "</prompt>", "<to_memory>", "<tool_call>", "</tool_call>", "<results>",
                          "</results>", "<return>", "</return>", '{"name": "web_search", "arguments": ',
                          '{"keywords": "Velmor"}}', "STATUS: failed", "{", "}", "x", " ", "0.5", "\n"])
outputs = st.lists(pieces, max_size=12).map("".join) | st.text(max_size=40)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(outputs, min_size=1, max_size=8), st.integers(0, 2**16))
def test_fuzz_random_outputs_never_escape_and_respect_budgets(replies, seed):
    cfg = HyMemConfig(planner_turns=4, execute_turns=3, max_iso_reasoning=2, max_iso_reasoning_turn=2,
                      fold_planner_turns=3)
    counter = iter(range(10**6))

    def script(tag, messages):
        return replies[(next(counter) + seed) % len(replies)]

    client = ScriptedClient(script)
    result = HyMemAgent(client, TOOLBOX, cfg).run("q")
    assert isinstance(result.answer, str)
    planner_calls = result.usage.get("planner", {}).get("calls", 0)
    assert planner_calls <= cfg.planner_turns + 1
    assert result.usage.get("iso", {}).get("calls", 0) <= cfg.max_iso_reasoning * cfg.max_iso_reasoning_turn
    max_exec = (cfg.planner_turns + cfg.max_iso_reasoning * cfg.max_iso_reasoning_turn) * cfg.execute_turns
    assert result.usage.get("executor", {}).get("calls", 0) <= max_exec


TOOLBOX = toolbox()


def test_baselines_keep_raw_observations_and_fold_as_specified():
    from hymem.baselines import BaselineConfig, FlatAgent

    react_script = {"react": [SEARCH] * 3 + [ANSWER]}
    client = ScriptedClient(react_script)
    result = FlatAgent(client, toolbox(), BaselineConfig(mode="react")).run("q")
    assert result.answer == "1821" and result.usage["react"]["calls"] == 4
    assert MARKER in " ".join(m["content"] for m in client.calls[-1][1])  # ReAct's flat context is raw
    client = ScriptedClient({"summary": [SEARCH] * 5 + [ANSWER], "summarize": ["NOTE-SENTINEL"]})
    result = FlatAgent(client, toolbox(), BaselineConfig(mode="summary", summary_threshold=120)).run("q")
    assert any(e["type"] == "fold" for e in result.trace)
    last = client.messages_for("summary")[-1]
    assert any("NOTE-SENTINEL" in m["content"] for m in last) and last[1]["content"] == "Question: q"
    client = ScriptedClient({"resum": [SEARCH] * 5 + [ANSWER], "summarize": ["NOTE-SENTINEL"]})
    result = FlatAgent(client, toolbox(), BaselineConfig(mode="resum", context_window=130)).run("q")
    contexts = client.messages_for("resum")
    assert any(e["type"] == "fold" and e["trigger"] == "resum" for e in result.trace)
    assert "Summary so far: NOTE-SENTINEL" in contexts[-1][1]["content"]
    restarts = [c for c in contexts[1:] if len(c) == 2]  # [system, question + summary]
    assert restarts and "Summary so far: NOTE-SENTINEL" in restarts[0][1]["content"]
    client = ScriptedClient({"react": ["<think>hm</think>"]})
    result = FlatAgent(client, toolbox(), BaselineConfig(mode="react", max_turns=7)).run("q")
    assert result.usage["react"]["calls"] == 7 and result.answer == ""


def test_eval_harness_reads_gaia_files_with_a_scripted_client(tmp_path):
    import configs.agents_synthetic as base
    from hymem.evaluate import evaluate

    gaia = tmp_path / "gaia"
    gaia.mkdir()
    (gaia / "t1.txt").write_text("The code word is PELICAN.")
    rows = [{"task_id": "t1", "Question": "What is the code word in the file?", "Level": 1,
             "Final answer": "pelican", "file_name": "t1.txt"}]
    (gaia / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = base.get_config()
    cfg.agents = ("hymem", "react")
    cfg.data.name, cfg.data.path, cfg.data.n_tasks = "gaia", str(gaia), 5
    cfg.out_dir = str(tmp_path / "out")
    parse = '<tool_call>{"name": "parse_file", "arguments": {"file_path": "t1.txt"}}</tool_call>'
    client = ScriptedClient({"planner": [TASK, "<answer>Pelican</answer><confidence>1</confidence>"],
                             "executor": [parse, "<results>FINDINGS: PELICAN\\nSTATUS: success</results>"],
                             "react": [parse, "<answer>PELICAN</answer>"]})
    summary = evaluate(cfg, client=client)
    assert summary["hymem"]["pass@1"] == 1.0 and summary["react"]["pass@1"] == 1.0  # GAIA scorer
    trace = [json.loads(x) for x in open(tmp_path / "out" / "traces" / "react" / "t1.jsonl")]
    assert any(e["type"] == "tool_call" and e["tool"] == "parse_file" and e["ok"] for e in trace)
    turns = [json.loads(x) for x in open(tmp_path / "out" / "traces" / "hymem" / "t1.jsonl")]
    assert [e["context_tokens"] > 0 for e in turns if e["type"] == "turn"] == [True, True]


def test_eval_harness_reads_browsecomp_plus_with_a_scripted_client(tmp_path):
    import configs.agents_synthetic as base
    from activemem_jax.data.loaders import encrypt_browsecomp
    from hymem.evaluate import evaluate

    canary = "canary-test"
    (tmp_path / "q.jsonl").write_text(json.dumps({
        "query_id": "7", "query": encrypt_browsecomp("When was Velmor founded?", canary),
        "answer": encrypt_browsecomp("1821", canary), "gold_docs": [{"docid": "d1"}]}) + "\n")
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    cfg = base.get_config()
    cfg.agents = ("hymem", "resum")
    cfg.data.update(dict(name="browsecomp_plus", queries=str(tmp_path / "q.jsonl"),
                              corpus=str(tmp_path / "c.jsonl"), canary=canary, n_tasks=5))
    cfg.out_dir = str(tmp_path / "out")
    client = ScriptedClient({"planner": [TASK, ANSWER], "executor": [SEARCH, RESULTS],
                             "resum": [SEARCH, "<answer>1820</answer>"]})
    summary = evaluate(cfg, client=client)
    assert summary["hymem"]["pass@1"] == 1.0 and summary["resum"]["pass@1"] == 0.0
    first_planner = client.messages_for("planner")[0]
    assert "When was Velmor founded?" in first_planner[1]["content"]  # decrypted
