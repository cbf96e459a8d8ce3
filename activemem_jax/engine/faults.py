"""Faults stay with the requests they concern (the Engine's fault handling, a mixin).

Work done for some requests runs under `_guard(requests)`: an exception finishes those
requests with finish_reason "error" and the engine goes on. If the failed device call left
the decode state unusable (its buffers were donated), the state is rebuilt and every
request it held fails too. `_check_alive` turns a stopped engine thread into
`EngineUnavailable` for callers. Uses the Engine's `_slots`, `_lengths`, `_history`,
`_state`, `stats`, `_error`, `_stop`, `_thread` and its `_finish` and `_new_state`.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Sequence

import jax

from activemem_jax.engine.requests import EngineUnavailable, Request

FAULTS_IN_A_ROW = 8  # loop iterations in a row whose fault concerned no request: the thread stops
log = logging.getLogger("activemem_jax.engine.engine")


class Faults:
    def _check_alive(self):
        if self._error is not None:
            raise EngineUnavailable(f"the engine thread failed: {type(self._error).__name__}: "
                                    f"{self._error}") from self._error
        if self._stop.is_set() or not self._thread.is_alive():
            raise EngineUnavailable("the engine is closed")

    @contextlib.contextmanager
    def _guard(self, requests: Sequence[Request]):
        """Work on behalf of `requests`: an exception fails them (see _fault), not the engine."""
        try:
            yield
        except Exception as e:
            self._fault(e, requests)

    def _fault(self, error: Exception, requests: Sequence[Request]):
        """Finish `requests` with "error". If the device state did not survive (a failed
        call had its buffers donated), rebuild it: every request it held fails too."""
        self.stats["faults"] += 1
        self.last_fault = f"{type(error).__name__}: {error}"
        log.error("engine fault (failing %d request(s))", len(requests), exc_info=error)
        concerned = [r for r in requests if r is not None]
        if not self._state_usable():
            concerned += [r for r in self._slots if r is not None]
            self._slots = [None] * self.max_slots
            self._lengths = [0] * self.max_slots
            self._history = [[] for _ in range(self.max_slots)]
            self._state = self._new_state()
            self.stats["state_resets"] += 1
        for r in concerned:
            if r.done.is_set():
                continue
            if r in self._slots:  # its cache row may hold a half-written prompt
                self._history[self._slots.index(r)] = []
            self._finish(r, "error", error=self.last_fault)

    def _state_usable(self) -> bool:
        try:
            if any(leaf.is_deleted() for leaf in jax.tree.leaves(self._state)):
                return False
            jax.block_until_ready(self._state)  # a failed computation surfaces here
            return True
        except Exception:
            return False


__all__ = ["FAULTS_IN_A_ROW", "Faults"]
