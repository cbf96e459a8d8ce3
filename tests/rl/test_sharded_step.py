"""A train step on 8 fake CPU devices (fsdp 2 x tensor 4) equals the unsharded step;
micro-batches add up to the batch; GRPO's own learning rate scales the update, and the
tree head's own GRPO rate scales that head's alone."""

import jax
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from tests.rl import train_config

pytestmark = pytest.mark.slow


def trainer_and_rows(tmp_path, tiny_model, tiny_engine):
    """A trainer on the tiny model and one rollout's rows, with made-up nonzero advantages."""
    from activemem_jax.rl.trainer import Trainer

    cfg = train_config.get_config()
    cfg.out_dir = str(tmp_path)
    cfg.log.tensorboard = False
    trainer = Trainer(cfg, model=tiny_model, engine=tiny_engine)
    result, _ = trainer.rollout()
    n = sum(len(t.steps) for t in result.trajectories)
    adv = np.linspace(-1, 1, n).astype(np.float32)
    return trainer, trainer._rows(result, adv, adv[::-1].copy())


def test_sharded_train_step_equals_unsharded(tmp_path, tiny_dir, tiny_model, tiny_engine):
    from activemem_jax.models import load_pretrained
    from activemem_jax.rl.rows import HOST_KEYS
    from activemem_jax.rl.update import TrainStep
    from activemem_jax.sharding import make_mesh

    trainer, batch = trainer_and_rows(tmp_path, tiny_model, tiny_engine)
    try:
        params0 = jax.tree.map(np.asarray, trainer.params)
        # plain SGD: the updated params are then the gradients, well conditioned to compare
        # (Adam's first step lr * g / |g| turns rounding in near-zero gradients into sign flips)
        step = TrainStep(trainer.model.graphdef, trainer.policy.graphdef, trainer.loss_cfg, optax.sgd(0.1))
        opt0 = optax.sgd(0.1).init(params0)

        def run(model, mesh):
            rep = NamedSharding(mesh, PartitionSpec())
            rows = NamedSharding(mesh, PartitionSpec(("data", "fsdp")))
            params = jax.device_put(params0, rep)
            opt = jax.device_put(opt0, rep)
            b = {k: jax.device_put(v, rows) for k, v in batch.items() if k not in HOST_KEYS}
            b["split"] = batch["split"]  # the shared preamble once, the prefix forward only (rl/rows.py)
            b["old_logp"] = jax.device_put(np.asarray(batch["resp_old_logp"]) - 0.05, rows)
            p, _, m = step(params, opt, model.state, b)
            return jax.tree.map(np.asarray, p), {k: float(v) for k, v in m.items()}

        p1, m1 = run(tiny_model, tiny_model.mesh)
        mesh8 = make_mesh(fsdp=2, tensor=4)
        sharded = load_pretrained(tiny_dir, mesh=mesh8)
        kernel = sharded.state["layers"][0]["attn"]["q_proj"]["kernel"][...]
        assert len(kernel.sharding.device_set) == 8 and not kernel.sharding.is_fully_replicated
        p8, m8 = run(sharded, mesh8)
        for k in ("loss", "grad_norm", "entropy", "clip_frac"):
            assert np.isclose(m1[k], m8[k], rtol=1e-4, atol=1e-6), (k, m1[k], m8[k])
        assert m1["grad_norm"] > 0
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), p1, p8)
        moved = jax.tree.map(lambda a, b: float(np.abs(a - b).max()), p1, params0)
        assert max(jax.tree.leaves(moved)) > 0
    finally:
        trainer.close()


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_micro_batches_accumulate_to_the_full_batch(tmp_path, tiny_model, tiny_engine, agg):
    import dataclasses

    from activemem_jax.rl.update import TrainStep

    trainer, batch = trainer_and_rows(tmp_path, tiny_model, tiny_engine)
    try:
        batch["resp_mask"][::3] = False  # rows without tokens weigh differently per mode
        ((chunk, tree_only),) = trainer._chunks(batch)
        assert not tree_only
        chunk["old_logp"] = jax.numpy.asarray(batch["resp_old_logp"]) - 0.05
        out = {}
        for micro in (0, 4):
            loss_cfg = dataclasses.replace(trainer.loss_cfg, agg=agg, micro_batch_rows=micro)
            step = TrainStep(tiny_model.graphdef, trainer.policy.graphdef, loss_cfg, optax.sgd(0.1))
            params = jax.tree.map(jax.numpy.copy, trainer.params)
            p, _, m = step(params, optax.sgd(0.1).init(params), tiny_model.state, chunk)
            out[micro] = (jax.tree.map(np.asarray, p), {k: float(v) for k, v in m.items()})
        assert np.isclose(out[0][1]["loss"], out[4][1]["loss"], rtol=1e-5, atol=1e-7)
        assert np.isclose(out[0][1]["grad_norm"], out[4][1]["grad_norm"], rtol=1e-4)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), out[0][0], out[4][0])
    finally:
        trainer.close()


