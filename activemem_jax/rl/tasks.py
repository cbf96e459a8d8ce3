"""Tasks by name, for training and evaluation alike: `data.name` in a training config
(`benchmark.name` in an evaluation config) picks a builder registered here.

    tasks, make_env, search = build_tasks(cfg, model)          # cfg.data
    tasks, make_env, search = build_section(cfg.benchmark, model)

A builder takes (section, model) and returns the tasks, a factory for a fresh
environment (`make_env()`, or `make_env(max_turns)` for a per-evaluation budget), and the
expert's search backend (a retriever, for SFT on retrieval tasks) or None. Add a task
family with one `@register("name")` line on its builder.

Registered: synthetic (the embedded world), recall, dossier (envs/dossier.py: streams of
entities with corrections, reminders and decoys), first_token, multi_objective_qa
(MEM1's composition: N questions drawn from FlashRAG JSONL files, joined with "; ",
answered with retrieval), single_qa (one question per task, the paper's Table 9),
gsm8k and math (the math environment; `delimiter` set: delimiter steps).

Retrieval for the QA tasks: `index` (a directory `python -m activemem_jax.data.index
build` wrote), else `corpus` (a JSONL corpus, indexed in memory), else `retrieval_url`
(a Search-R1 retrieval server), else closed-book (searches return nothing). A path that
does not exist stops the run with the field's name and the path.

Bad rows in the data files of the real-data tasks (qa_files, path): `bad_rows` "strict"
(the default) stops at the first, naming the file and the row; "skip" drops them with one
summary line per reason and merges exact duplicates (activemem_jax/data/bad_rows.py).
"""

from __future__ import annotations

from typing import Callable

BUILDERS: dict[str, Callable] = {}


def register(*names: str):
    def add(fn):
        for name in names:
            BUILDERS[name] = fn
        return fn
    return add


def build_tasks(cfg, model):
    """(train tasks, env factory, expert search or None) for cfg.data."""
    return build_section(cfg.data, model, "data")


def build_section(d, model, where: str = "benchmark"):
    """The same for any config section with a `name` (an evaluation's `benchmark`)."""
    if d.name not in BUILDERS:
        raise ValueError(f"{where}.name={d.name!r}: use one of {sorted(BUILDERS)}")
    from activemem_jax.data.bad_rows import check_policy

    check_policy(d.get("bad_rows", "strict"), f"{where}.bad_rows")
    return BUILDERS[d.name](d, model)


def _path(d, field: str, what: str) -> str:
    import os

    path = d.get(field, "")
    if not path:
        raise ValueError(f"data.{field} is empty: give the path of {what}")
    if not os.path.exists(path):
        raise FileNotFoundError(f"data.{field}={path!r}: {what} not found (datasets are never downloaded; "
                                "put the file there or fix the path)")
    return path


def _retriever(d):
    """The QA tasks' search backend (see the module docstring)."""
    if d.get("index", ""):
        from activemem_jax.data.index import IndexRetriever

        return IndexRetriever(_path(d, "index", "the retrieval index directory"))
    if d.get("corpus", ""):
        from activemem_jax.data.retrieval import BM25Retriever, load_corpus

        return BM25Retriever(load_corpus(_path(d, "corpus", "the JSONL corpus")))
    if d.get("retrieval_url", ""):
        from activemem_jax.data.retrieval import RemoteRetriever

        return RemoteRetriever(d.retrieval_url)
    from activemem_jax.data.retrieval import ClosedBook

    return ClosedBook()


def compose(pool: list, n: int, n_tasks: int, seed: int, prefix: str) -> list[dict]:
    """MEM1's multi-objective tasks: each draws n distinct questions from the pool and joins
    them with "; "; its answers are the questions' gold lists, in order."""
    import random

    if len(pool) < n:
        raise ValueError(f"{len(pool)} questions in the QA files; a {n}-objective task needs {n}")
    rng = random.Random(f"{seed}-{n}-{prefix}")
    tasks = []
    for i in range(n_tasks):
        qs = rng.sample(pool, n)
        tasks.append({"id": f"{prefix}-{n}obj-{seed}-{i:05d}", "question": "; ".join(q["question"] for q in qs),
                      "questions": [q["question"] for q in qs], "answers": [list(q["answers"]) for q in qs],
                      "sources": [q["id"] for q in qs]})
    return tasks


def _qa_pool(d) -> list[dict]:
    from activemem_jax.data.loaders import load_flashrag

    files = d.get("qa_files", ()) or ()
    if isinstance(files, str):
        files = (files,)
    if not files:
        raise ValueError("data.qa_files is empty: give FlashRAG JSONL files, e.g. ('<dir>/hotpotqa/train.jsonl',)")
    pool = []
    for k, f in enumerate(files):
        for row in load_flashrag(_path({"qa_files": f}, "qa_files", f"FlashRAG JSONL file {k}"),
                                 bad_rows=d.get("bad_rows", "strict")):
            pool.append({**row, "id": f"{k}:{row['id']}"})
    return pool


