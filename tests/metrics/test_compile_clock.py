"""compile_clock counts compilation on any thread and nothing else."""

import threading

import jax
import jax.numpy as jnp

from activemem_jax.metrics import compile_clock


def test_counts_compiles_on_any_thread_and_not_cached_calls(no_compile_cache):
    f = jax.jit(lambda x: jnp.tanh(x) * 3.0 + jnp.sin(x))
    x = jnp.ones((7, 5)).block_until_ready()  # made first: building it compiles programs of its own
    c0, b0 = compile_clock.seconds(), compile_clock.breakdown()
    f(x).block_until_ready()
    c1, b1 = compile_clock.seconds(), compile_clock.breakdown()
    assert c1 > c0  # a new shape compiled
    assert b1["compiles"] == b0["compiles"] + 1 and all(b1[k] > b0[k] for k in compile_clock.PHASES)
    assert abs(sum(b1[k] - b0[k] for k in compile_clock.PHASES) - (c1 - c0)) < 1e-9  # the phases split the total
    for _ in range(3):
        f(x).block_until_ready()
    assert compile_clock.seconds() == c1 and compile_clock.breakdown() == b1  # cached: nothing counted
    t = threading.Thread(target=lambda: f(jnp.ones((3, 2))).block_until_ready())
    t.start()
    t.join()
    assert compile_clock.seconds() > c1  # a compile on another thread (the engine's) counts too
