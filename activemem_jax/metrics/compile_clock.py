"""Seconds this process has spent compiling (tracing, lowering, XLA compile), from JAX's
own monitoring events, on every thread (the engine compiles on its own).

    start, c0 = time.perf_counter(), compile_clock.seconds()
    ...                                                  # work that may compile
    run_time = time.perf_counter() - start - (compile_clock.seconds() - c0)

Used to report time per trajectory with compilation excluded: the first batch of a new
shape bucket would otherwise count minutes of XLA work as rollout time. `breakdown()`
splits the same seconds by phase and counts the XLA compiles (the test suite's
`-p tests.compile_profile` records it per test).
"""

from __future__ import annotations

import threading

EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
          "/jax/core/compile/backend_compile_duration")

PHASES = ("trace", "lower", "compile")  # EVENTS in order
_lock = threading.Lock()
_total = 0.0
_by_phase = dict.fromkeys(PHASES, 0.0)
_compiles = 0
_installed = False


def _listen(event: str, duration: float, **kwargs) -> None:
    global _total, _compiles
    if event in EVENTS:
        with _lock:
            _total += duration
            _by_phase[PHASES[EVENTS.index(event)]] += duration
            _compiles += event == EVENTS[-1]


def install() -> None:
    """Start counting (idempotent); `seconds()` calls it."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    from jax import monitoring

    monitoring.register_event_duration_secs_listener(_listen)


def seconds() -> float:
    """Compile seconds since counting began (the first call to `install` or `seconds`)."""
    install()
    with _lock:
        return _total


def breakdown() -> dict:
    """{"trace", "lower", "compile": seconds, "compiles": XLA compiles} since counting
    began (a program loaded from the persistent cache is not a compile)."""
    install()
    with _lock:
        return {**_by_phase, "compiles": _compiles}


__all__ = ["EVENTS", "PHASES", "breakdown", "install", "seconds"]
