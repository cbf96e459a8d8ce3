"""checkpoint.init_from: a fresh run starts from another run's controller, read only; its
own step, optimizer and tree start fresh; the refusals name their cause."""

import os

import jax
import numpy as np
import pytest

from tests.rl import train_config

pytestmark = pytest.mark.slow


def make_trainer(out_dir, model, engine, steps=1, model_path="", policy=None, lora_rank=0, **checkpoint):
    from activemem_jax.rl.trainer import Trainer

    cfg = train_config.get_config()
    cfg.out_dir = str(out_dir)
    cfg.model.path = model_path
    cfg.train.update(steps=steps)
    cfg.policy.update(**(policy or {}))
    cfg.lora.rank = lora_rank
    cfg.log.tensorboard = False
    cfg.checkpoint.update(async_save=False, **checkpoint)
    return Trainer(cfg, model=model, engine=engine)


def snapshot(directory) -> dict:
    """Every file and folder under `directory`, with its modification time."""
    out = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = os.path.join(root, name)
            out[os.path.relpath(path, directory)] = os.stat(path).st_mtime_ns
    return out


@pytest.fixture(scope="module")
def source(tmp_path_factory, tiny_dir, tiny_model, tiny_engine):
    """A run's checkpoint at step 3 (its controller moved off the init, so a fresh init
    cannot pass for it; saved without training: the continual test trains from one),
    recording the tiny model's path: (its directory, its controller as numpy arrays)."""
    out = tmp_path_factory.mktemp("source")
    trainer = make_trainer(out, tiny_model, tiny_engine, model_path=tiny_dir)
    try:
        trainer.params["controller"] = jax.tree.map(lambda x: x + 0.5, trainer.params["controller"])
        trainer.step = 3
        trainer.save()
        controller = jax.tree.map(np.asarray, trainer.params["controller"])
    finally:
        trainer.close()
    return str(out), controller


def test_a_fresh_run_starts_from_the_checkpoints_controller_and_leaves_it_unchanged(
        tmp_path, source, tiny_dir, tiny_model, tiny_engine):
    from activemem_jax.rl.checkpoints import Checkpoints

    src, controller = source
    before = snapshot(src)
    out = tmp_path / "next"
    trainer = make_trainer(out, tiny_model, tiny_engine, model_path=tiny_dir, init_from=src)
    try:
        assert trainer.step == 0 and trainer.init_from == {"path": os.path.abspath(src), "step": 3}
        jax.tree.map(np.testing.assert_array_equal, controller, jax.tree.map(np.asarray, trainer.params["controller"]))
        jax.tree.map(np.testing.assert_array_equal, controller,  # the reference is where this run began
                     jax.tree.map(np.asarray, trainer.ref_params["controller"]))
        jax.tree.map(np.testing.assert_array_equal, controller, jax.tree.map(np.asarray, trainer.policy.params))
        trainer.params["controller"] = jax.tree.map(lambda x: x - 0.25, trainer.params["controller"])
        trainer.save()  # its own checkpoint (of other params, so a resume below can tell them apart)
        own = jax.tree.map(np.asarray, trainer.params["controller"])
    finally:
        trainer.close()
    ckpt = Checkpoints(str(out / "checkpoints"), read_only=True)
    try:
        assert ckpt.steps() == [0]
        meta = ckpt.read_meta(0)
    finally:
        ckpt.close()
    assert meta["init_from"]["step"] == 3 and meta["backbone"]["path"] == os.path.realpath(tiny_dir)
    assert meta["backbone"]["hidden_size"] == tiny_model.config.hidden_size
    assert snapshot(src) == before  # read only: no file added, removed or touched
    # a run with checkpoints of its own resumes them; init_from is ignored
    again = make_trainer(out, tiny_model, tiny_engine, model_path=tiny_dir, init_from=src)
    try:
        assert again.step == 0 and again.init_from is None and again.ckpt.steps() == [0]
        jax.tree.map(np.testing.assert_array_equal, own, jax.tree.map(np.asarray, again.params["controller"]))
    finally:
        again.close()


