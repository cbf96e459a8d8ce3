"""launch/local_multiprocess.sh: 2 CPU processes on 127.0.0.1 form one JAX runtime and
complete training steps together."""

import json
import os
import subprocess

import pytest

from tests.child_env import child_env

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_two_processes_complete_train_steps(tmp_path, tiny_dir):
    import sys

    out = tmp_path / "run"
    env = {**os.environ, "PYTHON": sys.executable, "LOG_DIR": str(tmp_path)}
    proc = subprocess.run(["bash", "launch/local_multiprocess.sh", "tests/rl/train_config.py",
                           f"--config.model.path={tiny_dir}", f"--config.out_dir={out}",
                           "--config.train.steps=2"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["rows"] == 16 and r["updates"] == 2 for r in rows)  # each host's 16 rows, 2 x 16 global
    assert (out / "checkpoints" / "2").is_dir()
    for i in (0, 1):
        assert "Traceback" not in (tmp_path / f"activemem_proc{i}.log").read_text()


def test_a_signal_to_one_process_stops_both_after_the_same_step(tmp_path, tiny_dir):
    """SIGTERM to process 0 only: the per-step all-gather of the flag (rl/preemption.py)
    stops both after the same step, which both save together, and both exit 75."""
    import re
    import signal
    import socket
    import sys
    import time

    out = tmp_path / "run"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = child_env()
    env["JAX_PLATFORMS"] = "cpu"
    procs, logs = [], []
    for i in (0, 1):
        logs.append(open(tmp_path / f"proc{i}.log", "w"))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "launch.train", "--config", "tests/rl/train_config.py",
             f"--config.model.path={tiny_dir}", f"--config.out_dir={out}", "--config.train.steps=40",
             "--config.checkpoint.every=100", "--config.eval.enabled=False", "--config.mesh.data=1",
             "--config.mesh.fsdp=-1", "--config.mesh.tensor=1",
             f"--config.distributed.coordinator_address=127.0.0.1:{port}",
             "--config.distributed.num_processes=2", f"--config.distributed.process_id={i}"],
            cwd=ROOT, env=env, stdout=logs[-1], stderr=subprocess.STDOUT))
    try:
        metrics = out / "metrics.jsonl"
        deadline = time.time() + 600
        while time.time() < deadline and all(p.poll() is None for p in procs):
            if metrics.exists() and metrics.read_text().count("\n") >= 2:
                break
            time.sleep(0.1)
        assert all(p.poll() is None for p in procs), "a process ended before the signal"
        procs[0].send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for f in logs:
            f.close()
    texts = [(tmp_path / f"proc{i}.log").read_text() for i in (0, 1)]
    assert codes == [75, 75], texts[1][-2000:]
    steps = [int(re.search(r"received after step (\d+)", t).group(1)) for t in texts]
    assert steps[0] == steps[1] and steps[0] < 40
    assert sorted(int(n) for n in os.listdir(out / "checkpoints") if n.isdigit()) == [steps[0]]
