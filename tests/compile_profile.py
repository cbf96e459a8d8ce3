"""Where a test's time goes: an opt-in pytest plugin that records, for every test, its wall
time and the seconds JAX spent tracing, lowering and compiling (JAX's own
/jax/core/compile/* duration events; a program loaded from the compilation cache is not a
compile). Subprocesses a test starts are not seen.

    .venv/bin/python -m pytest tests -q -p tests.compile_profile   # -> compile_profile.jsonl
    COMPILE_PROFILE=/tmp/p.jsonl ...                                # elsewhere

One JSON line per test: {"test", "wall", "compile", "trace", "lower", "compiles"}.
"""

import json
import os
import time
from collections import Counter

import pytest

_EVENT = "/jax/core/compile/"
_seconds: Counter = Counter()


def _on_duration(event: str, duration: float, **_):
    if event.startswith(_EVENT):
        _seconds[event[len(_EVENT):]] += duration
        if event.endswith("backend_compile_duration"):
            _seconds["compiles"] += 1


def pytest_configure(config):
    import jax.monitoring

    jax.monitoring.register_event_duration_secs_listener(_on_duration)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before, start = Counter(_seconds), time.perf_counter()
    yield
    d = _seconds - before
    row = {"test": item.nodeid, "wall": round(time.perf_counter() - start, 3),
           "compile": round(d["backend_compile_duration"], 3), "trace": round(d["jaxpr_trace_duration"], 3),
           "lower": round(d["jaxpr_to_mlir_module_duration"], 3), "compiles": int(d["compiles"])}
    with open(os.environ.get("COMPILE_PROFILE", "compile_profile.jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n")