def test_grpo_learning_rate_scales_the_update(tmp_path, tiny_model, tiny_engine):
    """optim.lr_grpo: the GRPO step moves the parameters lr_grpo / lr_controller times as
    far as the same step at the SFT rate would (Adam, one shared optimizer state), and
    the SFT step is left at its own rate."""
    import dataclasses

    from activemem_jax.rl.trainer import Trainer
    from activemem_jax.rl.update import TrainStep

    trainer, batch = trainer_and_rows(tmp_path, tiny_model, tiny_engine)
    try:
        ((chunk, _),) = trainer._chunks(batch)
        chunk["old_logp"] = jax.numpy.asarray(batch["resp_old_logp"]) - 0.05
        params0 = jax.tree.map(np.asarray, trainer.params)
        moved = {}
        for scale in (1.0, 0.25):
            step = TrainStep(tiny_model.graphdef, trainer.policy.graphdef, trainer.loss_cfg, trainer.optimizer,
                             update_scale=scale)
            params = jax.tree.map(jax.numpy.asarray, params0)
            p, _, m = step(params, trainer.optimizer.init(params), tiny_model.state, chunk)
            assert m["grad_norm"] > 0
            moved[scale] = jax.tree.map(lambda a, b: np.asarray(a) - b, p, params0)
        params = jax.tree.map(jax.numpy.asarray, params0)  # the same scale given at call time
        p, _, _ = step(params, trainer.optimizer.init(params), tiny_model.state, chunk, scale=1.0)
        moved["call 1.0 on a 0.25 step"] = jax.tree.map(lambda a, b: np.asarray(a) - b, p, params0)
        flat = lambda t: np.concatenate([x.ravel() for x in jax.tree.leaves(t)])  # noqa: E731
        # a move is read back as new - old in float32: it is known to within the spacing of the
        # parameter's own value (one ulp of each), not to 1e-9 (a 0.1 weight's ulp is 7.5e-9)
        ulp = 2 * np.spacing(np.abs(flat(params0)).astype(np.float32))

        def assert_moves(actual, desired, rtol):
            bad = np.abs(actual - desired) > rtol * np.abs(desired) + ulp
            assert not bad.any(), (np.flatnonzero(bad)[:5], actual[bad][:5], desired[bad][:5])

        assert np.abs(flat(moved[1.0])).max() > 0
        assert_moves(flat(moved[0.25]), 0.25 * flat(moved[1.0]), 1e-4)
        assert_moves(flat(moved["call 1.0 on a 0.25 step"]), flat(moved[1.0]), 1e-5)
        # optim.lr_tree_grpo: the tree head alone moves tree_rate times as far, the rest as before
        step = TrainStep(tiny_model.graphdef, trainer.policy.graphdef,
                         dataclasses.replace(trainer.loss_cfg, tree_rate=4.0), trainer.optimizer)
        params = jax.tree.map(jax.numpy.asarray, params0)
        p, _, m = step(params, trainer.optimizer.init(params), tiny_model.state, chunk)
        assert m["grad_tree"] > 0
        fast = jax.tree.map(lambda a, b: np.asarray(a) - b, p, params0)

        def split(t):
            leaves = jax.tree_util.tree_leaves_with_path(t)
            is_tree = [[getattr(k, "key", None) for k in path][:2] == ["controller", "tree"] for path, _ in leaves]
            def pick(want):
                return np.concatenate([x.ravel() for (_, x), hit in zip(leaves, is_tree) if hit == want])
            return pick(True), pick(False)
        (tree_fast, rest_fast), (tree_base, rest_base) = split(fast), split(moved[1.0])
        assert np.abs(tree_base).max() > 0
        tree_ulp, rest_ulp = split(jax.tree.map(lambda a: 2 * np.spacing(np.abs(a).astype(np.float32)), params0))
        assert np.all(np.abs(tree_fast - 4.0 * tree_base) <= 1e-4 * np.abs(4.0 * tree_base) + 4 * tree_ulp)
        assert np.all(np.abs(rest_fast - rest_base) <= 1e-5 * np.abs(rest_base) + rest_ulp)
    finally:
        trainer.close()
    cfg = train_config.get_config()
    cfg.out_dir = str(tmp_path / "scaled")
    cfg.log.tensorboard = False
    cfg.optim.update(lr_controller=1e-2, lr_grpo=2.5e-3, decay_steps=5, final_lr_ratio=0.2)
    cfg.train.update(sft_steps=1)
    trainer = Trainer(cfg, model=tiny_model, engine=tiny_engine)
    try:
        # GRPO at its own rate keeps it; SFT follows the decay (1 at step 1, the floor from step 5)
        assert [trainer.lr_scale("grpo", s) for s in (1, 9)] == [0.25, 0.25]
        np.testing.assert_allclose([trainer.lr_scale("sft", s) for s in (1, 3, 5, 9)], [1.0, 0.6, 0.2, 0.2])
    finally:
        trainer.close()
    cfg.optim.update(decay_steps=-1)  # over the SFT warm start, whatever its length
    cfg.train.update(sft_steps=3)
    cfg.out_dir = str(tmp_path / "over_sft")
    trainer = Trainer(cfg, model=tiny_model, engine=tiny_engine)
    try:
        assert trainer.decay_steps == 3
        np.testing.assert_allclose([trainer.lr_scale("sft", s) for s in (1, 2, 3)], [1.0, 0.6, 0.2])
    finally:
        trainer.close()
    cfg.optim.update(lr_tree_grpo=1e-2)  # the tree head's GRPO rate over GRPO's (lr_grpo 2.5e-3)
    cfg.out_dir = str(tmp_path / "tree_rate")
    trainer = Trainer(cfg, model=tiny_model, engine=tiny_engine)
    try:
        assert trainer.loss_cfg.tree_rate == pytest.approx(4.0)
        assert trainer._update_fn("grpo", False).cfg.tree_rate == pytest.approx(4.0)
    finally:
        trainer.close()
    cfg.optim.update(lr_tree_grpo=-1.0)
    cfg.out_dir = str(tmp_path / "bad_tree")
    with pytest.raises(ValueError, match="optim.lr_tree_grpo"):
        Trainer(cfg, model=tiny_model, engine=tiny_engine)
    cfg.optim.update(lr_tree_grpo=0.0, decay_steps=5)
    cfg.optim.update(lr_grpo=-1.0)
    cfg.out_dir = str(tmp_path / "bad")
    with pytest.raises(ValueError, match="optim.lr_grpo"):
        Trainer(cfg, model=tiny_model, engine=tiny_engine)
    cfg.optim.update(lr_grpo=0.0, final_lr_ratio=1.5)
    with pytest.raises(ValueError, match="optim.final_lr_ratio"):
        Trainer(cfg, model=tiny_model, engine=tiny_engine)


