"""Kill a training process with SIGKILL after a checkpoint, resume it: the final
controller equals an uninterrupted run's; bad checkpoints give clear errors."""

import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from tests.child_env import child_env

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def train_cmd(model_dir, out_dir, steps=6):
    return [sys.executable, "-m", "launch.train", "--config", "tests/rl/train_config.py",
            f"--config.model.path={model_dir}", f"--config.out_dir={out_dir}",
            f"--config.train.steps={steps}"]


def clean_env():
    env = child_env()
    env.update(JAX_PLATFORMS="cpu", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def saved_steps(out_dir):
    d = os.path.join(out_dir, "checkpoints")
    return sorted(int(n) for n in os.listdir(d) if n.isdigit()) if os.path.isdir(d) else []


def final_params(out_dir, tiny_model):
    from activemem_jax.activemem import ActiveMem, PolicyConfig
    from activemem_jax.rl.checkpoints import Checkpoints
    from tests.rl import train_config

    cfg = train_config.get_config()
    policy = ActiveMem(tiny_model, None, PolicyConfig.from_dict(cfg.policy.to_dict()))
    ckpt = Checkpoints(os.path.join(out_dir, "checkpoints"), async_save=False)
    try:
        out = ckpt.restore({"controller": policy.params, "lora": {}}, tree=policy.memory_state)
    finally:
        ckpt.close()
    return out["step"], jax.tree.map(np.asarray, out["params"]), jax.tree.map(np.asarray, out["tree"])


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory, tiny_dir):
    """An uninterrupted 6-step run (steps 2, 4 and 6 saved): the reference of the resumed
    run, and the checkpoints the refusal test copies and damages."""
    out = str(tmp_path_factory.mktemp("straight") / "run")
    subprocess.run(train_cmd(tiny_dir, out), cwd=ROOT, env=clean_env(), check=True, capture_output=True,
                   timeout=600)
    return out


