"""`python -m hymem`'s answer and progress (hymem/__main__.py) with a scripted client: a
planner that never writes <answer> gets the forced turn's text back, marked forced with
why, while the agent's own result (what evaluations score) stays strict."""

import io
import re

import pytest

from hymem import HyMemAgent, HyMemConfig, ScriptedClient
from hymem.__main__ import answer
from tests.hymem.test_agent import ANSWER, toolbox

PLAIN = "The capital of France is Paris."  # what the 135M planner writes, turn after turn
CONFIG = dict(planner_turns=3, fold_planner_turns=100)


def cli(planner, live=False):
    stream = io.StringIO()
    out = answer("What is the capital of France?", ScriptedClient({"planner": planner}), toolbox(),
                 HyMemConfig(**CONFIG), live=live, stream=stream)
    return out, stream.getvalue().splitlines()


def test_a_planner_that_never_answers_gets_the_forced_text_back_marked():
    out, lines = cli([PLAIN] * 3 + ["  Paris, I believe.\n"])
    assert out["answer"] == "Paris, I believe." and out["forced"] is True
    assert out["why"] == ("no <answer> tag in the forced turn; its text is returned as is "
                          "(an evaluation scores this run as unanswered)")
    assert out["confidence"] is None and out["usage"]["planner"]["calls"] == 4
    assert len(lines) == 4  # one line per planner turn, one for the forced turn
    for k, line in enumerate(lines[:3], 1):
        assert re.fullmatch(rf"\[hymem\] planner turn {k}/3: invalid: no action \| [\d,]+ tokens so far \| \d+ s", line)
    assert re.fullmatch(r"\[hymem\] forced answer turn: no <answer> tag in the forced turn \| \d+ s", lines[3])


def test_evaluations_still_score_the_same_run_as_unanswered():
    client = ScriptedClient({"planner": [PLAIN] * 3 + ["Paris, I believe."]})
    result = HyMemAgent(client, toolbox(), HyMemConfig(**CONFIG)).run("What is the capital of France?")
    assert result.answer == "" and result.confidence is None
    forced = [e for e in result.trace if e["type"] == "forced_answer"]
    assert forced == [{"type": "forced_answer", "parsed": False, "text": "Paris, I believe.",
                       "why": "no <answer> tag in the forced turn"}]
    turns = [e["action"] for e in result.trace if e["type"] == "turn"]
    assert turns == ["invalid: no action"] * 3


@pytest.mark.parametrize("forced_reply,answer_,why", [
    (ANSWER, "1821", "the planner spent its turns without an <answer>; the forced turn's <answer> is returned"),
    ("<task>search more</task>", "<task>search more</task>",
     "the forced turn wrote a task action instead of an <answer>; its text is returned as is"),
    ("<answer>a</answer><answer>b</answer>", "<answer>a</answer><answer>b</answer>",
     "no single <answer> in the forced turn (more than one action); its text is returned as is"),
    ("   ", "", "the forced turn returned no text; its text is returned as is"),
])
def test_what_the_forced_turn_wrote_decides_the_answer_and_the_why(forced_reply, answer_, why):
    out, lines = cli([PLAIN] * 3 + [forced_reply])
    assert out["answer"] == answer_ and out["forced"] is True and out["why"].startswith(why)
    assert len(lines) == 4


def test_an_answered_question_is_not_forced_and_live_mode_shows_each_call():
    out, lines = cli([PLAIN, ANSWER], live=True)
    assert out["answer"] == "1821" and out["confidence"] == 0.8 and out["forced"] is False and "why" not in out
    progress = [line for line in lines if line.startswith("[hymem]")]
    assert [p.split(" | ")[0] for p in progress] == ["[hymem] planner turn 1/3: invalid: no action",
                                                     "[hymem] planner turn 2/3: answer"]
    assert sum(line.startswith("--- planner (") for line in lines) == 2  # each call's text, without --quiet