def test_init_from_refusals_name_their_cause(tmp_path, source, tiny_model, tiny_engine):
    from activemem_jax import schema
    from activemem_jax.rl.checkpoints import CheckpointMismatch

    src, _ = source
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="holds no checkpoint"):
        make_trainer(tmp_path / "a", tiny_model, tiny_engine, init_from=str(empty))
    assert not os.listdir(empty)
    with pytest.raises(FileNotFoundError, match="no such directory"):
        make_trainer(tmp_path / "b", tiny_model, tiny_engine, init_from=str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match=r"checkpoint.init_step=7: .* holds steps \[3\]"):
        make_trainer(tmp_path / "c", tiny_model, tiny_engine, init_from=src, init_step=7)
    with pytest.raises(CheckpointMismatch, match=r"controller/\S+: checkpoint \(\d+(, \d+)*\) vs model \(\d+"):
        make_trainer(tmp_path / "d", tiny_model, tiny_engine, policy={"hidden": 32}, init_from=src)
    with pytest.raises(CheckpointMismatch, match=r"another backbone \(model.path: checkpoint '.+' vs this run "
                                                 r"'/elsewhere/model'\)"):
        make_trainer(tmp_path / "e", tiny_model, tiny_engine, model_path="/elsewhere/model", init_from=src)
    with pytest.raises(schema.ConfigError, match="checkpoint.init_step=3 names a step of checkpoint.init_from"):
        make_trainer(tmp_path / "f", tiny_model, tiny_engine, init_step=3)
    for e in ("e", "d"):  # a refused run writes no checkpoint
        assert not [n for n in os.listdir(tmp_path / e / "checkpoints") if n.isdigit()]


def test_lora_comes_along_when_both_runs_have_it(tmp_path, source, tiny_model, tiny_engine):
    from activemem_jax.rl.checkpoints import CheckpointMismatch

    src, controller = source
    fresh = make_trainer(tmp_path / "lora", tiny_model, tiny_engine, lora_rank=2, init_from=src)
    try:  # the source has no LoRA: the controller comes, the adapters start fresh
        jax.tree.map(np.testing.assert_array_equal, controller, jax.tree.map(np.asarray, fresh.params["controller"]))
        fresh.params["lora"] = jax.tree.map(lambda x: x + 1.0, fresh.params["lora"])
        fresh.save()
        adapters = jax.tree.map(np.asarray, fresh.params["lora"])
    finally:
        fresh.close()
    with_lora = make_trainer(tmp_path / "lora2", tiny_model, tiny_engine, lora_rank=2, init_from=str(tmp_path / "lora"))
    try:
        jax.tree.map(np.testing.assert_array_equal, adapters, jax.tree.map(np.asarray, with_lora.params["lora"]))
    finally:
        with_lora.close()
    with pytest.raises(CheckpointMismatch, match="holds LoRA adapters .* this run has lora.rank=0"):
        make_trainer(tmp_path / "no_lora", tiny_model, tiny_engine, init_from=str(tmp_path / "lora"))


def test_backbone_records_compare_on_the_fields_both_hold():
    from activemem_jax.rl.checkpoints import backbone_mismatch

    assert backbone_mismatch({"path": "/a", "hidden_size": 64}, {"hidden_size": 64}) == ""
    assert backbone_mismatch({}, {"path": "/b"}) == ""  # a checkpoint written before records were kept
    assert backbone_mismatch({"hidden_size": 64, "num_layers": 2}, {"hidden_size": 576, "num_layers": 2}) == \
        "model.hidden_size: checkpoint 64 vs this run 576"


def test_the_after_rows_of_a_lora_run_decode_with_its_adapters(tmp_path, tiny_model, tiny_engine, monkeypatch):
    """launch.train's before / after evaluation: before decodes with the backbone's own
    weights, after with the trained adapters merged in (it decoded with the backbone's own
    weights too until this was fixed: a LoRA run's two rows came out identical)."""
    from launch import held_out
    from launch import train as train_launch

    trainer = make_trainer(tmp_path / "run", tiny_model, tiny_engine, lora_rank=2)
    try:
        trainer.params["lora"] = jax.tree.map(lambda x: x + 0.05, trainer.params["lora"])  # trained: B != 0
        seen = []
        monkeypatch.setattr(train_launch, "held_out", lambda t: None)
        monkeypatch.setattr(held_out, "evaluate_held_out",
                            lambda model, engine, ts, run, base, restore: seen.append(engine._params) or [])
        train_launch.evaluate_before_after(trainer)
        leaves = lambda state: [np.asarray(x) for x in jax.tree.leaves(state)]  # noqa: E731
        before, after = leaves(seen[0]), leaves(seen[1])
        assert all(np.array_equal(b, m) for b, m in zip(before, leaves(tiny_model.state)))
        assert any(not np.array_equal(a, m) for a, m in zip(after, leaves(tiny_model.state)))
    finally:
        tiny_engine.set_weights(tiny_model.state)
        trainer.close()
