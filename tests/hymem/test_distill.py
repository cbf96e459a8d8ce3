"""phi(o | d) (Eq. 8): the rule pre-filter, then the auxiliary model given the directive;
the rule filter's text when the auxiliary call gives nothing."""

from hymem import HyMemAgent, HyMemConfig, ScriptedClient
from hymem.distill import NOTHING, rule_filter
from hymem.llm import ModelError
from tests.hymem.test_agent import ANSWER, MARKER, RESULTS, SEARCH, memory_script, toolbox

DIRECTIVE = "find when Velmor was founded"
TASK = f"<think>need data</think><task>{DIRECTIVE}</task>"


def planner_and_executor(**extra):
    return memory_script(planner=[TASK, ANSWER], executor=[SEARCH, RESULTS], **extra)


def observations(client):
    """What the executor saw after its tool call."""
    return [m["content"] for msgs in client.messages_for("executor") for m in msgs
            if m["content"].startswith("<observation>")]


def test_the_auxiliary_model_distills_for_the_directive():
    def aux_script(tag, messages):
        assert tag == "distill"
        prompt = messages[-1]["content"]
        assert f"Search target: {DIRECTIVE}" in prompt and "Velmor was founded in 1821" in prompt
        assert "<" not in prompt.split("Observation:", 1)[1]  # the pre-filter stripped the markup
        return "AUX-KEPT: Velmor founded 1821 (d1)"

    main, aux = ScriptedClient(planner_and_executor()), ScriptedClient(aux_script)
    result = HyMemAgent(main, toolbox(), HyMemConfig(), aux=aux).run("q")
    assert observations(main) == ["<observation>AUX-KEPT: Velmor founded 1821 (d1)</observation>"]
    assert not main.messages_for("distill") and len(aux.calls) == 1  # the aux client, not the main one
    assert result.usage["distill"]["calls"] == 1


def test_by_default_the_main_client_is_the_auxiliary_one():
    main = ScriptedClient(planner_and_executor(distill=["MAIN-DISTILLED 1821"]))
    HyMemAgent(main, toolbox(), HyMemConfig()).run("q")
    assert observations(main) == ["<observation>MAIN-DISTILLED 1821</observation>"]
    assert main.messages_for("distill")


def test_a_failed_or_empty_auxiliary_call_falls_back_to_the_rule_filter():
    class Broken:
        def complete(self, messages, tag=None, **kw):
            raise ModelError("aux endpoint down")

    for aux in (Broken(), ScriptedClient({"distill": [""]})):
        main = ScriptedClient(planner_and_executor())
        result = HyMemAgent(main, toolbox(), HyMemConfig(), aux=aux).run("q")
        seen = observations(main)[0]
        assert "Velmor was founded in 1821" in seen and MARKER in seen
        assert any(e["type"] == "distill_fallback" for e in result.trace)
    main = ScriptedClient(planner_and_executor(distill=["NONE"]))
    HyMemAgent(main, toolbox(), HyMemConfig()).run("q")
    assert observations(main) == [f"<observation>{NOTHING}</observation>"]
    rules_only = ScriptedClient(planner_and_executor(distill=["NEVER"]))
    HyMemAgent(rules_only, toolbox(), HyMemConfig(model_distill=False)).run("q")
    assert not rules_only.messages_for("distill") and "1821" in observations(rules_only)[0]


def test_the_rule_filter_drops_tool_noise_and_keeps_content_that_names_errors():
    raw = "\n".join([
        "Traceback (most recent call last):", '  File "tool.py", line 12, in fetch', "ValueError: bad page",
        "HTTP/1.1 404 Not Found", "503 Service Unavailable", "Menu", "Copyright 2024 Example Inc.",
        "The 1821 charter was an exception to the rule of Ostra.",
        "HTTP 404 errors were first described in 1992 by Tim Berners-Lee.",
        "Error: 5% of the Velmor census was lost in 1850.",
    ])
    kept = rule_filter(raw).splitlines()
    assert kept == ["The 1821 charter was an exception to the rule of Ostra.",
                    "HTTP 404 errors were first described in 1992 by Tim Berners-Lee.",
                    "Error: 5% of the Velmor census was lost in 1850."]
