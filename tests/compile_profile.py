"""Where a test's time goes: an opt-in pytest plugin that records, for every test, its wall
time and the seconds JAX spent tracing, lowering and compiling (`metrics.compile_clock`,
from JAX's own compile events; a program loaded from the compilation cache is not a
compile). Subprocesses a test starts are not seen.

    .venv/bin/python -m pytest tests -q -p tests.compile_profile   # -> compile_profile.jsonl
    COMPILE_PROFILE=/tmp/p.jsonl ...                                # elsewhere

One JSON line per test: {"test", "wall", "compile", "trace", "lower", "compiles"}.
"""

import json
import os
import time

import pytest

from activemem_jax.metrics import compile_clock


def pytest_configure(config):
    compile_clock.install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before, start = compile_clock.breakdown(), time.perf_counter()
    yield
    after = compile_clock.breakdown()
    row = {"test": item.nodeid, "wall": round(time.perf_counter() - start, 3),
           **{k: round(after[k] - before[k], 3) for k in compile_clock.PHASES},
           "compiles": after["compiles"] - before["compiles"]}
    with open(os.environ.get("COMPILE_PROFILE", "compile_profile.jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n")
