"""Eq. 17 (every trigger counter counts since the last fold), Eq. 13 (a fold sees the
previous memories) and ReSum's running summary (docs/design_hymem.md#memories-and-folds,
docs/design_hymem.md#baselines), with scripted clients."""

import json

from hymem import HyMemAgent, HyMemConfig, ScriptedClient, Toolbox, search_tools
from hymem.baselines import BaselineConfig, FlatAgent
from tests.hymem.test_agent import ANSWER, DOCS, FAILED, SEARCH, TASK, memory_script, toolbox


def _folds(result):
    return [(e["trigger"], e["turn"]) for e in result.trace if e["type"] == "fold"]


def test_failure_trigger_counts_failures_since_the_last_fold():
    """Executors that always fail: a fold after every 3rd consecutive failure since the
    last fold (turns 3, 6, 9, 12), not on every turn after the third (3, 4, 5, ...)."""
    client = ScriptedClient(memory_script(planner=[TASK], executor=[FAILED]))
    cfg = HyMemConfig(planner_turns=12, fold_executor_calls=100, fold_planner_turns=100, fold_tool_calls=100)
    result = HyMemAgent(client, toolbox(), cfg).run("q")
    assert _folds(result) == [("executor_failures", t) for t in (3, 6, 9, 12)]


def test_a_fold_keeps_the_turn_results_after_it():
    """After a failure fold, the next turn's (failed) result stays in the planner history
    (the old trigger folded again at once and wiped it)."""
    clue = "<results>FINDINGS: PARTIAL-CLUE\nSTATUS: failed</results>"
    client = ScriptedClient(memory_script(planner=[TASK] * 4 + [ANSWER], executor=[FAILED] * 3 + [clue]))
    cfg = HyMemConfig(fold_executor_calls=100, fold_planner_turns=100, fold_tool_calls=100)
    result = HyMemAgent(client, toolbox(), cfg).run("q")
    assert _folds(result) == [("executor_failures", 3)]
    last = client.messages_for("planner")[-1]
    assert any("FINDINGS: PARTIAL-CLUE" in m["content"] for m in last)


def _accumulating_episode(tag, messages):
    """A memory manager that keeps the previous episode memory's events (when it is
    shown one) and adds the milestones it sees in the planner history."""
    prompt = messages[-1]["content"]
    events = []
    if "previous_memory:" in prompt:
        previous = prompt.split("previous_memory:\n", 1)[1].split("\n", 1)[0]
        events = json.loads(previous).get("key_events", [])
    for milestone in ("MILESTONE-ONE", "MILESTONE-TWO"):
        if milestone in prompt.split("previous_memory:")[-1] and not any(e["description"] == milestone
                                                                          for e in events):
            events.append({"step": str(len(events) + 1), "description": milestone, "outcome": "found"})
    return json.dumps({"task_description": "q", "key_events": events, "current_progress": ""})


def test_fold_sees_the_previous_memories_so_milestones_survive():
    one = "<results>FINDINGS: MILESTONE-ONE\nSTATUS: success</results>"
    two = "<results>FINDINGS: MILESTONE-TWO\nSTATUS: success</results>"
    replies = {"planner": [TASK, "<to_memory>", TASK, "<to_memory>", ANSWER], "executor": [one, two]}
    cursor = {}

    def script(tag, messages):
        if tag == "memory:episode":
            return _accumulating_episode(tag, messages)
        if tag.startswith("memory:"):
            return "{}"
        i = cursor.get(tag, 0)
        cursor[tag] = i + 1
        return replies[tag][min(i, len(replies[tag]) - 1)]

    client = ScriptedClient(script)
    result = HyMemAgent(client, toolbox(), HyMemConfig()).run("q")
    assert [t for t, _ in _folds(result)] == ["to_memory", "to_memory"]
    second = client.messages_for("memory:episode")[1][-1]["content"]
    assert "MILESTONE-ONE" in second.split("planner_history:")[0]  # the previous memory is an input
    final_planner = " ".join(m["content"] for m in client.messages_for("planner")[-1])
    assert "MILESTONE-ONE" in final_planner and "MILESTONE-TWO" in final_planner
    for kind in ("working", "tool"):
        assert all("previous_memory:" in msgs[-1]["content"] for msgs in client.messages_for(f"memory:{kind}"))


def test_isolated_reasoning_returns_reach_the_fold():
    script = memory_script(planner=["<isoReason><prompt>check</prompt></isoReason>", "<to_memory>", ANSWER],
                           iso=["<return>CONCLUSION: ISO-SENTINEL CONFIDENCE: 0.7</return>"])
    client = ScriptedClient(script)
    HyMemAgent(client, toolbox(), HyMemConfig()).run("q")
    episode_input = client.messages_for("memory:episode")[0][-1]["content"]
    assert "isolated_reasoning_summary:" in episode_input  # H^iso, Eq. 13
    assert "ISO-SENTINEL" in episode_input.split("isolated_reasoning_summary:")[1]


def test_resum_summary_is_written_from_the_previous_summary():
    notes = iter(f"NOTE-{i}" for i in range(100))

    def script(tag, messages):
        if tag == "summarize":
            return next(notes)
        return SEARCH if len(messages) < 12 else ANSWER

    client = ScriptedClient(script)
    result = FlatAgent(client, Toolbox(search_tools(toolbox_retriever())),
                       BaselineConfig(mode="resum", context_window=130, max_turns=12)).run("q")
    summaries = client.messages_for("summarize")
    assert len(summaries) >= 2 and sum(e["type"] == "fold" for e in result.trace) == len(summaries)
    for i, msgs in enumerate(summaries[1:]):
        assert f"NOTE-{i}" in msgs[0]["content"]  # each summary sees the one before it


def toolbox_retriever():
    from activemem_jax.data.retrieval import BM25Retriever

    return BM25Retriever(DOCS)
