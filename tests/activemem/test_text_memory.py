"""The retrieval-memory baselines (memorybank, expel): the text store, its BM25 retrieval,
the prompt budget, the forgetting, and their path through `evaluate`."""

import dataclasses
import math

import pytest

from activemem_jax.activemem import text_memory as tm
from activemem_jax.activemem import evaluate as ev
from activemem_jax.activemem.policy_config import PolicyConfig, Step, Trajectory


def _episodes(memory, rows):
    for task, responses, answer, reward in rows:
        memory.record(task, responses, answer, reward)


EPISODES = [("What is the capital of France?", ["search France", "Paris"], "Paris", 1.0),
            ("Who wrote Hamlet?", ["Marlowe"], "Marlowe", 0.0),
            ("What is the capital of Germany?", ["Berlin"], "Berlin", 0.5)]


def test_memorybank_stores_every_episode_and_expel_only_the_successful_ones():
    bank, expel = tm.TextMemory("memorybank"), tm.TextMemory("expel")
    kept = {"memorybank": [], "expel": []}
    for task, responses, answer, reward in EPISODES:
        kept["memorybank"].append(bank.record(task, responses, answer, reward))
        kept["expel"].append(expel.record(task, responses, answer, reward))
    assert kept == {"memorybank": [True, True, True], "expel": [True, False, True]}  # reward > 0
    assert [e.task for e in bank.entries] == [t for t, *_ in EPISODES]
    assert [(e.uid, e.task, e.answer, e.time) for e in expel.entries] == [
        (0, "What is the capital of France?", "Paris", 0), (1, "What is the capital of Germany?", "Berlin", 2)]
    assert bank.clock == expel.clock == 3 and (bank.stored, expel.stored) == (3, 2)
    # the interaction summary: the agent's turns on one line each, joined
    assert bank.entries[0].summary == "search France | Paris"
    assert bank.entries[0].block() == "Task: What is the capital of France?\nSteps: search France | Paris\nAnswer: Paris\n"
    long = tm.TextMemory("memorybank")
    long.record("q " * 500, ["x" * 400] * 5, "a\n" * 300, 0.0)  # every field cut at store time
    e = long.entries[0]
    assert (len(e.task), len(e.summary), len(e.answer)) == (tm.TASK_CHARS, tm.SUMMARY_CHARS, tm.ANSWER_CHARS)
    assert "\n" not in e.answer and e.summary.endswith("...")
    with pytest.raises(ValueError, match="policy"):
        tm.TextMemory("amem")


def test_bm25_retrieval_by_hand():
    """expel keys an entry by its task: "capital of France", "capital of Germany", "river in
    Egypt" tokenize (stopwords out, stemmed) to 2 terms each, so every document length is the
    average and BM25's term weight is idf x 1 / (1 + k1) = idf x 0.4, Lucene's
    idf = ln(1 + (N - df + 0.5) / (df + 0.5)), N = 3."""
    m = tm.TextMemory("expel", tm.TextMemoryConfig(topk=3))
    _episodes(m, [("capital of France", [], "Paris", 1), ("capital of Germany", [], "Berlin", 1),
                  ("river in Egypt", [], "Nile", 1)])
    idf_capital, idf_france = math.log(1 + 1.5 / 2.5), math.log(1 + 2.5 / 1.5)
    s = m.scores("France capital")
    assert s.tolist() == pytest.approx([0.4 * (idf_capital + idf_france), 0.4 * idf_capital, 0.0], rel=1e-5)
    assert [e.answer for e in m.retrieve("France capital")] == ["Paris", "Berlin"]  # score 0 is not retrieved
    assert [e.answer for e in m.retrieve("the Nile river")] == ["Nile"]
    assert m.retrieve("Hamlet") == [] and m.retrieve("") == [] and m.retrieve("of the") == []
    top1 = tm.TextMemory("expel", tm.TextMemoryConfig(topk=1))
    _episodes(top1, [("capital of France", [], "old", 1), ("capital of France", [], "new", 1)])
    assert [e.answer for e in top1.retrieve("France")] == ["new"]  # a tie goes to the newer entry
    # memorybank keys the whole entry: a query that names only an answer finds it
    bank = tm.TextMemory("memorybank")
    _episodes(bank, EPISODES)
    assert [e.uid for e in bank.retrieve("Marlowe")] == [1]


