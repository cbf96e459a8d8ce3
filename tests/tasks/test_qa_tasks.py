"""The real-data tasks of activemem_jax/tasks/ (MEM1's composition over FlashRAG files, single QA,
GSM8K/MATH) from fixture files, with the data errors they must name."""

import json

import ml_collections
import pytest

from activemem_jax.data import index as idx
from activemem_jax.tasks import BUILDERS, build_section, build_tasks, compose

QUESTIONS = [("who founded Velmor?", ["Ada Kest"]), ("when was Velmor founded?", ["1821"]),
             ("where was Ada Kest born?", ["Ostra"]), ("what river crosses Ostra?", ["Lenn", "the Lenn"]),
             ("who wrote the Velmor charter?", ["Ada Kest"]), ("what is Ostra's province?", ["Marrow"])]
DOCS = [{"docid": "d1", "title": "Velmor", "text": "Velmor was founded in 1821 by Ada Kest, who wrote its charter."},
        {"docid": "d2", "title": "Ada Kest", "text": "Ada Kest was born in Ostra."},
        {"docid": "d3", "title": "Ostra", "text": "Ostra lies on the Lenn in the province of Marrow."}]


def jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def files(tmp_path):
    hotpot = jsonl(tmp_path / "hotpotqa.jsonl", [{"id": f"h{i}", "question": q, "golden_answers": a}
                                                 for i, (q, a) in enumerate(QUESTIONS[:4])])
    nq = jsonl(tmp_path / "nq.jsonl", [{"id": f"n{i}", "question": q, "golden_answers": a}
                                       for i, (q, a) in enumerate(QUESTIONS[4:])])
    corpus = jsonl(tmp_path / "corpus.jsonl", DOCS)
    return hotpot, nq, corpus


def section(**kw):
    base = dict(name="multi_objective_qa", qa_files=(), index="", corpus="", retrieval_url="", seed=0,
                n_objectives=(1, 2), n_tasks=3, max_turns=6, retrieval_topk=2, format_reward=0.0)
    return ml_collections.ConfigDict({**base, **kw})


def test_every_task_family_is_registered():
    assert {"synthetic", "recall", "first_token", "multi_objective_qa", "single_qa", "gsm8k", "math"} <= set(BUILDERS)


def test_multi_objective_qa_composes_as_mem1_and_answers_with_retrieval(files, tmp_path):
    hotpot, nq, corpus = files
    tasks, make_env, search = build_section(section(qa_files=(hotpot, nq), corpus=corpus), None)
    assert [len(t["questions"]) for t in tasks] == [1, 1, 1, 2, 2, 2]
    two = tasks[3]
    assert two["question"] == "; ".join(two["questions"]) and len(set(two["sources"])) == 2
    gold = dict(QUESTIONS)
    assert all(a == gold[q] for t in tasks for q, a in zip(t["questions"], t["answers"]))
    assert compose([{"id": "x", "question": q, "answers": a} for q, a in QUESTIONS], 2, 3, 0, "qa") == \
        compose([{"id": "x", "question": q, "answers": a} for q, a in QUESTIONS], 2, 3, 0, "qa")  # seeded
    env = make_env(4)
    prompt = env.reset([two])[0]
    assert all(q in prompt for q in two["questions"])
    obs, *_ = env.step(["<think>look</think><search>Velmor founded</search>"])
    assert "1821" in obs[0]
    golds = "; ".join(a[0] for a in two["answers"])
    _, rewards, dones, _ = env.step([f"<think>done</think><answer>{golds}</answer>"])
    assert rewards == [2.0] and dones == [True]
    # the same tasks over a streamed index, and closed-book
    idx.build(corpus, str(tmp_path / "ix"), progress=False)
    _, make_env, search = build_section(section(qa_files=(hotpot, nq), index=str(tmp_path / "ix")), None)
    assert search.search("Velmor founded", 1)[0]["docid"] == "d1"
    _, make_env, search = build_section(section(qa_files=(hotpot, nq)), None)
    assert search.search("Velmor founded", 3) == []


def test_single_qa_and_math_tasks(files, tmp_path):
    hotpot, nq, _ = files
    tasks, _, _ = build_section(section(name="single_qa", qa_files=(hotpot, nq), n_tasks=0), None)
    assert len(tasks) == 6 and all(len(t["questions"]) == 1 for t in tasks)
    gsm = jsonl(tmp_path / "gsm.jsonl", [{"question": "2 + 3?", "answer": "2 + 3 = 5\n#### 5"}])
    d = ml_collections.ConfigDict(dict(name="gsm8k", path=gsm, n_tasks=0, max_turns=4, delimiter=""))
    tasks, make_env, _ = build_section(d, None)
    env = make_env()
    env.reset(tasks)
    assert env.step(["The sum is \\boxed{5}."])[1] == [1.0]
    d.delimiter = "\n\n"
    _, make_env, _ = build_section(d, None)
    assert type(make_env(3)).__name__ == "SegmentedEnv"


