"""The persistent JAX compilation cache: a restarted server or run loads the programs an
earlier one compiled instead of compiling them again (every engine shape bucket, every
training step).

The entry points (serve, launch.train, launch.chat, launch.eval_*) call `enable()`: on by
default, in $XDG_CACHE_HOME/activemem-jax/xla (~/.cache/activemem-jax/xla). The
environment variable ACTIVEMEM_COMPILE_CACHE=<dir> moves it and ACTIVEMEM_COMPILE_CACHE=off
turns it off (so must anything that times compiles; the test suite points it at a
temporary directory of its own per run); the
server's --compile-cache says the same on its command line. On a pod, point every host
at one shared directory (a GCS bucket path works) or leave each its own.

    where = compile_cache.enable()          # the directory in use, or None (off)
    compile_cache.counts()                  # {"hits": ..., "misses": ...} in this process
"""

from __future__ import annotations

import logging
import os
from typing import Optional

ENV = "ACTIVEMEM_COMPILE_CACHE"
OFF = ("off", "none", "0", "false", "no", "")
MIN_COMPILE_S = 0.0  # every program: a restart recompiles nothing (small ones cost a small file)
log = logging.getLogger(__name__)
_counts = {"hits": 0, "misses": 0}
_listening = False


def default_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "activemem-jax", "xla")


def enable(where: Optional[str] = None) -> Optional[str]:
    """Use the persistent compilation cache in `where` (None: $ACTIVEMEM_COMPILE_CACHE, else
    the default directory; "off": none). Returns the directory in use, or None. A directory
    that cannot be created or written is reported and the run goes on without a cache."""
    import jax

    where = os.environ.get(ENV, default_dir()) if where is None else where
    if where.strip().lower() in OFF:
        return None
    if "://" not in where:  # a local directory: make sure it is usable before JAX writes there
        where = os.path.abspath(os.path.expanduser(where))
        try:
            os.makedirs(where, exist_ok=True)
            probe = os.path.join(where, f".write-test-{os.getpid()}")
            with open(probe, "w"):
                pass
            os.remove(probe)
        except OSError as e:
            log.warning("compilation cache off: cannot write to %s (%s); set %s to a writable "
                        "directory, or to 'off'", where, e, ENV)
            return None
    jax.config.update("jax_compilation_cache_dir", where)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_S)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    _listen()
    return where


def counts() -> dict:
    """Persistent-cache hits and misses of this process's compiles so far."""
    return dict(_counts)


def _listen():
    global _listening
    if _listening:
        return
    import jax

    def on_event(name: str, **_):
        if name == "/jax/compilation_cache/cache_hits":
            _counts["hits"] += 1
        elif name == "/jax/compilation_cache/cache_misses":
            _counts["misses"] += 1

    jax.monitoring.register_event_listener(on_event)
    _listening = True


__all__ = ["ENV", "counts", "default_dir", "enable"]