def test_the_prompt_prefix_respects_the_character_budget():
    header = tm.HEADERS["expel"]
    a = "Task: capital of France\nSteps: Paris\nAnswer: Paris\n"
    b = "Task: capital of Germany\nSteps: Berlin\nAnswer: Berlin\n"
    full = header + f"[1] {a}\n" + f"[2] {b}\n"

    def store(max_chars, topk=3):
        m = tm.TextMemory("expel", tm.TextMemoryConfig(topk=topk, max_chars=max_chars))
        _episodes(m, [("capital of France", ["Paris"], "Paris", 1), ("capital of Germany", ["Berlin"], "Berlin", 1)])
        return m

    text, tel = store(10_000).prefix("France capital")
    assert text == full and tel["memory_chars"] == len(full)
    assert (tel["memory_entries"], tel["memory_retrieved"], tel["memory_sources"]) == (2, 2, [0, 1])
    assert store(10_000, topk=1).prefix("France capital")[0] == header + f"[1] {a}\n"
    # room for the first entry and 45 characters of the second: the second is cut to them, "..." included
    budget = len(header) + len(a) + 5 + 45
    text, tel = store(budget).prefix("France capital")
    assert text == header + f"[1] {a}\n" + f"[2] {b}\n"[:41] + "...\n" and len(text) == budget
    assert tel["memory_retrieved"] == 2
    # fewer than MIN_ROOM characters left: the second entry is left out
    text, tel = store(len(header) + len(a) + 5 + tm.MIN_ROOM - 1).prefix("France capital")
    assert text == header + f"[1] {a}\n" and tel["memory_retrieved"] == 1 and tel["memory_sources"] == [0]
    # no room for any entry: no prefix at all, nothing counted as retrieved
    text, tel = store(len(header) + tm.MIN_ROOM - 1).prefix("France capital")
    assert (text, tel["memory_retrieved"], tel["memory_chars"]) == ("", 0, 0)
    for budget in range(0, len(full) + 2, 7):
        assert len(store(budget).prefix("France capital")[0]) <= budget


def test_an_empty_store_leaves_the_prompt_as_it_was():
    m = tm.TextMemory("memorybank")
    assert m.prefix("What is the capital of France?") == ("", {
        "memory_entries": 0, "memory_retrieved": 0, "memory_chars": 0, "memory_sources": [], "memory_forgotten": 0})

    class Env:
        flag = "kept"

        def reset(self, tasks):
            return [f"Solve: {t.get('q', 'it')}" for t in tasks]

    env = tm._Prefixed(Env(), m)  # the environment's own prompts, and its other attributes
    assert env.reset([{"q": "capital of France"}]) == ["Solve: capital of France"] and env.flag == "kept"
    m.record("capital of France", [], "Paris", 0)
    # the query: a task's text ("question"), else the environment's prompt
    first, second = env.reset([{"q": "capital of France"}, {"question": "capital"}])
    assert env.queries == ["Solve: capital of France", "capital"]
    assert first.startswith(tm.HEADERS["memorybank"]) and first.endswith("\n\nSolve: capital of France")
    assert second.startswith(tm.HEADERS["memorybank"]) and second.endswith("\n\nSolve: it")
    assert [t["memory_retrieved"] for t in env.telemetry] == [1, 1]