def test_missing_or_broken_data_names_the_field_and_the_place(files, tmp_path):
    hotpot, nq, corpus = files
    with pytest.raises(FileNotFoundError, match=r"data.qa_files='/nowhere/hotpot.jsonl'"):
        build_section(section(qa_files=("/nowhere/hotpot.jsonl",)), None)
    with pytest.raises(FileNotFoundError, match=r"data.index='/nowhere/ix'"):
        build_section(section(qa_files=(hotpot,), index="/nowhere/ix"), None)
    with pytest.raises(ValueError, match="data.qa_files is empty"):
        build_section(section(), None)
    with pytest.raises(ValueError, match=r"data.name='hotpot'"):
        build_section(section(name="hotpot"), None)
    dup = jsonl(tmp_path / "dup.jsonl", [{"id": "a", "question": "q1", "golden_answers": ["x"]},
                                         {"id": "a", "question": "q2", "golden_answers": ["y"]}])
    with pytest.raises(ValueError, match="row 2 repeats id 'a' of row 1"):
        build_section(section(qa_files=(dup,)), None)
    empty = jsonl(tmp_path / "empty.jsonl", [{"id": "a", "question": "q1", "golden_answers": ["", " "]}])
    with pytest.raises(ValueError, match="row 1 has no non-empty golden answer"):
        build_section(section(qa_files=(empty,)), None)
    torn = jsonl(tmp_path / "torn.jsonl", [{"id": "a", "question": "q1", "golden_answers": ["x"]}, '{"id": "b", "qu'])
    with pytest.raises(ValueError, match=r"torn.jsonl:2: not JSON"):
        build_section(section(qa_files=(torn,)), None)
    with pytest.raises(ValueError, match="6 questions in the QA files; a 8-objective task needs 8"):
        build_section(section(qa_files=(hotpot, nq), n_objectives=(8,)), None)


@pytest.mark.parametrize("name", ["activemem_qwen2_5_1_5b", "activemem_smollm3_3b", "activemem_qwen3_8b"])
def test_paper_configs_train_on_the_papers_data_and_name_a_missing_file(name):
    import importlib

    module = importlib.import_module(f"configs.{name}")
    t7, t9 = module.get_config(), module.get_config("table9")
    assert (t7.data.name, tuple(t7.data.n_objectives), tuple(t7.eval.n_objectives)) == \
        ("multi_objective_qa", (2,), (1, 2, 4, 8, 16))
    assert t9.data.name == "single_qa" and module.get_config("synthetic").data.name == "synthetic"
    with pytest.raises(FileNotFoundError, match=r"data.qa_files='/path/to/flashrag/nq/train.jsonl'"):
        build_tasks(t7, None)
    with pytest.raises(ValueError, match="use one of"):
        module.get_config("table8")


def test_the_synthetic_family_is_one_task_set_for_both_papers():
    """ActiveMem's training and evaluation and HyMem's agents build the synthetic world's
    tasks through the one registered family: grouped by N, searched over the world, scored
    per question; a held-out set keeps the world (world_seed) and moves the task seed."""
    from activemem_jax.data import synthetic_world as sw
    from activemem_jax.envs import MultiObjectiveQAEnv

    d = ml_collections.ConfigDict(dict(name="synthetic", seed=3, n_entities=50, split="dev", n_objectives=(1, 2),
                                       n_tasks=2, max_turns=4))
    ts = build_section(d)
    world = sw.generate(seed=3, n_entities=50)
    assert ts.by_group() == {n: sw.make_tasks(world, "dev", n, 2, seed=3) for n in (1, 2)}
    assert ts.documents == world.documents and ts.search.search(ts.tasks[0]["questions"][0], 3)
    env = ts.make_env()
    assert isinstance(env, MultiObjectiveQAEnv) and env.max_turns == 4 and ts.make_env(7).max_turns == 7
    one, two = ts.tasks[0], ts.tasks[2]
    assert ts.score(one, one["answers"][0][0]) == 1.0 and ts.score(one, "no idea") == 0.0
    assert ts.score(two, f"{two['answers'][0][0]}; wrong") == 0.5
    held = build_section(ml_collections.ConfigDict({**d.to_dict(), "seed": 4, "world_seed": 3}))
    assert held.documents == world.documents and held.tasks != ts.tasks
    tasks, make_env, search = ts  # the tuple the builders returned before the TaskSet
    assert tasks is ts.tasks and search is ts.search


def test_an_agent_benchmark_is_refused_where_activemem_needs_an_environment(tmp_path):
    from configs.activemem_base import base_config

    cfg = base_config()
    cfg.data.update(name="gaia", path=str(tmp_path))
    (tmp_path / "metadata.jsonl").write_text('{"task_id": "t1", "Question": "q?", "Final answer": "a"}\n')
    assert build_section(cfg.data, None, "data").make_env is None
    with pytest.raises(ValueError, match="data.name='gaia' is an agent benchmark with no ActiveMem environment"):
        build_tasks(cfg, None)
