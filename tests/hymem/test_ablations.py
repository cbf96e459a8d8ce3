"""The ablations of the paper's Table 2 do what their names say (scripted clients)."""

from hymem import HyMemAgent, HyMemConfig, ScriptedClient, prompts
from tests.hymem.test_agent import ANSWER, RESULTS, TASK, memory_script, toolbox

ISO = ("<think>hard</think><isoReason><description>check it</description>"
       "<prompt>verify the founding year</prompt></isoReason>")


def test_without_isolated_reasoning_the_planner_is_not_offered_it():
    full, cut = prompts.planner_prompt(), prompts.planner_prompt(isolated_reasoning=False)
    assert full == prompts.PLANNER and "isoReason" in full
    assert "isoReason" not in cut and "<task>" in cut and "<to_memory>" in cut
    client = ScriptedClient(memory_script(planner=[ISO, ANSWER], executor=[RESULTS], iso=["<return>x</return>"]))
    result = HyMemAgent(client, toolbox(), HyMemConfig(isolated_reasoning=False)).run("q")
    planner_calls = client.messages_for("planner")
    assert all("isoReason" not in m[0]["content"] for m in planner_calls)
    assert not client.messages_for("iso")  # never run
    invalid = [e for e in result.trace if e["type"] == "invalid_action"]
    assert invalid and "not available" in invalid[0]["reason"]
    assert "isoReason" not in planner_calls[-1][-1]["content"]  # the correction does not offer it either
    assert result.answer == "1821"


def test_without_memory_management_nothing_is_folded_or_forgotten():
    """The planner-turn trigger (8) would fold and clear the history; without memory
    management the first turn's result is still there at turn 10, and no memory call runs."""
    clue = "<results>FINDINGS: FIRST-CLUE\nSTATUS: success</results>"
    client = ScriptedClient(memory_script(planner=[TASK] * 10 + [ANSWER], executor=[clue] + [RESULTS] * 20))
    cut = prompts.planner_prompt(memory_management=False)
    assert "memory" not in cut.lower() and "<to_memory>" not in cut and "isoReason" in cut
    result = HyMemAgent(client, toolbox(), HyMemConfig(memory_management=False)).run("q")
    assert not [e for e in result.trace if e["type"] == "fold"]
    assert not [tag for tag, _ in client.calls if tag.startswith("memory:")]
    last = client.messages_for("planner")[-1]
    assert last[0]["content"] == cut
    assert any("FIRST-CLUE" in m["content"] for m in last)
    # the full system folds at turn 8 and the clue is gone from the planner's history
    full = ScriptedClient(memory_script(planner=[TASK] * 10 + [ANSWER], executor=[clue] + [RESULTS] * 20))
    folded = HyMemAgent(full, toolbox(), HyMemConfig()).run("q")
    assert [e["trigger"] for e in folded.trace if e["type"] == "fold"] == ["executor_calls", "executor_calls"]
    assert not any("FIRST-CLUE" in m["content"] for m in full.messages_for("planner")[-1][2:])


def test_without_memory_management_a_full_context_drops_the_oldest_exchanges():
    long = "<results>FINDINGS: " + "fact " * 300 + "\nSTATUS: success</results>"
    client = ScriptedClient(memory_script(planner=[TASK] * 6 + [ANSWER], executor=[long]))
    cfg = HyMemConfig(memory_management=False, context_window=1500)
    result = HyMemAgent(client, toolbox(), cfg).run("q")
    dropped = [e for e in result.trace if e["type"] == "context_truncated"]
    assert dropped
    for messages in client.messages_for("planner"):
        assert ScriptedClient.count_tokens(messages) <= cfg.context_window
    assert result.answer == "1821"


def test_to_memory_without_memory_management_is_an_invalid_action():
    client = ScriptedClient(memory_script(planner=["<to_memory>", ANSWER]))
    result = HyMemAgent(client, toolbox(), HyMemConfig(memory_management=False)).run("q")
    assert [e for e in result.trace if e["type"] == "invalid_action"]
    assert not [e for e in result.trace if e["type"] == "fold"]
    assert result.answer == "1821"
