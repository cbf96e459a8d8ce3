"""MEM1's QA protocol: scripted episodes, rewards, and robustness to any string."""

import random
import string

from activemem_jax.data import synthetic_world as sw
from activemem_jax.data.oracle import expert_actions
from activemem_jax.envs import MultiObjectiveQAEnv, parse_action
from activemem_jax.envs import prompts


def test_scripted_search_search_answer(world, bm25):
    task = sw.make_tasks(world, "dev", 2, 1, seed=5, kinds=("chain",))[0]
    env = MultiObjectiveQAEnv(bm25, max_turns=5)
    (first,) = env.reset([task])
    assert first.startswith(prompts.MULTI_OBJECTIVE_QA.split("{")[0])
    assert f"\n1. {task['questions'][0]}\n2. {task['questions'][1]}" in first
    e1, e2 = task["hops"][0][0]["entity"], task["hops"][1][0]["entity"]
    obs, rew, done, info = env.step([f"<think>start</think><search>{e1}</search>"])
    assert obs[0].startswith("<information>Doc 1(Title: " + e1 + ")")
    assert obs[0].count("\nDoc ") == 2 and obs[0].endswith("You have 4 turns left.")
    assert rew == [0.0] and done == [False]
    obs, rew, done, info = env.step([f"<think>next</think>\n<search>{e2}</search>"])
    assert "Title: " + e2 in obs[0] and obs[0].endswith("You have 3 turns left.")
    golds = [a[0] for a in task["answers"]]
    obs, rew, done, info = env.step([f"<think>done</think><answer>{golds[0]}; wrong</answer>"])
    assert rew == [1.0] and done == [True] and info[0]["per_question_em"] == [1.0, 0.0]
    assert info[0]["searches"] == 2 and info[0]["turns"] == 3
    obs, rew, done, _ = env.step(["<answer>again</answer>"])  # finished episodes stay finished
    assert rew == [0.0] and done == [True]


def test_expert_actions_earn_full_reward_in_a_batch(world, bm25):
    tasks = sw.make_tasks(world, "dev", 3, 4, seed=1)
    env = MultiObjectiveQAEnv(bm25, max_turns=20)
    env.reset(tasks)
    scripts = [expert_actions(t, bm25.search) for t in tasks]
    total = [0.0] * 4
    for step in range(20):
        _, rew, done, _ = env.step([s[step] if step < len(s) else "" for s in scripts])
        total = [a + b for a, b in zip(total, rew)]
        if all(done):
            break
    assert total == [3.0] * 4


def test_malformed_actions_use_a_turn_and_reward_rules(world, bm25):
    task = sw.make_tasks(world, "dev", 1, 1)[0]
    gold = task["answers"][0][0]
    env = MultiObjectiveQAEnv(bm25, max_turns=2)
    env.reset([task])
    obs, rew, done, info = env.step(["I think the answer is obvious."])
    assert obs[0].startswith(prompts.FORMAT_HINT) and done == [False] and info[0]["invalid"] == 1
    assert "last turn" in obs[0]
    obs, rew, done, _ = env.step(["<search>x</search><search>y</search>"])  # two actions, out of turns
    assert done == [True] and rew == [0.0]
    env.reset([task])
    _, rew, _, _ = env.step([f"<think>unclosed<answer>{gold}</answer>"])
    assert rew == [0.0]  # unbalanced tags
    env.reset([task])
    _, rew, _, _ = env.step([f"<answer>{gold}</answer>"])
    assert rew == [1.0]
    assert parse_action("<think>a</think><search> </search>").kind == "invalid"
    assert parse_action("<think>a</think><search>q</search><information>x</information>").kind == "invalid"


def test_random_strings_never_raise(bm25, world):
    rng = random.Random(0)
    alphabet = string.printable + "<>/\u00e9\u4e2d"
    pieces = ["<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>",
              "<information>", ";", "\n"]
    tasks = sw.make_tasks(world, "dev", 2, 10)
    env = MultiObjectiveQAEnv(bm25, max_turns=100)
    env.reset(tasks)
    for _ in range(100):
        actions = ["".join(rng.choice(pieces) if rng.random() < 0.3 else rng.choice(alphabet)
                           for _ in range(rng.randrange(0, 60))) for _ in range(10)]
        obs, rew, done, info = env.step(actions)
        assert len(obs) == 10 and all(isinstance(o, str) for o in obs)
        assert all(0.0 <= r <= 2.0 for r in rew)


def test_gold_replies_search_each_question_then_answer(world, bm25):
    """QA files hold answers but no trajectories: SFT's gold replies search each question
    (the question as the query) and then answer every gold; they earn the full reward, and
    a closed-book environment (no retriever) answers at once."""
    tasks = sw.make_tasks(world, split="dev", n_objectives=2, n_tasks=3, seed=5)
    env = MultiObjectiveQAEnv(bm25, max_turns=4)
    env.reset(tasks)
    for turn in range(3):
        replies = [env.expert(i, turn) for i in range(len(tasks))]
        assert all(("<search>" in r) == (turn < 2) for r in replies), replies
        _, rewards, dones, infos = env.step(replies)
    assert dones == [True] * 3 and [info["per_question_em"] for info in infos] == [[1.0, 1.0]] * 3
    assert tasks[0]["questions"][1] in env.expert(0, 1)
    closed = MultiObjectiveQAEnv(None, max_turns=4)
    closed.reset(tasks[:1])
    assert closed.expert(0, 0).startswith("<think>") and "<answer>" in closed.expert(0, 0)
