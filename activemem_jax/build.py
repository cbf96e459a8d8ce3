"""One place that turns a run config into its parts.

The trainer, the train / eval launchers, the server, HyMem's in-process engine, the
memory benchmarks, bench_activemem, chat, aot and measure build a mesh, a backbone, an
engine, a policy or a task set from a config (`configs/*.py`: the sections mesh,
sharding, model, engine, policy, data) here, so a field means the same thing everywhere
and a new switch is read in one place. The speed benchmarks, which size their engines per
measurement, build them here too from a config of the sections they set (`config`).
The training parts that sit above these (the optimizer and the jitted
update's loss config) come from `rl.update.optimizer_from` and `rl.update.loss_config`,
which the trainer and the AOT compiler share; this module never imports `rl`, so the
trainer can build on it.

    backbone = build.model(cfg)                    # over the config's mesh, by its rules
    with build.engine(cfg, backbone) as engine:
        policy, task_set = build.policy(cfg, backbone, engine, seed=1), build.tasks(cfg, backbone)
"""

from __future__ import annotations

from typing import Optional


def config(**sections):
    """A run config holding only `sections` (`config(model={"path": "embedded"}, engine=
    {"max_slots": 8, "max_len": 4096})`): what a tool that sizes its parts per measurement
    passes to the builders below; a field it leaves out takes the builder's default."""
    import ml_collections

    return ml_collections.ConfigDict({name: dict(fields) for name, fields in sections.items()})


def rules(cfg) -> Optional[dict]:
    """The logical-axis rules of the config's sharding section (None: the defaults)."""
    return dict(cfg.sharding.rules) if "sharding" in cfg else None


def mesh(cfg):
    """The (data, fsdp, tensor) mesh of the config's mesh section (-1: the rest of the
    devices); None without one (the loader then puts every device on the data axis)."""
    from activemem_jax.sharding import make_mesh

    if "mesh" not in cfg:
        return None
    m = cfg.mesh
    return make_mesh(data=m.data, fsdp=m.fsdp, tensor=m.tensor)


def model(cfg, mesh_=None, **overrides):
    """The frozen backbone of the config's model section, sharded over `mesh_` (default:
    the config's mesh) by the config's rules; `overrides` replace model fields (e.g. remat)."""
    from activemem_jax.models import load_from_config

    return load_from_config(cfg.model, mesh=mesh_ if mesh_ is not None else mesh(cfg), rules=rules(cfg),
                            **overrides)


def engine(cfg, backbone):
    """A generation engine on `backbone` sized by the config's engine section."""
    from activemem_jax.engine import Engine

    e = cfg.engine
    return Engine(backbone, max_slots=e.max_slots, max_len=e.max_len, max_queue=e.get("max_queue", 256))


def policy_config(cfg):
    """The config's policy section as the typed `PolicyConfig` (checked field by field)."""
    from activemem_jax.activemem import PolicyConfig

    return PolicyConfig.from_dict(cfg.policy.to_dict())


def policy(cfg, backbone, engine_, seed: Optional[int] = None, config=None):
    """An ActiveMem policy (controller initialised from `seed`, default the config's)."""
    from activemem_jax.activemem import ActiveMem

    return ActiveMem(backbone, engine_, config if config is not None else policy_config(cfg),
                     seed=cfg.seed if seed is None else seed)


def tasks(cfg, backbone=None):
    """The config's training task set (`activemem_jax.tasks`: tasks, environment factory,
    search backend, scorer, grouping)."""
    from activemem_jax.tasks import build_tasks

    return build_tasks(cfg, backbone)


__all__ = ["config", "engine", "mesh", "model", "policy", "policy_config", "rules", "tasks"]
