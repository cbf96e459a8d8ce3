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
