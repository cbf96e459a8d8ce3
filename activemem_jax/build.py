"""One place that turns a run config into its parts.

The trainer, the train / eval launchers, the server, HyMem's in-process engine, the
memory benchmarks, bench_activemem, chat, aot and measure build a mesh, a backbone, an
engine, a policy or a task set from a config (`configs/*.py`: the sections mesh,
sharding, model, engine, policy, data) here, so a field means the same thing everywhere
and a new switch is read in one place. Every builder reads the config through
`schema.part`: a checked `schema.Run` (or `EvalRun`) as it is, or a ConfigDict whose
section is checked when read, a missing field taking the schema's default (the only
place a config default is written). The speed benchmarks, which size their engines per
measurement, build them here too from a config of the sections they set (`config`).
The training parts are built here too: the optimizer (`optimizer_from`: AdamW
with warm-up, a rate per parameter group, clipping), the jitted update's loss config
(`loss_config`) and the rate's decay over training steps (`decay_length`,
`step_lr_factor`); `training` builds all of a training run's parts in one call (what
the trainer runs its loop over). This module never imports `rl`, so the trainer can
build on it.

    backbone = build.model(cfg)                    # over the config's mesh, by its rules
    with build.engine(cfg, backbone) as engine:
        policy, task_set = build.policy(cfg, backbone, engine, seed=1), build.tasks(cfg, backbone)
    parts = build.training(cfg)                    # run, model, engine, policy, tasks, optimizer, loss
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

from activemem_jax.schema import part


def config(**sections):
    """A run config holding only `sections` (`config(model={"path": "embedded"}, engine=
    {"max_slots": 8, "max_len": 4096})`): what a tool that sizes its parts per measurement
    passes to the builders below; a field it leaves out takes the schema's default."""
    import ml_collections

    return ml_collections.ConfigDict({name: dict(fields) for name, fields in sections.items()})


def rules(cfg) -> dict:
    """The logical-axis rules of the config's sharding section (the defaults without one)."""
    return dict(part(cfg, "sharding").rules)


def mesh(cfg):
    """The (data, fsdp, tensor) mesh of the config's mesh section (-1: the rest of the
    devices); None without one (the loader then puts every device on the data axis)."""
    from activemem_jax.sharding import make_mesh

    m = part(cfg, "mesh")
    return None if m is None else make_mesh(data=m.data, fsdp=m.fsdp, tensor=m.tensor)


def model(cfg, mesh_=None, **overrides):
    """The frozen backbone of the config's model section, sharded over `mesh_` (default:
    the config's mesh) by the config's rules; `overrides` replace model fields (e.g. remat)."""
    from activemem_jax.models.loading import load_pretrained

    fields = {**dataclasses.asdict(part(cfg, "model")), **overrides}
    return load_pretrained(fields.pop("path"), mesh=mesh_ if mesh_ is not None else mesh(cfg), rules=rules(cfg),
                           **fields)


def engine(cfg, backbone):
    """A generation engine on `backbone` sized by the config's engine section."""
    from activemem_jax.engine import Engine

    e = part(cfg, "engine")
    return Engine(backbone, max_slots=e.max_slots, max_len=e.max_len, max_queue=e.max_queue)


def policy_config(cfg):
    """The config's policy section as the typed `PolicyConfig` (checked field by field)."""
    return part(cfg, "policy")


def policy(cfg, backbone, engine_, seed: Optional[int] = None, config=None):
    """An ActiveMem policy (controller initialised from `seed`, default the config's)."""
    from activemem_jax.activemem import ActiveMem

    return ActiveMem(backbone, engine_, config if config is not None else policy_config(cfg),
                     seed=part(cfg, "seed") if seed is None else seed)


def tasks(cfg, backbone=None):
    """The config's training task set (`activemem_jax.tasks`: tasks, environment factory,
    search backend, scorer, grouping), from its data section with every field filled."""
    import ml_collections

    from activemem_jax.tasks import build_section, require_env

    d = part(cfg, "data")
    return require_env(build_section(ml_collections.ConfigDict(dataclasses.asdict(d)), backbone, "data"),
                       d.name, "data")