def test_kill_and_resume_equals_an_uninterrupted_run(tmp_path, tiny_dir, tiny_model, straight_run):
    env = clean_env()
    straight, broken = straight_run, str(tmp_path / "broken")
    proc = subprocess.Popen(train_cmd(tiny_dir, broken), cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 600
        while not saved_steps(broken) and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert saved_steps(broken) and proc.poll() is None, "no checkpoint before the run ended"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert max(saved_steps(broken)) < 6
    subprocess.run(train_cmd(tiny_dir, broken), cwd=ROOT, env=env, check=True, capture_output=True, timeout=600)
    step_a, params_a, tree_a = final_params(straight, tiny_model)
    step_b, params_b, tree_b = final_params(broken, tiny_model)
    assert step_a == step_b == 6
    jax.tree.map(np.testing.assert_array_equal, params_a, params_b)
    jax.tree.map(np.testing.assert_array_equal, tree_a, tree_b)
    # evaluation loads a run's controller and tree into a policy
    from activemem_jax.activemem import ActiveMem, PolicyConfig
    from activemem_jax.rl.checkpoints import restore_policy
    from tests.rl import train_config

    policy = ActiveMem(tiny_model, None, PolicyConfig.from_dict(train_config.get_config().policy.to_dict()))
    assert restore_policy(os.path.join(straight, "checkpoints"), policy) == 6
    jax.tree.map(np.testing.assert_array_equal, params_a["controller"], jax.tree.map(np.asarray, policy.params))
    jax.tree.map(np.testing.assert_array_equal, tree_a, jax.tree.map(np.asarray, policy.memory_state))
    with open(os.path.join(broken, "metrics.jsonl")) as f:
        assert [int(line.split('"step": ')[1].split(",")[0].split("}")[0]) for line in f] == [1, 2, 3, 4, 5, 6]


def test_mismatched_and_corrupt_checkpoints_are_refused(tmp_path, tiny_dir, tiny_model, straight_run):
    import shutil

    from activemem_jax.activemem import ActiveMem, PolicyConfig
    from activemem_jax.rl.checkpoints import CheckpointMismatch, Checkpoints
    from tests.rl import train_config

    out = str(tmp_path / "run")
    shutil.copytree(straight_run, out)  # steps 2, 4 and 6 saved; the copy is damaged below
    cfg = train_config.get_config()
    other = ActiveMem(tiny_model, None, PolicyConfig.from_dict({**cfg.policy.to_dict(), "num_latents": 4}))
    ckpt = Checkpoints(os.path.join(out, "checkpoints"), async_save=False)
    try:
        with pytest.raises(CheckpointMismatch, match="does not match this config"):
            ckpt.restore({"controller": other.params, "lora": {}})
        # truncate every data file of the newest step's params item
        step_dir = os.path.join(out, "checkpoints", "6", "params")
        for root, _, files in os.walk(step_dir):
            for name in files:
                if "manifest" in name or name.endswith(".zarray") or "d/" in os.path.join(root, name):
                    with open(os.path.join(root, name), "r+b") as f:
                        f.truncate(3)
        good = ActiveMem(tiny_model, None, PolicyConfig.from_dict(cfg.policy.to_dict()))
        with pytest.raises(CheckpointMismatch, match="incomplete or corrupt") as bad:
            ckpt.restore({"controller": good.params, "lora": {}})
        message = str(bad.value)  # one short line, naming the step to fall back to (no spec dump)
        assert "\n" not in message and len(message) < 600 and "--config.checkpoint.step=4" in message
        # the newest readable step instead: step 6 is set aside (kept), step 4 restored
        out_ = ckpt.restore_readable({"controller": good.params, "lora": {}})
        assert out_["step"] == 4 and ckpt.steps() == [2, 4]
        assert os.path.isdir(os.path.join(out, "checkpoints", "6.unreadable", "params"))
    finally:
        ckpt.close()
    # the trainer: resume=False on a directory that holds a run refuses; checkpoint.step names a step
    from activemem_jax.rl.trainer import Trainer

    cfg.out_dir = out
    cfg.model.path = tiny_dir
    cfg.checkpoint.update(resume=False)
    with pytest.raises(ValueError, match="holds a run"):
        Trainer(cfg, model=tiny_model)
    cfg.checkpoint.update(resume=True, step=3)
    with pytest.raises(FileNotFoundError, match="checkpoint.step=3"):
        Trainer(cfg, model=tiny_model)
    cfg.checkpoint.update(step=2)
    trainer = Trainer(cfg, model=tiny_model)
    try:
        assert trainer.step == 2
    finally:
        trainer.close()
    cfg.checkpoint.update(resume=False, overwrite=True, step=0)  # the old run is set aside, not deleted
    trainer = Trainer(cfg, model=tiny_model)
    try:
        assert trainer.step == 0 and os.path.isdir(os.path.join(out, "checkpoints.replaced1", "2"))
    finally:
        trainer.close()


@pytest.mark.parametrize("args, line", [
    (["--config.train.stepz=3"], "--config.train.stepz: no such config field 'stepz' (did you mean 'steps'?)"),
    (["--config.train.steps=-1"], "train.steps=-1"),
    (["--config=configs/nope.py"], "--config=configs/nope.py: cannot load the config file"),
])
def test_a_bad_config_is_one_line_naming_the_field(args, line):
    cmd = [sys.executable, "-m", "launch.train", "--config", "tests/rl/train_config.py", "--config.model.path=x"]
    if args[0].startswith("--config="):
        cmd = [sys.executable, "-m", "launch.train"]
    proc = subprocess.run(cmd + args, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=300)
    errors = [x for x in proc.stderr.splitlines() if x.startswith("config error:")]
    assert proc.returncode == 2 and len(errors) == 1 and line in errors[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_a_signal_saves_the_step_in_flight_and_a_rerun_loses_and_repeats_nothing(tmp_path, tiny_dir):
    """A real SIGTERM to a real run between periodic saves (checkpoint.every is 50): the
    step in flight is saved, exit 75; the rerun resumes after it and ends at step 6 with one
    metrics line per step."""
    out = str(tmp_path / "run")
    metrics = os.path.join(out, "metrics.jsonl")
    cmd = train_cmd(tiny_dir, out) + ["--config.checkpoint.every=50", "--config.eval.enabled=False"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.time() + 600
        while time.time() < deadline and proc.poll() is None:
            if os.path.exists(metrics) and open(metrics).read().count("\n") >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before the signal"
        proc.send_signal(signal.SIGTERM)  # SIGINT takes the same path (rl/preemption.py)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 75, err[-2000:]
    assert "preempted: SIGTERM received after step" in err and "rerun the same command" in err
    (step,) = saved_steps(out)  # the step in flight, saved by the signal (no periodic save before 50)
    assert 2 <= step < 6
    with open(metrics) as f:
        assert [int(line.split('"step": ')[1].split(",")[0].split("}")[0]) for line in f] == list(range(1, step + 1))
    with open(os.path.join(out, "summary.json")) as f:
        assert '"preempted"' in f.read()
    subprocess.run(cmd, cwd=ROOT, env=clean_env(), check=True, capture_output=True, timeout=600)
    assert saved_steps(out)[-1] == 6
    with open(metrics) as f:
        assert [int(line.split('"step": ')[1].split(",")[0].split("}")[0]) for line in f] == [1, 2, 3, 4, 5, 6]
