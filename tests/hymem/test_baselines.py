"""One protocol, one registry; Base, A-MEM and THREAD doing what their papers describe
(scripted clients, the real BM25 tools)."""

import json

import pytest

from hymem import ScriptedClient, build, names
from hymem.thread import NO_SPAWN
from tests.hymem.test_agent import ANSWER, MARKER, SEARCH, toolbox

ALL = ["amem", "base", "hymem", "hymem_no_iso", "hymem_no_memory", "react", "resum", "summary", "thread"]


def test_every_agent_is_built_by_name_and_runs_in_the_same_harness():
    assert names() == ALL
    for name in ALL:
        client = ScriptedClient({"": [ANSWER]})
        agent = build(name, client, toolbox(), {"sampling": {"temperature": 0.0, "max_tokens": 64}})
        result = agent.run("When was Velmor founded?")
        assert result.answer == "1821", name
        spaces = [e["space"] for e in result.trace if e["type"] == "model_call"]
        assert agent.persistent_space in spaces, name
        assert result.trace[-1]["type"] == "answer" and all("type" in e for e in result.trace)
    with pytest.raises(ValueError, match="registered: amem, base"):
        build("gpt-agent", ScriptedClient({}), toolbox())


def test_base_answers_alone_in_one_call():
    client = ScriptedClient({"base": ["<think>I recall</think>\nIt was 1821."]})
    result = build("base", client, toolbox()).run("When was Velmor founded?")
    assert result.answer == "It was 1821." and len(client.calls) == 1
    assert not [e for e in result.trace if e["type"] == "tool_call"]


NOTE = json.dumps({"keywords": ["Velmor", "1821", "Ada Kest"], "context": "Velmor founding record",
                   "tags": ["history", "city", "founding"]})
EVOLVE = json.dumps({"links": [1], "updates": [{"note": 1, "context": "EVOLVED-CONTEXT of note one",
                                                "tags": ["evolved"]}]})


def test_amem_writes_linked_notes_evolves_them_and_retrieves_them():
    client = ScriptedClient({"amem": [SEARCH, SEARCH, ANSWER], "amem:note": [NOTE], "amem:evolve": [EVOLVE]})
    agent = build("amem", client, toolbox(), {"amem": {"window": 1}})
    result = agent.run("When was Velmor founded?")
    writes = [e for e in result.trace if e["type"] == "memory_write"]
    assert [(w["note"], w["links"], w["evolved"]) for w in writes] == [(1, 0, 0), (2, 1, 1)]
    assert len(client.messages_for("amem:evolve")) == 1  # note 1 had no neighbour yet
    evolve_prompt = client.messages_for("amem:evolve")[0][-1]["content"]
    assert "Velmor founding record" in evolve_prompt  # the neighbour's context was shown
    third = [m for t, m in client.calls if t == "amem"][2]
    memory = third[1]["content"]
    assert "Relevant memory notes" in memory and "EVOLVED-CONTEXT of note one" in memory
    assert "[note 1]" in memory and "[note 2]" in memory
    assert len(third) == 2 + 2  # system, question + notes, and only the last turn (window 1)
    assert result.answer == "1821"


def test_amem_survives_invalid_note_json():
    client = ScriptedClient({"amem": [SEARCH, ANSWER], "amem:note": ["not json {"], "amem:evolve": ["]]"]})
    result = build("amem", client, toolbox()).run("q")
    assert [e for e in result.trace if e["type"] == "memory_failure"] and result.answer == "1821"


SPAWN = "<think>delegate</think><spawn>Find the founding year of Velmor and answer with the year.</spawn>"
CHILD_ANSWER = "<think>found</think><answer>CHILD-FOUND-1821</answer><confidence>0.9</confidence>"


def test_thread_children_work_in_their_own_context_and_return_only_their_answer():
    client = ScriptedClient({"thread": [SPAWN, ANSWER], "thread:1": [SEARCH, CHILD_ANSWER]})
    result = build("thread", client, toolbox()).run("ROOT-QUESTION: when was Velmor founded?")
    child_prompts = client.messages_for("thread:1")
    assert child_prompts and all("ROOT-QUESTION" not in m["content"] for p in child_prompts for m in p)
    assert "Find the founding year of Velmor" in child_prompts[0][1]["content"]
    assert any(MARKER in m["content"] for m in child_prompts[-1])  # the child saw the raw observation
    root_last = [m for t, m in client.calls if t == "thread"][-1]
    assert any("<child_result>CHILD-FOUND-1821</child_result>" in m["content"] for m in root_last)
    assert not any(MARKER in m["content"] for m in root_last)  # ... the root never did
    spawn = [e for e in result.trace if e["type"] == "spawn"]
    assert spawn == [{"type": "spawn", "parent": "root", "child": "root.1", "depth": 1,
                      "returned_chars": len("CHILD-FOUND-1821")}]
    assert result.answer == "1821"


def test_thread_depth_limit_stops_spawning():
    client = ScriptedClient({"thread": [SPAWN, ANSWER], "thread:1": [SPAWN, CHILD_ANSWER]})
    result = build("thread", client, toolbox(), {"thread": {"max_depth": 1}}).run("q")
    child = client.messages_for("thread:1")
    assert "<spawn>" not in child[0][0]["content"]  # the option is not offered at the limit
    assert child[1][-1]["content"] == NO_SPAWN
    assert not client.messages_for("thread:2")
    assert [e["space"] for e in result.trace if e["type"] == "invalid_action"] == ["thread:1"]