def _qa_env(d, retriever):
    from activemem_jax.envs import MultiObjectiveQAEnv

    return lambda max_turns=None: MultiObjectiveQAEnv(retriever, max_turns=max_turns or d.max_turns,
                                                      topk=d.get("retrieval_topk", 3),
                                                      format_reward=d.get("format_reward", 0.0))


@register("multi_objective_qa")
def _multi_objective_qa(d, model):
    pool, retriever = _qa_pool(d), _retriever(d)
    tasks = []
    for n in d.n_objectives:
        tasks += compose(pool, n, d.n_tasks, d.seed, "qa")
    return tasks, _qa_env(d, retriever), retriever


@register("single_qa")
def _single_qa(d, model):
    pool, retriever = _qa_pool(d), _retriever(d)
    n = min(d.n_tasks, len(pool)) if d.n_tasks else len(pool)
    return compose(pool, 1, n, d.seed, "qa1"), _qa_env(d, retriever), retriever


def _math_env(d):
    from activemem_jax.envs import MathEnv
    from activemem_jax.envs.segmented import SegmentedEnv

    delimiter = d.get("delimiter", "")
    return lambda max_turns=None: (SegmentedEnv(MathEnv(), delimiter, max_turns or d.max_turns) if delimiter
                                   else MathEnv())


@register("gsm8k", "math")
def _math(d, model):
    from activemem_jax.data.loaders import load_gsm8k, load_math

    rows = (load_gsm8k if d.name == "gsm8k" else load_math)(_path(d, "path", f"the {d.name} data"),
                                                            bad_rows=d.get("bad_rows", "strict"))
    rows = rows[: d.n_tasks] if d.get("n_tasks", 0) else rows
    tasks = [{**r, "questions": [r["question"]], "answers": [[r["answer"]]]} for r in rows]
    return tasks, _math_env(d), None


@register("synthetic")
def _synthetic(d, model):
    from activemem_jax.data import synthetic_world
    from activemem_jax.data.retrieval import BM25Retriever
    from activemem_jax.envs import MultiObjectiveQAEnv

    world = synthetic_world.generate(seed=d.seed, n_entities=d.n_entities)
    retriever = BM25Retriever(world.documents)
    tasks = []
    for n in d.n_objectives:
        tasks += synthetic_world.make_tasks(world, d.split, n, d.n_tasks, seed=d.seed)
    return tasks, (lambda max_turns=None: MultiObjectiveQAEnv(retriever, max_turns=max_turns or d.max_turns,
                                                              topk=d.retrieval_topk,
                                                              format_reward=d.format_reward)), retriever


@register("recall")
def _recall(d, model):
    from activemem_jax.envs.recall import RecallEnv, make_recall_tasks

    n_q = d.get("n_questions", 0) or d.n_facts
    if d.max_turns < d.n_facts + n_q:
        raise ValueError(f"data.n_facts={d.n_facts} and data.n_questions={n_q} need data.max_turns >= "
                         f"{d.n_facts + n_q} (a turn per fact and per question); it is {d.max_turns}")
    codes = recall_codes(d)
    tasks = make_recall_tasks(d.split, d.n_tasks, d.n_facts, seed=d.seed, n_questions=n_q, codes=codes)
    return tasks, (lambda: RecallEnv(d.split, codes=codes, max_turns=d.max_turns)), None


@register("dossier")
def _dossier(d, model):
    from activemem_jax.envs.dossier import DossierEnv, make_dossier_tasks, turns_per_episode

    sizes = d.dossier.to_dict() if "dossier" in d else {}
    turns = turns_per_episode(sizes)
    if d.max_turns < turns:
        raise ValueError(f"data.dossier needs {turns} turns per episode (facts, corrections, reminders, decoys, "
                         f"questions); data.max_turns is {d.max_turns}: raise it or shrink data.dossier")
    codes = recall_codes(d)
    tasks = make_dossier_tasks(d.split, seed=d.seed, codes=codes, **sizes)
    return tasks, (lambda: DossierEnv(d.split, codes=codes, max_turns=d.max_turns)), None


def recall_codes(d) -> tuple:
    """The recall task's closed answer set: data.codes, or envs.recall.CODES when empty."""
    from activemem_jax.envs.recall import CODES

    return tuple(d.get("codes", ()) or CODES)


@register("first_token")
def _first_token(d, model):
    from activemem_jax.envs import FirstTokenEnv

    vocab = model.config.vocab_size
    tasks = [{"id": f"ft-{i}", "prompt": p} for i, p in enumerate(d.prompts)]
    if d.target_words:  # reward: the response starts with one of these words
        tok = model.tokenizer
        targets = {tok(v, add_special_tokens=False)["input_ids"][0] for w in d.target_words for v in (w, " " + w)}
        predicate = targets.__contains__
    else:  # reward: the first token's id is in the lowest `fraction` of the vocabulary
        predicate = lambda t: t < vocab * d.fraction  # noqa: E731
    return tasks, (lambda: FirstTokenEnv(model.tokenizer, predicate)), None


__all__ = ["BUILDERS", "build_section", "build_tasks", "compose", "recall_codes", "register"]
