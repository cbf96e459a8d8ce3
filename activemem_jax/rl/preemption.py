"""Preemption: SIGTERM or SIGINT ends a training run at a step boundary, with a checkpoint.

    from activemem_jax.rl import preemption
    preemption.install()          # launch.train does this; a library user may too
    trainer.train()               # raises preemption.Preempted after saving the step in flight

A TPU VM or SLURM sends SIGTERM some seconds before it takes the machine away. Once
`install()` has run, the first SIGTERM or SIGINT during training only records the signal:
the step in flight finishes, the trainer saves a checkpoint of it (unless the periodic
save just did), writes its metrics line, waits for the save to be on disk and raises
`Preempted`. Outside the training loop (the final evaluation, say) the signal raises
`Preempted` at once, since nothing there can be resumed. A second signal while the first
is pending stops the run at once. `launch.train` exits with `EXIT_PREEMPTED` (75,
EX_TEMPFAIL: try again): rerunning the same command resumes from that checkpoint with no
step lost or repeated. With several processes, every step ends with an all-gather of the
flag, so every host stops after the same step and saves it together.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Optional

import numpy as np

EXIT_PREEMPTED = 75
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Preempted(Exception):
    def __init__(self, signum: int, step: Optional[int] = None, saved: Optional[str] = None):
        self.signum, self.step, self.saved = signum, step, saved
        name = signal.Signals(signum).name
        where = f" after step {step}; checkpoint saved in {saved}" if step is not None else ""
        super().__init__(f"{name} received{where}")


class _State:
    installed = False
    signum: Optional[int] = None
    deferring = 0


_state = _State()


def _handle(signum, frame):
    if _state.deferring and _state.signum is None:
        _state.signum = signum  # the training loop stops after this step
        return
    _state.signum = signum
    raise Preempted(signum)


def install() -> None:
    """Handle SIGTERM and SIGINT as described above (main thread only; idempotent)."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("preemption.install() must run in the main thread (Python delivers signals there)")
    for s in SIGNALS:
        signal.signal(s, _handle)
    _state.installed = True


def reset() -> None:
    """Forget a recorded signal (tests; a run that handled it)."""
    _state.signum = None


@contextlib.contextmanager
def deferred():
    """Inside: a first signal is recorded, not raised (the training loop's steps)."""
    _state.deferring += 1
    try:
        yield
    finally:
        _state.deferring -= 1


def requested(hosts=None) -> Optional[int]:
    """The signal to stop for, agreed by every host (None: go on)."""
    local = _state.signum
    if hosts is not None and hosts.count > 1:
        flags = hosts.allgather(np.asarray([local or 0], np.int32))
        agreed = int(np.max(flags))
        return agreed or None
    return local


__all__ = ["EXIT_PREEMPTED", "Preempted", "deferred", "install", "requested", "reset"]
