"""Test session setup: 8 fake CPU devices (for the sharding tests), shared fixtures.

The embedded model and its transformers reference are loaded once per session.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")


@pytest.fixture(scope="session")
def one_device_mesh():
    from activemem_jax.sharding import make_mesh

    return make_mesh(devices=jax.devices()[:1])


@pytest.fixture(scope="session")
def embedded_model(one_device_mesh):
    from activemem_jax.models import load_pretrained

    return load_pretrained("embedded", dtype="float32", mesh=one_device_mesh)


@pytest.fixture(scope="session")
def embedded_hf_model():
    """transformers' own GGUF loader on the same file: the independent reference."""
    import torch
    from transformers import AutoModelForCausalLM

    from activemem_jax.models import embedded_gguf_path

    path = embedded_gguf_path()
    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path),
                                                 gguf_file=os.path.basename(path),
                                                 dtype=torch.float32)
    return model.eval()


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: loads the embedded 135M model or runs end to end "
                                       "(still run in CI)")


@pytest.fixture(scope="session")
def engine(embedded_model):
    """One engine over the embedded model for the whole session (compiles are shared)."""
    from activemem_jax.engine import Engine

    with Engine(embedded_model, max_slots=8, max_len=1024) as eng:
        yield eng


@pytest.fixture(scope="session")
def world():
    """The default synthetic world (seed 0, 2,000 entities) and its BM25 index."""
    from activemem_jax.data import synthetic_world

    return synthetic_world.generate(seed=0, n_entities=2000)


@pytest.fixture(scope="session")
def bm25(world):
    from activemem_jax.data.retrieval import BM25Retriever

    return BM25Retriever(world.documents)
