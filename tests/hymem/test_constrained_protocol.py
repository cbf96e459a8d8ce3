"""HyMem's constrained decoding (hymem/grammars.py, HyMemConfig.constrained): each turn
kind's grammar accepts the protocol's valid turns and nothing else, the agent sends it
only when on, and a tiny random model behind the real server answers the forced turn
inside its tag."""

import re

import pytest

from hymem import grammars
from hymem.agent import HyMemAgent, HyMemConfig, constraints_on
from hymem.llm import GuardedClient, OpenAIClient, ScriptedClient
from hymem.parsing import parse_executor, parse_iso, parse_planner
from hymem.tools import Tool, Toolbox

TOOLS = Toolbox([Tool("web_search", "search", {"keywords": "k"}, lambda keywords: f"[d1] T: {keywords}"),
                 Tool("web_parse", "read", {"docid": "d", "goal": "g"}, lambda docid, goal: "text")])


@pytest.fixture(scope="module")
def accepts(tmp_path_factory):
    """accepts(grammar, text): the grammar's matcher takes the text's tokens and is complete."""
    from activemem_jax.engine.constraints import Constraint, Constraints
    from tests.engine.test_constrained import VOCAB, save_bpe_tokenizer

    tok = save_bpe_tokenizer(tmp_path_factory.mktemp("bpe"))
    compiler = Constraints(tok, VOCAB, [tok.eos_token_id])

    def check(grammar: str, text: str) -> bool:
        m = compiler.compile(Constraint.grammar(grammar)).deep_copy()
        ids = tok(text, add_special_tokens=False)["input_ids"]
        return m.try_consume_tokens(ids) == len(ids) and m.is_accepting()
    return check


PLANNER_OK = {
    "<think>France is a country.</think>\n<task>Find the capital of France</task>": "task",
    "<task>Find it</task>": "task",
    "<think>x</think> <isoReason> <description>capital</description> <prompt>Reason</prompt> </isoReason>": "iso",
    "<to_memory>": "fold",
    "<answer>Paris</answer><confidence>0.9</confidence>": "answer",
    "<think>done</think>\n<answer>Paris</answer>\n<confidence> 1 </confidence>": "answer",
}
PLANNER_BAD = ["Paris", "<answer>Paris</answer>", "<task>a</task><task>b</task>", "<task></task>",
               "<task>" + "a" * (grammars.TEXT_CHARS + 1) + "</task>", "<answer>Paris</answer><confidence>7</confidence>",
               "<think>a</think>", "<task>a <b> c</task>"]


def test_planner_grammar_accepts_valid_actions_and_rejects_the_rest(accepts):
    full, no_iso, no_memory = grammars.planner(), grammars.planner(iso=False), grammars.planner(memory=False)
    for text, kind in PLANNER_OK.items():
        assert accepts(full, text), text
        assert parse_planner(text).kind == kind  # what the grammar lets through parses as that action
    for text in PLANNER_BAD:
        assert not accepts(full, text), text
    iso = next(t for t, k in PLANNER_OK.items() if k == "iso")
    assert not accepts(no_iso, iso) and accepts(no_iso, "<task>x</task>")  # ablations: only what is offered
    assert not accepts(no_memory, "<to_memory>") and accepts(no_memory, iso)


def test_forced_executor_and_iso_grammars(accepts):
    forced = grammars.forced_answer()
    assert accepts(forced, "<answer>Paris</answer><confidence>0.8</confidence>")
    for bad in ("<think>a</think><answer>Paris</answer><confidence>1</confidence>", "<task>x</task>", "Paris"):
        assert not accepts(forced, bad), bad
    ex = grammars.executor(TOOLS)
    ok = ['<think>search it</think>\n<tool_call>{"name": "web_search", "arguments": {"keywords": "France"}}</tool_call>',
          '<tool_call>{"name": "web_parse", "arguments": {"docid": "d1", "goal": "capital"}}</tool_call>',
          "<results>FINDINGS: Paris\nSTATUS: success</results>"]
    for text in ok:
        assert accepts(ex, text), text
        assert parse_executor(text).kind in ("tool", "results")
    for bad in ['<tool_call>{"name": "nope", "arguments": {}}</tool_call>',  # unknown tool
                '<tool_call>{"name": "web_search", "arguments": {"query": "x"}}</tool_call>',  # wrong argument
                '<tool_call>{"name": "web_search", "arguments": {"keywords": 3}}</tool_call>',  # not a string
                "<results>a</results><results>b</results>", "FINDINGS: Paris"]:
        assert not accepts(ex, bad), bad
    assert accepts(grammars.executor(Toolbox([])), "<results>none</results>")  # no tools: results only
    iso = grammars.iso()
    for text, kind in (("<think>a</think><task>look up X</task>", "task"), ("<return>CONCLUSION: Paris</return>", "return")):
        assert accepts(iso, text) and parse_iso(text)[0] == kind
    assert not accepts(iso, "<answer>Paris</answer>")