# ---------------------------------------------------------------- the training parts
@dataclasses.dataclass(frozen=True)
class LossConfig:
    algo: str = "grpo"                 # grpo | sft
    clip_eps: float = 0.2
    clip_eps_high: Optional[float] = None
    agg: str = "token-mean"
    beta: float = 0.0                  # k3 KL to the reference policy (frozen LLM + phi_0)
    tree_coef: float = 1.0             # weight of the tree-head term
    lora_alpha: float = 16.0
    chunk: int = 128                   # sequence chunk of the log-prob computation
    micro_batch_rows: int = 0          # > 0: accumulate gradients over micro-batches of these rows
    tree_only: bool = False            # rows whose responses are not scored: the tree term only
                                       # (no backbone forward)
    key_coef: float = 0.0              # weight of the key head's contrastive loss (batches with "key_q")
    key_tau: float = 0.1               # its temperature
    path_pool: str = "mean"            # how p_bar pools the path (policy.path_pool)
    tree_temperature: float = 1.0      # GRPO: the tree term scores softmax(logits / T), the distribution
                                       # the rollout sampled from (policy.tree_temperature)
    search_coef: float = 1.0           # GRPO: weight of the sampled search's term (batches with "search_pick")
    search_temperature: float = 0.0    # the search's temperature, tau_stop and descent rule, as the
    tau_stop: float = 0.6              # rollout sampled it (policy.search_temperature, tau_stop, descend)
    closer: bool = False
    tree_rate: float = 1.0             # GRPO: the tree action head's updates are multiplied by this
                                       # (optim.lr_tree_grpo over GRPO's own rate)
    rule_share: float = 0.0            # SFT: the threshold rule's weight in the head's target (> 0: the
                                       # batch carries "tree_target_rule", train.sft_head="mix")
    tree_kl: float = 0.0               # GRPO: weight of KL(tree head || reference head) (batches with
                                       # "ref_tree_lp", train.tree_kl)


def loss_config(cfg, algo: Optional[str] = None) -> LossConfig:
    """The LossConfig of a run config (train, lora, policy and optim sections) for `algo`
    (default train.algo): what the trainer updates with and what `aot.py` compiles."""
    t, p = part(cfg, "train"), part(cfg, "policy")
    return LossConfig(algo=algo or t.algo, clip_eps=t.clip_eps, clip_eps_high=t.clip_eps_high or None,
                      agg=t.agg, beta=t.beta, tree_coef=t.tree_coef, lora_alpha=part(cfg, "lora").alpha,
                      chunk=t.logprob_chunk, micro_batch_rows=t.micro_batch_rows, key_coef=t.key_coef,
                      key_tau=t.key_tau, path_pool=p.path_pool, tree_temperature=p.tree_temperature,
                      search_coef=t.search_coef, search_temperature=p.search_temperature, tau_stop=p.tau_stop,
                      closer=p.descend == "closer", tree_rate=tree_head_rate(part(cfg, "optim")),
                      rule_share=t.sft_rule_share if t.sft_head == "mix" else 0.0, tree_kl=t.tree_kl)


def tree_head_rate(optim) -> float:
    """GRPO's rate for the tree action head over GRPO's rate for the rest (1 without
    optim.lr_tree_grpo): what the GRPO step multiplies the head's updates by."""
    if not optim.lr_tree_grpo:
        return 1.0
    return optim.lr_tree_grpo / (optim.lr_grpo or optim.lr_controller)


def optimizer_from(cfg):
    """The run's optimizer from its optim section (make_optimizer)."""
    o = part(cfg, "optim")
    return make_optimizer(o.lr_controller, o.lr_lora, o.warmup_steps, o.weight_decay, o.max_grad_norm)


def decay_length(optim, train) -> int:
    """The training steps the rate decays over: optim.decay_steps, or with -1 the SFT warm
    start (train.sft_steps; all train.steps when there is none), so a run that changes its
    SFT length decays over it; 0: no decay. (The schema checks the fields.)"""
    n = int(optim.decay_steps)
    if n == -1:
        n = int(train.sft_steps) if train.algo == "grpo" and train.sft_steps else int(train.steps)
    return n


