"""Question answering over FlashRAG files (multi_objective_qa: MEM1's composition;
single_qa: the paper's Table 9), and the search backends the retrieval tasks share."""

from __future__ import annotations

from activemem_jax.tasks._registry import TaskSet, register


def _path(d, field: str, what: str) -> str:
    import os

    path = d.get(field, "")
    if not path:
        raise ValueError(f"data.{field} is empty: give the path of {what}")
    if not os.path.exists(path):
        raise FileNotFoundError(f"data.{field}={path!r}: {what} not found (datasets are never downloaded; "
                                "put the file there or fix the path)")
    return path


def qa_retriever(d):
    """The QA tasks' search backend: `index` (a directory `python -m
    activemem_jax.data.index build` wrote), else `corpus` (a JSONL corpus, indexed in
    memory), else `retrieval_url` (a Search-R1 retrieval server), else closed-book."""
    if d.index:
        from activemem_jax.data.index import IndexRetriever

        return IndexRetriever(_path(d, "index", "the retrieval index directory"))
    if d.corpus:
        from activemem_jax.data.retrieval import BM25Retriever, load_corpus

        return BM25Retriever(load_corpus(_path(d, "corpus", "the JSONL corpus"), d.bad_rows))
    if d.retrieval_url:
        from activemem_jax.data.retrieval import RemoteRetriever

        return RemoteRetriever(d.retrieval_url)
    from activemem_jax.data.retrieval import ClosedBook

    return ClosedBook()


def corpus_search(d, documents):
    """The search backend of a task family that ships its corpus (the synthetic world,
    BrowseComp-Plus): `retrieval_url` when given, else BM25 over `documents`, else None."""
    if d.retrieval_url:
        from activemem_jax.data.retrieval import RemoteRetriever

        return RemoteRetriever(d.retrieval_url)
    if not documents:
        return None
    from activemem_jax.data.retrieval import BM25Retriever

    return BM25Retriever(documents)


def qa_env(d, retriever):
    """A factory of MEM1's multi-objective QA environment over `retriever`."""
    from activemem_jax.envs import MultiObjectiveQAEnv

    return lambda max_turns=None: MultiObjectiveQAEnv(retriever, max_turns=max_turns or d.max_turns,
                                                      topk=d.retrieval_topk,
                                                      format_reward=d.format_reward)


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

    files = d.qa_files or ()
    if isinstance(files, str):
        files = (files,)
    if not files:
        raise ValueError("data.qa_files is empty: give FlashRAG JSONL files, e.g. ('<dir>/hotpotqa/train.jsonl',)")
    pool = []
    for k, f in enumerate(files):
        for row in load_flashrag(_path({"qa_files": f}, "qa_files", f"FlashRAG JSONL file {k}"),
                                 bad_rows=d.bad_rows):
            pool.append({**row, "id": f"{k}:{row['id']}"})
    return pool


@register("multi_objective_qa")
def multi_objective_qa(d, model=None) -> TaskSet:
    pool, retriever = _qa_pool(d), qa_retriever(d)
    tasks = []
    for n in d.n_objectives:
        tasks += compose(pool, n, d.n_tasks, d.seed, "qa")
    return TaskSet(tasks, qa_env(d, retriever), retriever)


@register("single_qa")
def single_qa(d, model=None) -> TaskSet:
    pool, retriever = _qa_pool(d), qa_retriever(d)
    n = min(d.n_tasks, len(pool)) if d.n_tasks else len(pool)
    return TaskSet(compose(pool, 1, n, d.seed, "qa1"), qa_env(d, retriever), retriever)
