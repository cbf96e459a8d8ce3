"""Test session setup: 8 fake CPU devices (for the sharding tests), shared fixtures.

The embedded model and its transformers reference are loaded once per session.
"""

import os

from tests.child_env import COMPILE_FLAGS  # noqa: E402  (no jax import there)

os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count=8 {COMPILE_FLAGS}")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

# One persistent compilation cache per test run, in a temporary directory removed at the
# end: the entry points the tests start as subprocesses, and this process after it drops
# its compiled programs (below), load what was compiled earlier in the run instead of
# compiling it again. Nothing outside the run is read, so every run starts cold. A test
# that times a compile turns the cache off for itself (`no_compile_cache`).
if "ACTIVEMEM_COMPILE_CACHE" not in os.environ:
    _RUN_CACHE = tempfile.mkdtemp(prefix="activemem-test-xla-")
    os.environ["ACTIVEMEM_COMPILE_CACHE"] = _RUN_CACHE
    atexit.register(shutil.rmtree, _RUN_CACHE, ignore_errors=True)

import jax  # noqa: E402
import pytest  # noqa: E402

from activemem_jax.tooling import compile_cache  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")
compile_cache.enable()  # $ACTIVEMEM_COMPILE_CACHE (the run's directory above, or "off")


@pytest.fixture
def no_compile_cache(monkeypatch):
    """This test compiles afresh, in process and in the subprocesses it starts."""
    from jax._src import compilation_cache as jax_cache  # is_cache_used is decided once: reset it

    monkeypatch.setenv(compile_cache.ENV, "off")
    jax.config.update("jax_enable_compilation_cache", False)
    jax_cache.reset_cache()
    yield
    jax.config.update("jax_enable_compilation_cache", True)
    jax_cache.reset_cache()

# XLA:CPU maps each compiled program's code into its own memory mappings; a process may
# hold vm.max_map_count (65,530 by default) of them. The whole suite in one process
# compiles thousands of programs (about 5,000 mappings per module) and, past the limit,
# LLVM fails with "Cannot allocate memory" or XLA segfaults. Past this share of the
# limit, or past RSS_SHARE of the machine's memory split among the run's workers
# (`-n 2`: two processes), the compiled programs are dropped between modules; later calls
# load them from the run's compilation cache. Freed heap goes back to the system after
# every module (glibc keeps it otherwise: 0.9-1.7 GB a module, measured).
MAP_SHARE = 0.4
RSS_SHARE = 0.5


def _map_limit() -> int:
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 65530


def mappings() -> int:
    try:
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    except OSError:  # not Linux: no such limit to manage
        return 0


def _memory() -> tuple[int, int]:
    """(this process's resident bytes, the machine's bytes); (0, 0) where /proc is absent."""
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        with open("/proc/meminfo") as f:
            total = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
        return rss, total
    except (OSError, ValueError, StopIteration):
        return 0, 0


def _release_freed_heap():
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


@pytest.fixture(scope="module", autouse=True)
def _bounded_compiled_programs():
    yield
    rss, total = _memory()
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if mappings() > MAP_SHARE * _map_limit() or rss > RSS_SHARE * total / workers:
        import gc

        jax.clear_caches()
        gc.collect()
    _release_freed_heap()


# The longest files first (seconds measured in one process, 2026-12-07): with `-n 2
# --dist loadfile` the two workers start on them, and the README demo (a training run in a
# subprocess) trains from the first minute instead of the last ones.
LONGEST_FIRST = (
    "tests/rl/test_readme_demo.py",             # 339
    "tests/rl/test_trainer.py",                 # 275
    "tests/activemem/test_rollout.py",          # 169
    "tests/engine/test_engine.py",              # 145
    "tests/models/test_decode_kernel.py",       # 133
    "tests/launch/test_ablation_table.py",      # 122
    "tests/activemem/test_memory_acts.py",      # 120
    "tests/hymem/test_end_to_end.py",           # 113
    "tests/rl/test_sft_and_demo.py",            # 112
    "tests/activemem/test_recall_baselines.py", # 108
    "tests/activemem/test_evaluate.py",         # 99
    "tests/rl/test_resume.py",                  # 86
    "tests/rl/test_multiprocess.py",            # 74
    "tests/server/test_fuzz_soak.py",           # 71
)


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest in order


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
