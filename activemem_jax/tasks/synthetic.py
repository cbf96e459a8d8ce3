"""The synthetic world (data/synthetic_world.py) as a task family, for both papers: the
one place its task set is built (ActiveMem's training and evaluation, HyMem's agents)."""

from __future__ import annotations

from activemem_jax.tasks._registry import TaskSet, register
from activemem_jax.tasks.qa import corpus_search, qa_env


@register("synthetic")
def synthetic(d, model=None) -> TaskSet:
    """The world of `world_seed` (default `seed`) with `n_entities`; for each N in
    `n_objectives`, `n_tasks` N-objective tasks of `split` drawn with `seed` (a held-out
    evaluation keeps the world and moves the seed). Search: BM25 over the world's
    documents, or `retrieval_url`."""
    from activemem_jax.data import synthetic_world

    world = synthetic_world.generate(seed=d.get("world_seed", d.seed), n_entities=d.n_entities)
    tasks = []
    for n in d.n_objectives:
        tasks += synthetic_world.make_tasks(world, d.split, n, d.n_tasks, seed=d.seed)
    search = corpus_search(d, world.documents)
    return TaskSet(tasks, qa_env(d, search), search, documents=world.documents)