def test_memorybank_forgets_what_it_does_not_recall():
    """forget_tasks = 2: an entry is dropped once its age (tasks since stored or last put
    into a prompt) passes strength x 2; a recall adds 1 to its strength and resets its age."""
    m = tm.TextMemory("memorybank", tm.TextMemoryConfig(forget_tasks=2))
    m.record("capital of France", [], "Paris", 0)           # stored at clock 0
    m.record("who wrote Hamlet", [], "Marlowe", 0)          # clock 1
    assert m.prefix("boiling point of water")[1]["memory_entries"] == 2  # clock 2: France's age 2 <= 1 x 2
    m.record("boiling point of water", [], "100", 0)        # clock 2 -> 3
    text, tel = m.prefix("largest ocean")                   # clock 3: France's age 3 > 2: forgotten
    assert (tel["memory_forgotten"], tel["memory_entries"], m.forgotten) == (1, 2, 1)
    assert [e.task for e in m.entries] == ["who wrote Hamlet", "boiling point of water"]
    # recalled at clock 3 (strength 2): Hamlet survives until its age passes 4
    assert m.prefix("Hamlet")[1]["memory_sources"] == [1]
    assert (m.entries[0].strength, m.entries[0].time) == (2, 3)
    for q in ("a", "b", "c", "d"):
        m.record(q, [], "", 0)                              # clock 7: Hamlet's age 4, water's 5 > 2
    m.forget()
    assert [e.task for e in m.entries][:1] == ["who wrote Hamlet"] and "boiling point of water" not in [
        e.task for e in m.entries]
    m.record("e", [], "", 0)                                 # clock 8: Hamlet's age 5 > 4
    m.forget()
    assert "who wrote Hamlet" not in [e.task for e in m.entries]
    never = tm.TextMemory("memorybank", tm.TextMemoryConfig(forget_tasks=0))
    expel = tm.TextMemory("expel", tm.TextMemoryConfig(forget_tasks=1))
    for store in (never, expel):
        for i in range(10):
            store.record(f"capital {i}", [], "x", 1)
        assert store.forget() == 0 and len(store.entries) == 10


def test_config_fields_and_the_variant_names():
    from activemem_jax import schema
    from activemem_jax.config_files import load_config

    e = schema.Eval()  # one set of defaults: the eval section's and the store's
    assert tm.TextMemoryConfig.from_eval(e) == tm.TextMemoryConfig() == tm.TextMemoryConfig(3, 1500, 1, 100)
    assert tm.TextMemoryConfig.from_eval(dataclasses.replace(e, memory_topk=5, memory_chars=800)) == (
        tm.TextMemoryConfig(topk=5, max_chars=800))
    with pytest.raises(schema.ConfigError, match="eval.memory_topk=0"):
        dataclasses.replace(e, memory_topk=0).check()
    with pytest.raises(ValueError):
        tm.TextMemoryConfig(batch=0)
    cfg = load_config("configs/activemem_eval_synthetic.py", ["variants=('memorybank', 'expel', 'vanilla')"])
    assert schema.load_eval(cfg).variants == ("memorybank", "expel", "vanilla")
    for name in tm.POLICIES:  # vanilla's policy: no latents, no tree, the full history
        assert ev.variant_config(PolicyConfig(num_latents=4), name) == ev.variant_config(
            PolicyConfig(num_latents=4), "vanilla")
    with pytest.raises(ValueError, match="'expel', 'memorybank'"):
        ev.variant_config(PolicyConfig(), "amem")


class _FakeEnv:
    def reset(self, tasks):
        return [f"PROMPT {' '.join(t['questions'])}" for t in tasks]