def test_step_lr_factor_is_a_cosine_to_the_floor():
    """optim.decay_steps: by hand, 0.5 (1 + cos(pi f)) from 1 at step 1 to final_lr_ratio
    at step decay_steps, held after; no decay without decay_steps; -1 is the SFT warm
    start's length (all steps without one); anything below is refused, named."""
    import math
    import ml_collections
    from activemem_jax import schema
    from activemem_jax.build import decay_length, step_lr_factor

    f = [step_lr_factor(11, 0.1, s) for s in (1, 6, 11, 50)]
    assert f[0] == 1.0 and f[2] == pytest.approx(0.1) and f[3] == pytest.approx(0.1)
    assert f[1] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))  # 0.55
    assert step_lr_factor(0, 0.1, 1000) == 1.0
    train = ml_collections.ConfigDict({"algo": "grpo", "sft_steps": 600, "steps": 620})
    optim = ml_collections.ConfigDict({"decay_steps": -1})
    assert decay_length(optim, train) == 600
    train.update(sft_steps=0)
    assert decay_length(optim, train) == 620
    optim.decay_steps = 7
    assert decay_length(optim, train) == 7
    with pytest.raises(schema.ConfigError, match="optim.decay_steps=-2"):
        schema.section(schema.Optim, {"decay_steps": -2}, "optim")
