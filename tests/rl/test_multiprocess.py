"""launch/local_multiprocess.sh: 2 CPU processes on 127.0.0.1 form one JAX runtime and
complete training steps together."""

import json
import os
import subprocess

import pytest

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
