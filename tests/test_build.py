"""`activemem_jax.build`: a config's parts come out as its sections say (the tiny CPU
config on the session's embedded model), and a bad section stops with its field named."""

import jax
import pytest

from activemem_jax import build
from configs import activemem_tiny_cpu


def test_a_run_is_built_as_its_config_says(embedded_model, engine):
    cfg = activemem_tiny_cpu.get_config()
    with cfg.unlocked():
        cfg.policy.capacity = 48
        cfg.seed = 3
    policy = build.policy(cfg, embedded_model, engine)
    assert policy.model is embedded_model and policy.engine is engine
    assert policy.config.capacity == 48 and policy.config == build.policy_config(cfg)
    assert len(build.tasks(cfg, embedded_model).tasks) == cfg.data.n_tasks
    # the controller is initialised from the config's seed: another seed, other weights
    other = build.policy(cfg, embedded_model, engine, seed=4)
    same = build.policy(cfg, embedded_model, engine)
    leaves = lambda p: jax.tree.leaves(p.params)  # noqa: E731
    assert all((a == b).all() for a, b in zip(leaves(policy), leaves(same)))
    assert any((a != b).any() for a, b in zip(leaves(policy), leaves(other)))


def test_mesh_rules_and_engine_follow_their_sections(embedded_model):
    cfg = activemem_tiny_cpu.get_config()
    cfg.mesh.update(data=2, fsdp=-1, tensor=1)
    assert dict(build.mesh(cfg).shape) == {"data": 2, "fsdp": len(jax.devices()) // 2, "tensor": 1}
    assert build.rules(cfg) == dict(cfg.sharding.rules)
    cfg.engine.update(max_slots=2, max_len=256)
    with build.engine(cfg, embedded_model) as eng:
        assert (eng.max_slots, eng.max_len) == (2, 256)
    del cfg.mesh
    assert build.mesh(cfg) is None  # no mesh section: the loader's own default


def test_a_misspelt_policy_field_is_named():
    cfg = activemem_tiny_cpu.get_config()
    with cfg.unlocked():
        cfg.policy.capacty = 32
    with pytest.raises(ValueError, match=r"unknown policy config keys \['capacty'\]"):
        build.policy_config(cfg)


def test_every_part_reads_the_schema_and_its_defaults():
    """A partial config's missing fields take the schema's defaults (the only place they
    are written), a checked Run builds the same parts as its ConfigDict, and a bad field
    in any section a builder reads is a ConfigError naming it."""
    import dataclasses

    from activemem_jax import schema

    partial = build.config(train={"algo": "sft"}, policy={"tau_stop": 0.5})
    loss = build.loss_config(partial)
    defaults = schema.Train()
    assert (loss.algo, loss.tau_stop, loss.micro_batch_rows, loss.key_tau, loss.lora_alpha) == \
        ("sft", 0.5, defaults.micro_batch_rows, defaults.key_tau, schema.Lora().alpha)
    cfg = activemem_tiny_cpu.get_config()
    run = schema.load(cfg)
    assert build.loss_config(run) == build.loss_config(cfg)
    assert build.policy_config(run) == build.policy_config(cfg) and build.rules(run) == build.rules(cfg)
    assert dataclasses.asdict(schema.part(build.config(engine={"max_len": 512}), "engine")) == \
        {**dataclasses.asdict(schema.Engine()), "max_len": 512}
    assert schema.part(build.config(), "mesh") is None and schema.part(build.config(), "seed") == 0
    with pytest.raises(schema.ConfigError, match=r"^engine.max_slot: no such config field"):
        build.engine(build.config(engine={"max_slot": 2}), None)
    with pytest.raises(schema.ConfigError, match=r"^optim.lr_controller='fast': need a number"):
        build.optimizer_from(build.config(optim={"lr_controller": "fast"}))
    with pytest.raises(schema.ConfigError, match=r"^train.steps=-1"):
        build.loss_config(build.config(train={"steps": -1}))


def test_a_trainer_gets_its_parts_from_one_call_and_names_what_cannot_run(embedded_model, engine, tmp_path):
    """`build.training` hands the trainer the checked run and every part; a config the
    built parts cannot run (fewer tasks than a step's prompts) is a ConfigError naming
    the field."""
    from activemem_jax import schema
    from activemem_jax.rl.trainer import Trainer

    cfg = activemem_tiny_cpu.get_config()
    cfg.out_dir = str(tmp_path / "run")
    cfg.log.tensorboard = False
    parts = build.training(cfg, backbone=embedded_model, engine_=engine)
    assert isinstance(parts.run, schema.Run) and parts.model is embedded_model and parts.engine is engine
    assert not parts.own_engine and parts.policy.config == parts.run.policy
    assert len(parts.task_set.tasks) == cfg.data.n_tasks and parts.loss == build.loss_config(cfg)
    assert parts.decay_steps == build.decay_length(parts.run.optim, parts.run.train)
    cfg.data.n_tasks = 1
    with pytest.raises(schema.ConfigError, match=r"^train.prompts_per_step=2: the data section gives 1 training"):
        Trainer(cfg, model=embedded_model, engine=engine)
