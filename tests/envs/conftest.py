import pytest


@pytest.fixture(scope="session")
def world():
    from activemem_jax.data import synthetic_world

    return synthetic_world.generate(seed=0, n_entities=2000)


@pytest.fixture(scope="session")
def bm25(world):
    from activemem_jax.data.retrieval import BM25Retriever

    return BM25Retriever(world.documents)
