"""compile_clock counts compilation on any thread and nothing else."""

import threading

import jax
import jax.numpy as jnp

from activemem_jax.metrics import compile_clock


def test_counts_compiles_on_any_thread_and_not_cached_calls(no_compile_cache):
    f = jax.jit(lambda x: jnp.tanh(x) * 3.0 + jnp.sin(x))
    c0 = compile_clock.seconds()
    f(jnp.ones((7, 5))).block_until_ready()
    c1 = compile_clock.seconds()
    assert c1 > c0  # a new shape compiled
    for _ in range(3):
        f(jnp.ones((7, 5))).block_until_ready()
    assert compile_clock.seconds() == c1  # cached: nothing counted
    t = threading.Thread(target=lambda: f(jnp.ones((3, 2))).block_until_ready())
    t.start()
    t.join()
    assert compile_clock.seconds() > c1  # a compile on another thread (the engine's) counts too
