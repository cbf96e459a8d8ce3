"""Training tasks by name: `data.name` in a config picks a builder registered here.

    tasks, make_env, search = build_tasks(cfg, model)

A builder takes (cfg.data, model) and returns the training tasks, a factory for a fresh
environment, and the expert's search backend (a retriever, for SFT on retrieval tasks)
or None. Add a task family with one `@register("name")` line on its builder.
"""

from __future__ import annotations

from typing import Callable

BUILDERS: dict[str, Callable] = {}


def register(name: str):
    def add(fn):
        BUILDERS[name] = fn
        return fn
    return add


def build_tasks(cfg, model):
    """(train tasks, env factory, expert search or None) for cfg.data."""
    name = cfg.data.name
    if name not in BUILDERS:
        raise ValueError(f"data.name={name!r}: use one of {sorted(BUILDERS)}")
    return BUILDERS[name](cfg.data, model)


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
    return tasks, (lambda: MultiObjectiveQAEnv(retriever, max_turns=d.max_turns, topk=d.retrieval_topk,
                                               format_reward=d.format_reward)), retriever


@register("recall")
def _recall(d, model):
    from activemem_jax.envs.recall import RecallEnv, make_recall_tasks

    n_q = d.get("n_questions", 0) or d.n_facts
    if d.max_turns < d.n_facts + n_q:
        raise ValueError(f"data.n_facts={d.n_facts} and data.n_questions={n_q} need data.max_turns >= "
                         f"{d.n_facts + n_q} (a turn per fact and per question); it is {d.max_turns}")
    tasks = make_recall_tasks(d.split, d.n_tasks, d.n_facts, seed=d.seed, n_questions=n_q)
    return tasks, (lambda: RecallEnv(d.split, max_turns=d.max_turns)), None


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


__all__ = ["BUILDERS", "build_tasks", "register"]
