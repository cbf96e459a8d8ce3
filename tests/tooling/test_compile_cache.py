"""The persistent compilation cache: a second process loads what the first compiled."""

import json
import os
import subprocess
import sys

from activemem_jax.tooling import compile_cache

PROGRAM = """
import json, os, time
import jax, jax.numpy as jnp
from activemem_jax.tooling import compile_cache
where = compile_cache.enable()

@jax.jit
def f(x):
    for _ in range(300):
        x = jnp.tanh(x @ x.T) + x
    return x

t0 = time.perf_counter()
f(jnp.ones((96, 96))).block_until_ready()
print(json.dumps({"where": where, "seconds": time.perf_counter() - t0, **compile_cache.counts()}))
"""


def run(env_value):
    env = {**os.environ, compile_cache.ENV: env_value, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": ""}
    out = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_hits_the_cache(tmp_path):
    where = str(tmp_path / "xla")
    cold, warm = run(where), run(where)
    assert cold["where"] == warm["where"] == where
    assert cold["misses"] >= 1 and cold["hits"] == 0
    assert warm["hits"] >= 1 and warm["misses"] == 0
    assert any(name.startswith("jit_f") for name in os.listdir(where))


def test_off_and_an_unwritable_directory_mean_no_cache(tmp_path, caplog):
    assert run("off")["where"] is None and run("off")["hits"] == 0
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert compile_cache.enable(str(blocker / "xla")) is None
    assert "cannot write" in caplog.text and compile_cache.ENV in caplog.text
    assert compile_cache.default_dir().endswith(os.path.join("activemem-jax", "xla"))
