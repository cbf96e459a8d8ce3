"""policy.action_format (activemem/rollout.py `action_constraint`): the QA environments'
action regex accepts their well-formed actions and nothing else, and a rollout with the
switch on decodes every turn under it: on a tiny random model, every reply parses as a
search or an answer."""

import re

import pytest

from activemem_jax.activemem import rollout as rollout_mod
from activemem_jax.activemem.policy_config import PolicyConfig
from activemem_jax.envs import MultiObjectiveQAEnv, parse_action
from activemem_jax.envs.multi_objective_qa import action_regex

GOOD = ["<think>I look up question 1.</think>\n<search>capital of France</search>",
        "<think>done</think><answer>Paris; Berlin</answer>", "<search>x</search>", "<answer>Paris</answer>"]
BAD = ["Paris", "<think>a</think>", "<search></search>", "<search>a</search><answer>b</answer>",
       "<think>a</think>\n<search>a <b> c</search>", "<answer>" + "a" * 201 + "</answer>",
       "<think>a</think><information>x</information><answer>b</answer>"]


def test_the_action_regex_takes_well_formed_actions_only():
    pattern = action_regex(400)
    for text in GOOD:
        assert re.fullmatch(pattern, text), text
        assert parse_action(text).kind in ("search", "answer")
    for text in BAD:
        assert not re.fullmatch(pattern, text), text


def test_the_switch_builds_the_constraint():
    env = MultiObjectiveQAEnv(None)
    assert rollout_mod.action_constraint(PolicyConfig(), env) is None  # off by default
    c = rollout_mod.action_constraint(PolicyConfig(action_format="tags", max_tokens=50), env)
    assert c.kind == "regex" and c.spec == action_regex(rollout_mod.CHARS_PER_TOKEN * 50)
    assert rollout_mod.action_constraint(PolicyConfig(action_format="<answer>[a-z]+</answer>"), env).spec \
        == "<answer>[a-z]+</answer>"
    with pytest.raises(ValueError, match="action_pattern"):
        rollout_mod.action_constraint(PolicyConfig(action_format="tags"), object())


class _ShortQA(MultiObjectiveQAEnv):
    """The QA environment with a one-line prompt (a small engine, few compiled shapes)."""

    @staticmethod
    def initial_prompt(task):
        return "Answer with <search> or <answer>: " + " ".join(task["questions"])


class _Docs:
    def batch_search(self, queries, k):
        return [[{"docid": f"d{i}", "title": "T", "text": q[:40]} for i in range(k)] for q in queries]


def test_a_rollout_with_tags_on_writes_only_well_formed_actions(tmp_path, monkeypatch):
    from activemem_jax.activemem import ActiveMem
    from activemem_jax.engine import Engine
    from tests.engine.test_constrained import tiny_bpe_model

    # one character of free text per token of the budget: the turn's longest match fits in it
    monkeypatch.setattr(rollout_mod, "CHARS_PER_TOKEN", 1)
    model = tiny_bpe_model(tmp_path)
    tasks = [{"id": f"t{i}", "questions": [f"q{i} one?", "two?"][: 1 + i % 2], "answers": [["a"], ["b"]][: 1 + i % 2]}
             for i in range(2)]
    env = _ShortQA(_Docs(), max_turns=2, topk=1)
    cfg = PolicyConfig(num_latents=0, use_tree=False, capacity=16, max_children=2, max_depth=2, max_ops=2,
                       hidden=16, max_tokens=48, action_format="tags", temperature=1.0)
    with Engine(model, max_slots=2, max_len=512) as eng:
        result = ActiveMem(model, eng, cfg, seed=0).rollout(env, tasks, seed=1, commit=False)
    texts = [s.text for t in result.trajectories for s in t.steps]
    assert texts
    for text in texts:
        assert re.fullmatch(action_regex(48), text), text
        assert parse_action(text).kind in ("search", "answer"), text
    assert all(t.info["invalid"] == 0 for t in result.trajectories)
