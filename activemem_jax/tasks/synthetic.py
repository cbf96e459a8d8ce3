"""The synthetic world (data/synthetic_world.py) as a task family, for both papers: the
one place its task set is built (ActiveMem's training and evaluation, HyMem's agents)."""

from __future__ import annotations

from activemem_jax.tasks._registry import TaskSet, register
from activemem_jax.tasks.qa import corpus_search, qa_env


@register("synthetic")
def synthetic(d, model=None) -> TaskSet:
    """The world of `world_seed` (-1 or absent: `seed`) with `n_entities`; for each N in
    `n_objectives`, `n_tasks` N-objective tasks of `split` drawn with `seed` from the
    question `kinds` (default chain and constraint; a held-out evaluation keeps the world
    and moves the seed). Search: BM25 over the world's documents, or `retrieval_url`.
    The TaskSet's `source` is the world (the benchmarks' oracle clients read it)."""
    from activemem_jax.data import synthetic_world

    world_seed = d.world_seed
    world = synthetic_world.generate(seed=d.seed if world_seed < 0 else world_seed, n_entities=d.n_entities)
    kinds = tuple(d.kinds)
    tasks = []
    for n in d.n_objectives:
        tasks += synthetic_world.make_tasks(world, d.split, n, d.n_tasks, seed=d.seed, kinds=kinds)
    search = corpus_search(d, world.documents)
    return TaskSet(tasks, qa_env(d, search), search, documents=world.documents, source=world)


def synthetic_section(**fields):
    """A `data` section for the synthetic family: the schema's defaults (split "dev" for the
    benchmarks) with `fields` (world_seed, seed, n_objectives, n_tasks, kinds, ...)."""
    from activemem_jax.schema import Data, defaults

    return defaults(Data, **{"name": "synthetic", "split": "dev", **fields})