def step_lr_factor(decay_steps: int, final_lr_ratio: float, step: int) -> float:
    """The rate's multiplier at training step `step` (from 1): 1 with decay_steps 0 (or 1);
    else a cosine from 1 (step 1) down to final_lr_ratio (step decay_steps), held there
    after. It multiplies the optimizer's updates (`TrainStep`'s scale), on top of the
    warm-up the optimizer counts in updates."""
    if decay_steps <= 1:
        return 1.0
    frac = min(max(step - 1, 0) / (decay_steps - 1), 1.0)
    return final_lr_ratio + (1.0 - final_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * frac))


def make_optimizer(lr_controller: float = 1e-5, lr_lora: float = 1e-6, warmup_steps: int = 50,
                   weight_decay: float = 0.0, max_grad_norm: float = 1.0, b1: float = 0.9,
                   b2: float = 0.999):
    """AdamW with a linear warmup over `warmup_steps` updates, a learning rate per group
    (controller / LoRA), global-norm clipping."""
    import jax.numpy as jnp
    import optax

    def adamw(lr):
        def schedule(count):  # update k (from 0) uses lr * min(1, (k + 1) / warmup)
            return lr * jnp.minimum(1.0, (count + 1.0) / max(warmup_steps, 1))

        return optax.adamw(schedule, b1=b1, b2=b2, weight_decay=weight_decay)

    return optax.chain(
        optax.clip_by_global_norm(max_grad_norm),
        optax.multi_transform({"controller": adamw(lr_controller), "lora": adamw(lr_lora)},
                              lambda params: {k: k for k in params}))


# ---------------------------------------------------------------- a training run's parts
@dataclasses.dataclass
class Training:
    """Everything a training run is built from (`training`): the checked run; the backbone
    the update differentiates through and the copy rollouts decode with (the same object
    on one process); the engine (own_engine: built here, so the trainer closes it); the
    policy; the task set; the optimizer; the update's loss config; the steps the rate
    decays over and GRPO's scale on the optimizer's updates (optim.lr_grpo / lr_controller)."""
    run: Any
    model: Any
    gen_model: Any
    engine: Any
    own_engine: bool
    policy: Any
    task_set: Any
    optimizer: Any
    loss: LossConfig
    decay_steps: int
    grpo_scale: float


def training(cfg, *, backbone=None, engine_=None) -> Training:
    """A training run's parts from its config (a ConfigDict, checked by `schema.load`, or a
    checked `Run`), in one call: what `rl.trainer.Trainer` runs its loop over. `backbone`
    / `engine_`: ones already built (tests share them). With several processes each host
    rolls out on its own devices, with its own copy of the backbone (no remat) and engine."""
    import jax

    from activemem_jax import schema
    from activemem_jax.sharding import host_mesh

    run = cfg if isinstance(cfg, schema.Run) else schema.load(cfg)
    processes = jax.process_count()
    if run.train.mini_batch_rows % processes:
        raise schema.ConfigError(f"train.mini_batch_rows={run.train.mini_batch_rows} must be a multiple of the "
                                 f"{processes} processes")
    if run.train.key_coef and processes > 1:
        raise schema.ConfigError(f"train.key_coef={run.train.key_coef}: the key loss reads every row of the step, "
                                 "so it is single-process for now; set train.key_coef=0 or run one process")
    backbone = backbone if backbone is not None else model(run)
    gen_model = model(run, host_mesh(), remat=False, remat_policy="") if processes > 1 else backbone
    own = engine_ is None
    engine_ = engine(run, gen_model) if own else engine_
    lr_grpo = run.optim.lr_grpo
    return Training(run=run, model=backbone, gen_model=gen_model, engine=engine_, own_engine=own,
                    policy=policy(run, gen_model, engine_), task_set=tasks(run, backbone),
                    optimizer=optimizer_from(run), loss=loss_config(run),
                    decay_steps=decay_length(run.optim, run.train),
                    grpo_scale=lr_grpo / run.optim.lr_controller if lr_grpo else 1.0)



__all__ = ["LossConfig", "Training", "config", "decay_length", "loss_config", "make_optimizer", "optimizer_from",
           "step_lr_factor", "engine", "mesh", "model", "policy", "policy_config", "rules", "tasks", "training"]