class _FakePolicy:
    """A stand-in for ActiveMem: answers each task's gold when its id is even, and keeps
    the prompts and uids it was given."""
    seen: list = []

    def __init__(self, model, engine, config, seed=0):
        self.config = config

    def rollout(self, env, tasks, *, seed=0, uids=None, greedy=False, temperature=None, commit=True):
        prompts = env.reset(tasks)
        trajs = []
        for t, p, u in zip(tasks, prompts, uids if uids is not None else range(len(tasks))):
            _FakePolicy.seen.append((p, u))
            right = int(t["id"]) % 2 == 0
            answer = t["answers"][0][0] if right else "unknown"
            step = Step(prompt_ids=[0] * 10, latent_pos=[], response_ids=[0] * 3, response_logprobs=[0.0] * 3,
                        text=f"<answer>{answer}</answer>", observation="", h=None, p_bar=None, tree_action=0,
                        tree_logp=0.0, tree_mask=None, path=None)
            trajs.append(Trajectory(task=t, uid=u, steps=[step], reward=float(right), info={"answer": answer},
                                    peak_tokens=13, time_s=0.01))

        class Result:
            trajectories = trajs
        return Result()


class _Tokenizer:
    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": text.split()}


def test_evaluate_carries_the_store_across_tasks_in_order(monkeypatch):
    """Through `evaluate` with a stand-in policy and environment (no model): the store
    persists across the variant's tasks and N, the prompts of later tasks start with what
    it retrieved, rows carry the telemetry, and vanilla's rows and prompts have none of it."""
    monkeypatch.setattr(ev, "ActiveMem", _FakePolicy)
    _FakePolicy.seen = []
    model = type("Model", (), {"tokenizer": _Tokenizer()})()
    tasks = {1: [{"id": "0", "questions": ["capital of France"], "answers": [["Paris"]]},
                 {"id": "1", "questions": ["capital of France"], "answers": [["Paris"]]}],
             2: [{"id": "2", "questions": ["river of Egypt", "capital of France"], "answers": [["Nile"], ["Paris"]]}]}
    rows = ev.evaluate(model, None, None, PolicyConfig(), ["vanilla", "memorybank", "expel"], tasks,
                       lambda n: 2, make_env=lambda turns: _FakeEnv(),
                       text_memory=tm.TextMemoryConfig(topk=2, max_chars=1000))
    by = {v: [r for r in rows if r["variant"] == v] for v in ("vanilla", "memorybank", "expel")}
    assert all("memory_retrieved" not in r for r in by["vanilla"])
    bank = by["memorybank"]
    assert [r["memory_entries"] for r in bank] == [0, 1, 2]
    assert [r["memory_retrieved"] for r in bank] == [0, 1, 2]
    assert [r["memory_sources"] for r in bank] == [[], [0], [1, 0]]  # equal scores: the newer first
    assert [r["memory_stored"] for r in bank] == [1, 1, 1]
    expel = by["expel"]  # only task 0 succeeded before task 2: one exemplar
    assert [r["memory_entries"] for r in expel] == [0, 1, 1] and [r["memory_stored"] for r in expel] == [1, 0, 1]
    prompts = [p for p, _ in _FakePolicy.seen]
    assert prompts[:3] == ["PROMPT capital of France", "PROMPT capital of France", "PROMPT river of Egypt "
                           "capital of France"]  # vanilla: one batch, no prefix
    assert prompts[3] == "PROMPT capital of France"  # the first task meets an empty store
    assert prompts[4].startswith(tm.HEADERS["memorybank"] + "[1] Task: capital of France\n")
    assert prompts[4].endswith("\n\nPROMPT capital of France")
    assert len(prompts[4]) - len(prompts[3]) == bank[1]["memory_chars"] > 0
    assert prompts[7].startswith(tm.HEADERS["expel"] + "[1] Task: capital of France\nSteps: <answer>Paris")
    assert [u for _, u in _FakePolicy.seen] == [0, 1, 2] * 3  # every task keeps its sampling uid
    assert all(r["task_tokens"] == len(_FakeEnv().reset([tasks[r["n_objectives"]][0]])[0].split()) for r in rows)
    s = ev.summarize(rows)
    assert s["memorybank"][1]["memory_retrieved"] == 0.5 and s["memorybank"][1]["memory_stored"] == 2
    assert s["expel"][2]["memory_entries"] == 1 and "memory_retrieved" not in s["vanilla"][1]
    assert s["memorybank"][1]["em"] == 0.5  # the usual metrics are all there
