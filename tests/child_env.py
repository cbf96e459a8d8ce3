"""The environment of the entry points the tests start as subprocesses: this process's,
with one CPU device (the parent's 8 fake devices are for the sharding tests) and the
compile flag the whole suite runs with (tests/conftest.py)."""

import os

# XLA:CPU splits a program's code generation into parallel parts by default; with two test
# workers on two cores there is no idle core to run them on, and one part compiles 5-9%
# less CPU time (a compile-bound trainer test, 2026-12-07: 138 -> 132 s and 119 -> 108 s
# of user time, alternated). A compile setting only: the programs compute the same.
COMPILE_FLAGS = "--xla_cpu_parallel_codegen_split_count=1"


def child_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["XLA_FLAGS"] = COMPILE_FLAGS
    env.update(extra)
    return env
