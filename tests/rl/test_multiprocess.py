"""launch/local_multiprocess.sh: 2 CPU processes on 127.0.0.1 form one JAX runtime,
complete training steps together, and a signal to one of them stops both after the same
step. One launch checks both (each launch compiles the whole training step twice over)."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]


def cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


def test_two_processes_train_together_and_a_signal_to_one_stops_both_after_the_same_step(tmp_path, tiny_dir):
    """The launcher's two processes complete steps over one 2-device mesh (each host's 16
    rows, 2 updates a step); SIGTERM to process 0 only: the per-step all-gather of the flag
    (rl/preemption.py) stops both after the same step, which both save together; both
    exit 75 and the launcher exits 75."""
    out = tmp_path / "run"
    env = {**os.environ, "PYTHON": sys.executable, "LOG_DIR": str(tmp_path)}
    script = subprocess.Popen(["bash", "launch/local_multiprocess.sh", "tests/rl/train_config.py",
                               f"--config.model.path={tiny_dir}", f"--config.out_dir={out}",
                               "--config.train.steps=40", "--config.checkpoint.every=100",
                               "--config.eval.enabled=False"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        metrics = out / "metrics.jsonl"
        deadline = time.time() + 600
        while time.time() < deadline and script.poll() is None:
            if metrics.exists() and metrics.read_text().count("\n") >= 2:
                break
            time.sleep(0.1)
        assert script.poll() is None, "the launcher ended before the signal"
        first = [p for p in children(script.pid) if "--config.distributed.process_id=0" in cmdline(p)]
        assert len(first) == 1, [cmdline(p) for p in children(script.pid)]
        os.kill(first[0], signal.SIGTERM)
        _, err = script.communicate(timeout=300)
    finally:
        if script.poll() is None:
            for p in children(script.pid):
                os.kill(p, signal.SIGKILL)
            script.kill()
    texts = [(tmp_path / f"activemem_proc{i}.log").read_text() for i in (0, 1)]
    assert script.returncode == 75, err[-3000:]
    assert "process 0 exited 75" in err and "process 1 exited 75" in err, err[-3000:]
    steps = [int(re.search(r"received after step (\d+)", t).group(1)) for t in texts]
    assert steps[0] == steps[1] and 2 <= steps[0] < 40
    assert sorted(int(n) for n in os.listdir(out / "checkpoints") if n.isdigit()) == [steps[0]]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, steps[0] + 1))
    assert all(r["rows"] == 16 and r["updates"] == 2 for r in rows)  # each host's 16 rows, 2 x 16 global
    for t in texts:
        assert "Traceback" not in t