class _Probing(ScriptedClient):
    def __init__(self, supports, script):
        super().__init__(script)
        self.supports, self.sampling = supports, []

    def supports_constraints(self):
        return self.supports

    def complete(self, messages, tag=None, **sampling):
        self.sampling.append((tag, sampling))
        return super().complete(messages, tag=tag, **sampling)


def test_the_agent_sends_grammars_only_when_on():
    assert not constraints_on("auto", ScriptedClient({}))  # a client that cannot say: off
    assert constraints_on("auto", _Probing(True, {})) and not constraints_on("auto", _Probing(False, {}))
    assert constraints_on("on", ScriptedClient({})) and not constraints_on("off", _Probing(True, {}))
    assert constraints_on("auto", GuardedClient(_Probing(True, {})))  # the wrapper passes the question on
    with pytest.raises(ValueError):
        HyMemAgent(ScriptedClient({}), TOOLS, HyMemConfig(constrained="yes"))
    from hymem.run_config import ConfigError, load

    with pytest.raises(ConfigError, match="hymem.constrained"):  # an evaluation config says so at load
        load({"agents": ("hymem",), "hymem": {"constrained": "yes"}})
    assert load({"agents": ("hymem",), "hymem": {"constrained": "off"}}).agent_config["hymem"]["constrained"] == "off"
    script = {"planner": ["<task>capital of France</task>", "<answer>Paris</answer><confidence>1</confidence>"],
              "executor": ['<tool_call>{"name": "web_search", "arguments": {"keywords": "France"}}</tool_call>',
                           "<results>FINDINGS: Paris</results>"]}
    for mode, supports, want in (("auto", True, True), ("auto", False, False), ("off", True, False),
                                 ("on", False, True)):
        client = _Probing(supports, script)
        result = HyMemAgent(client, TOOLS, HyMemConfig(constrained=mode, model_distill=False)).run("Capital?")
        assert result.answer == "Paris"
        sent = {tag: s.get("guided_grammar") for tag, s in client.sampling}
        if want:
            assert sent["planner"] == grammars.planner() and sent["executor"] == grammars.executor(TOOLS)
        else:
            assert not any(sent.values())


def test_forced_turn_answers_inside_its_tag_on_a_tiny_model_behind_the_server(tmp_path):
    from activemem_jax.engine import Engine
    from activemem_jax.server import make_app
    from tests.engine.test_constrained import tiny_bpe_model
    from tests.serving import running

    with Engine(tiny_bpe_model(tmp_path), max_slots=2, max_len=1024) as eng, running(make_app(eng, "tiny")) as url:
        client = OpenAIClient(url + "/v1", model="tiny")
        assert client.supports_constraints()  # this project's server, by its /v1/models
        assert not OpenAIClient("http://127.0.0.1:9/v1", timeout=2).supports_constraints()  # nothing there
        # no planner turn: the forced answer turn alone, at a budget its longest answer fits in
        config = HyMemConfig(planner_turns=0, constrained="auto", model_distill=False,
                             sampling={"temperature": 0.0, "max_tokens": 460})
        agent = HyMemAgent(client, TOOLS, config)
        agent._planner_system = "You plan."  # a short prompt: small prefill shapes (the turn is the same)
        result = agent.run("What is the capital of France?")
    forced = next(e for e in result.trace if e["type"] == "forced_answer")
    assert forced["parsed"], forced
    assert re.fullmatch(r"<answer>[^<]+</answer>[ \n]{0,2}<confidence>[^<]+</confidence>", forced["text"]), forced
    assert result.confidence is not None
    assert result.answer == parse_planner(forced["text"]).content
