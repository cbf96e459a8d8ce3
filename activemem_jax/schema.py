"""The typed schema of an ActiveMem run config, checked once, at load.

A run config stays an ml_collections file (`configs/activemem_*.py`, absl's
`--config.section.field=value` overrides keep working); its sections are the frozen
dataclasses below, which hold every field, its type, its default and what values it may
take. `configs/activemem_base.py` builds its sections from these defaults
(`defaults(Train)`), so a field is declared once. `load(cfg)` checks a config against
them (unknown fields, wrong types, values out of range, fields that contradict each
other) and returns a `Run` of typed sections, or raises a ValueError whose message names
the field (`train.steps=-1: need >= 0`). The launchers call it right after loading, before
any model is read; the Trainer calls it on what it is given.

    run = load(cfg)          # a Run: run.train.steps, run.optim.lr_controller, run.policy (PolicyConfig)
"""

from __future__ import annotations

import dataclasses
import os
import typing
from typing import Any, Optional

import ml_collections

from activemem_jax.envs.dossier import DEFAULTS as DOSSIER
from activemem_jax.envs.dossier import check_sizes, check_tree_room
from activemem_jax.models.attention import IMPLEMENTATIONS as ATTENTION
from activemem_jax.models.decode_kernel import DECODE_IMPLEMENTATIONS as DECODE
from activemem_jax.models.decoder import REMAT_POLICIES as _POLICIES
from activemem_jax.sharding import DEFAULT_RULES

REMAT_POLICIES = ("", *_POLICIES)  # "": full when remat is on


class ConfigError(ValueError):
    """A config field that cannot be used; the message names it."""


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@dataclasses.dataclass(frozen=True)
class Model:
    path: str = "embedded"        # a Hugging Face directory, a .gguf file or "embedded" (SmolLM2-135M)
    dtype: str = "bfloat16"       # weights: float32 | bfloat16 | auto (the faster one on this platform)
    activation_dtype: str = ""    # "" = dtype; float32 with bfloat16 weights: bf16 weights, f32 activations
    quant: str = ""               # "" | int8 (evaluation and serving only)
    remat: bool = True
    scan_layers: bool = False     # one scanned layer body (paper configs) instead of unrolled layers
    remat_policy: str = ""        # "" (full with remat) | none | full | dots_saveable
                                  # | dots_with_no_batch_dims_saveable
    attention: str = "auto"       # auto (splash on TPU, cudnn on GPU, xla on CPU) | xla | splash | cudnn
    decode_attention: str = "auto"  # the engine's decode: auto (paged on TPU and GPU, xla on CPU) | xla | paged

    def check(self) -> None:
        _need(self.dtype in ("float32", "bfloat16", "auto"), f"model.dtype={self.dtype!r}: float32, bfloat16 or auto")
        _need(self.activation_dtype in ("", "float32", "bfloat16"),
              f"model.activation_dtype={self.activation_dtype!r}: '', float32 or bfloat16")
        _need(self.quant in ("", "int8"), f"model.quant={self.quant!r}: '' or int8")
        _need(self.remat_policy in REMAT_POLICIES,
              f"model.remat_policy={self.remat_policy!r}: one of {REMAT_POLICIES}")
        _need(not (self.remat and self.remat_policy == "none"),
              "model.remat=True contradicts model.remat_policy='none': give one of them")
        _need(self.attention in ATTENTION, f"model.attention={self.attention!r}: one of {ATTENTION}")
        _need(self.decode_attention in DECODE, f"model.decode_attention={self.decode_attention!r}: one of {DECODE}")


@dataclasses.dataclass(frozen=True)
class Mesh:
    data: int = 1
    fsdp: int = -1                # -1: all remaining devices
    tensor: int = 1

    def check(self) -> None:
        for name in ("data", "fsdp", "tensor"):
            v = getattr(self, name)
            _need(v == -1 or v >= 1, f"mesh.{name}={v}: >= 1, or -1 for the remaining devices")
        _need([self.data, self.fsdp, self.tensor].count(-1) <= 1, "mesh: at most one axis may be -1")


@dataclasses.dataclass(frozen=True)
class Sharding:
    rules: dict = dataclasses.field(default_factory=lambda: dict(DEFAULT_RULES))  # logical axis -> mesh axes


@dataclasses.dataclass(frozen=True)
class Engine:
    max_slots: int = 64           # concurrent generation slots
    max_len: int = 8192           # tokens per slot (prompt + completion)
    max_queue: int = 256          # waiting requests beyond the slots

    def check(self) -> None:
        for name in ("max_slots", "max_len", "max_queue"):
            _need(getattr(self, name) >= 1, f"engine.{name}={getattr(self, name)}: need >= 1")


@dataclasses.dataclass(frozen=True)
class Lora:
    rank: int = 0                 # 0: no LoRA (the backbone stays frozen)
    alpha: float = 16.0
    targets: tuple = ("q_proj", "v_proj")

    def check(self) -> None:
        _need(self.rank >= 0, f"lora.rank={self.rank}: need >= 0 (0: no LoRA)")


TEXTWORLD = {"challenge": "tw-simple", "args": "--rewards dense --goal detailed"}  # data.textworld's default


@dataclasses.dataclass(frozen=True)
class Data:
    name: str = "synthetic"       # a registered task family (activemem_jax/tasks/)
    seed: int = 0
    n_entities: int = 2000
    split: str = "train"
    n_objectives: tuple = (2,)
    n_tasks: int = 4096
    max_turns: int = 8
    n_facts: int = 4              # recall: facts and questions per episode (0 questions: one per fact)
    n_questions: int = 0
    codes: tuple = ()             # recall, dossier: the closed answer set (empty: 8 colours)
    dossier: dict = dataclasses.field(default_factory=lambda: dict(DOSSIER))  # envs/dossier.py: sizes per episode
    retrieval_topk: int = 3
    format_reward: float = 0.0
    prompts: tuple = ()           # first_token: prompts, target words, the share of each
    target_words: tuple = ()
    fraction: float = 0.5
    qa_files: tuple = ()          # multi_objective_qa / single_qa: FlashRAG JSONL files
    bad_rows: str = "strict"      # strict (stop at the first bad row) | skip (drop, one line per reason)
    index: str = ""               # search: an index directory | a JSONL corpus | a retrieval server
    corpus: str = ""
    retrieval_url: str = ""
    path: str = ""                # gsm8k / math / gpqa / aqua / fever: the data file; gaia: its directory
    choice_seed: int = 0          # gpqa: the options' order (shuffled per row by this seed and the record id)
    delimiter: str = ""           # delimiter steps (policy.step_mode)
    world_seed: int = -1          # synthetic: the world's seed (-1: `seed`; tasks are drawn with `seed`)
    kinds: tuple = ("chain", "constraint")  # synthetic: the question kinds drawn
    queries: str = ""             # browsecomp_plus: the queries file (its corpus: `corpus`)
    canary: str = ""              #   the key of an encrypted queries file
    balance: str = ""             #   "" first n_tasks | a level field | evidence_terciles
    text_only: str = ""           # gaia (paper A.1): "" all | no_attachment | readable_attachment
    scienceworld: dict = dataclasses.field(default_factory=lambda: {"tasks": [], "simplification": "easy"})
                                  # scienceworld: task names ([]: all 30) and the simulator's simplifications
    textworld: dict = dataclasses.field(default_factory=lambda: dict(TEXTWORLD))
                                  # textworld: the challenge and its tw-make arguments (envs/textworld_games.py)
    alfworld: dict = dataclasses.field(default_factory=dict)  # alfworld: task_types ([]: all 6), split_dir
    sandbox: dict = dataclasses.field(default_factory=dict)  # code families: envs/sandbox.Limits fields
                                  # (cpu_s, wall_s, memory_mb, file_mb, procs, output_bytes); {}: defaults

    def check(self) -> None:
        _need(self.n_tasks >= 1, f"data.n_tasks={self.n_tasks}: need >= 1")
        _need(self.max_turns >= 1, f"data.max_turns={self.max_turns}: need >= 1")
        _need(self.retrieval_topk >= 1, f"data.retrieval_topk={self.retrieval_topk}: need >= 1")
        _need(self.bad_rows in ("strict", "skip"), f"data.bad_rows={self.bad_rows!r}: strict or skip")
        _need(0.0 <= self.fraction <= 1.0, f"data.fraction={self.fraction}: a share, in [0, 1]")
        _need(self.text_only in ("", "no_attachment", "readable_attachment"),
              f"data.text_only={self.text_only!r}: '', no_attachment or readable_attachment")
        _need(self.kinds and set(self.kinds) <= {"chain", "constraint"},
              f"data.kinds={self.kinds}: chain and/or constraint")
        sw = dict(self.scienceworld)
        _need(set(sw) <= {"tasks", "simplification"} and isinstance(sw.get("tasks", []), (list, tuple)),
              f"data.scienceworld={sw}: fields tasks (a list of task names) and simplification (a string)")
        tw = dict(self.textworld)
        _need(set(tw) <= {"challenge", "args"} and all(isinstance(v, str) for v in tw.values()),
              f"data.textworld={tw}: fields challenge (tw-simple, tw-cooking, ...) and args (tw-make's arguments, a string)")
        alf = dict(self.alfworld)
        _need(set(alf) <= {"task_types", "split_dir"} and isinstance(alf.get("task_types", []), (list, tuple))
              and isinstance(alf.get("split_dir", ""), str),
              f"data.alfworld={alf}: fields task_types (a list of ALFWorld task types) and split_dir (a folder name)")
        if self.sandbox:
            from activemem_jax.envs.sandbox import Limits

            try:
                Limits.from_mapping(self.sandbox)
            except (TypeError, ValueError) as e:
                raise ConfigError(str(e)) from None
        if self.name == "dossier":
            try:
                check_sizes(dict(self.dossier))
            except ValueError as e:
                raise ConfigError(str(e)) from None


@dataclasses.dataclass(frozen=True)
class Train:
    algo: str = "grpo"            # grpo | sft
    sft_steps: int = 0            # grpo: the first steps are SFT on expert turns (a warm start)
    sft_tree: str = "rule"        # SFT's tree actions: the threshold rule | expert (env.expert_write)
    sft_head: str = "acted"       # what SFT's tree head imitates: the actions SFT took | "rule": the
                                  # threshold rule on the same states (with sft_tree="expert") | "mix":
                                  # both, the rule's action weighted sft_rule_share (a soft target)
    sft_rule_share: float = 0.5   # sft_head="mix": the rule's share of the head's target, in [0, 1]
    key_coef: float = 0.0         # SFT's loss on the key head (policy.key_head): env.observation_key
    key_tau: float = 0.1
    search_coef: float = 1.0      # GRPO's term on the sampled search's path (policy.search_temperature > 0)
    steps: int = 500
    group_size: int = 8           # rollout batch = prompts_per_step x group_size
    prompts_per_step: int = 8
    seeds: tuple = ()             # launch.train trains one controller per seed (init + data); () = (seed,)
    mini_batch_rows: int = 64
    ppo_epochs: int = 1
    old_logp: str = "rollout"     # PPO's old log-probs: the engine's, as it sampled | recompute
    micro_batch_rows: int = 8     # gradient accumulation: rows per forward/backward (0: all)
    clip_eps: float = 0.2
    clip_eps_high: float = 0.0    # 0: symmetric clipping
    agg: str = "token-mean"       # token-mean | seq-mean-token-mean | seq-mean-token-sum-norm
    beta: float = 0.0             # k3 KL to the reference (frozen LLM + initial controller)
    tree_kl: float = 0.0          # GRPO: KL(tree head || the head GRPO started from, the SFT warm start's
                                  # end) on the steps where it chose, added to the tree term times this
    tree_coef: float = 1.0
    advantage: str = "grpo"       # A_i: grpo (group-relative) | reinforce (R - batch mean) | reinforce_pp
                                  # (REINFORCE++: (R - batch mean) / batch std over the step); rl/grpo.py
    lambda_h: float = 0.5         # the hierarchical advantage's node term (0: the plain group advantage)
    credit: str = "episode"       # GRPO: a scored turn's tokens (and sampled search) take the episode's
                                  # advantage | "turn": the group advantage of that turn's own reward
    write_credit: str = "episode"  # GRPO: the tree term's advantage: the episode's (A_{i,t}) | "to_go": the
                                   # group advantage of the answers after the write's turn (+ node term)
    grpo_span: int = 1            # GRPO on streams: one rollout runs this many consecutive episodes of a
                                  # stream (one memory, one return), so a write is credited with the later
                                  # episodes' answers that read it; 1: an episode a rollout
    adv_eps: float = 1e-6
    normalize_std: bool = True
    logprob_chunk: int = 128

    def check(self) -> None:
        _need(self.algo in ("grpo", "sft"), f"train.algo={self.algo!r}: grpo or sft")
        _need(self.steps >= 0 and self.sft_steps >= 0,
              f"train.steps={self.steps}, train.sft_steps={self.sft_steps}: need >= 0")
        for name in ("mini_batch_rows", "group_size", "prompts_per_step", "ppo_epochs", "logprob_chunk", "grpo_span"):
            _need(getattr(self, name) >= 1, f"train.{name}={getattr(self, name)}: need >= 1")
        _need(self.micro_batch_rows >= 0, f"train.micro_batch_rows={self.micro_batch_rows}: need >= 0 (0: all)")
        _need(self.old_logp in ("rollout", "recompute"), f"train.old_logp={self.old_logp!r}: rollout or recompute")
        _need(self.credit in ("episode", "turn"), f"train.credit={self.credit!r}: episode or turn")
        _need(self.write_credit in ("episode", "to_go"),
              f"train.write_credit={self.write_credit!r}: episode or to_go")
        _need(self.sft_tree in ("rule", "expert"), f"train.sft_tree={self.sft_tree!r}: rule or expert")
        _need(self.sft_head in ("acted", "rule", "mix"), f"train.sft_head={self.sft_head!r}: acted, rule or mix")
        _need(0.0 <= self.sft_rule_share <= 1.0,
              f"train.sft_rule_share={self.sft_rule_share}: the rule's share of the head's target, in [0, 1]")
        _need(self.agg in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"),
              f"train.agg={self.agg!r}: token-mean, seq-mean-token-mean or seq-mean-token-sum-norm")
        _need(self.advantage in ("grpo", "reinforce", "reinforce_pp"),
              f"train.advantage={self.advantage!r}: grpo, reinforce or reinforce_pp")
        _need(self.algo != "grpo" or self.advantage != "grpo" or self.group_size >= 2,
              f"train.group_size={self.group_size}: GRPO needs >= 2 (advantages are relative to the group; "
              f"train.advantage=reinforce or reinforce_pp take the batch's baseline instead)")
        _need(self.advantage == "grpo" or (self.credit == "episode" and self.write_credit == "episode"),
              f"train.advantage={self.advantage!r} with train.credit={self.credit!r}, train.write_credit="
              f"{self.write_credit!r}: per-turn and to-go credit are group advantages that replace A_i; "
              f"a batch-baseline advantage needs credit='episode' and write_credit='episode'")
        for name in ("key_coef", "key_tau", "search_coef", "clip_eps", "clip_eps_high", "beta", "tree_coef",
                     "lambda_h", "tree_kl"):
            _need(getattr(self, name) >= 0, f"train.{name}={getattr(self, name)}: need >= 0")


@dataclasses.dataclass(frozen=True)
class Optim:
    lr_controller: float = 1e-5
    lr_lora: float = 1e-6
    warmup_steps: int = 50        # optimizer updates of linear warm-up
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    lr_grpo: float = 0.0          # > 0: GRPO's controller rate after an SFT warm start; 0: lr_controller
    lr_tree_grpo: float = 0.0     # > 0: GRPO's rate for the tree action head alone; 0: the GRPO rate
    decay_steps: int = 0          # > 0: the rate falls on a cosine to rate x final_lr_ratio at this
    final_lr_ratio: float = 0.1   # training step (GRPO at lr_grpo keeps its own); -1: over the SFT
                                  # warm start (train.sft_steps, else all steps); 0: constant

    def check(self) -> None:
        for name in ("lr_controller", "lr_lora", "weight_decay", "max_grad_norm", "warmup_steps"):
            _need(getattr(self, name) >= 0, f"optim.{name}={getattr(self, name)}: need >= 0")
        _need(self.decay_steps >= -1,
              f"optim.decay_steps={self.decay_steps}: > 0 steps, -1 (the SFT warm start) or 0 (no decay)")
        _need(self.lr_grpo >= 0 and (not self.lr_grpo or self.lr_controller > 0),
              f"optim.lr_grpo={self.lr_grpo}: need >= 0 (0: GRPO uses optim.lr_controller) and a non-zero "
              f"optim.lr_controller to scale from (it is {self.lr_controller})")
        _need(0.0 <= self.final_lr_ratio <= 1.0, f"optim.final_lr_ratio={self.final_lr_ratio}: in [0, 1]")
        _need(self.lr_tree_grpo >= 0 and (not self.lr_tree_grpo or self.lr_controller > 0),
              f"optim.lr_tree_grpo={self.lr_tree_grpo}: need >= 0 (0: the tree head keeps GRPO's rate) and a "
              f"non-zero optim.lr_controller to scale from (it is {self.lr_controller})")


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    every: int = 50               # training steps between saves
    keep: int = 3
    async_save: bool = True
    resume: bool = True
    step: int = 0                 # restore this step (0: the newest readable one)
    overwrite: bool = False       # with resume=False: set an existing run in out_dir aside instead of refusing
    init_from: str = ""           # a fresh run starts its controller (and LoRA) from this run's checkpoint
                                  # (a run directory or its checkpoints folder; read only); its optimizer,
                                  # step and tree start fresh; ignored when out_dir holds checkpoints
    init_step: int = 0            # init_from's step (0: its newest readable one)

    def check(self) -> None:
        _need(self.every >= 1, f"checkpoint.every={self.every}: need >= 1")
        _need(self.keep >= 1, f"checkpoint.keep={self.keep}: need >= 1")
        _need(self.step >= 0, f"checkpoint.step={self.step}: need >= 0 (0: the newest readable step)")
        _need(self.init_step >= 0, f"checkpoint.init_step={self.init_step}: need >= 0 (0: the newest readable step)")
        _need(not self.init_step or self.init_from,
              f"checkpoint.init_step={self.init_step} names a step of checkpoint.init_from, which is empty")


@dataclasses.dataclass(frozen=True)
class Log:
    tensorboard: bool = True


@dataclasses.dataclass(frozen=True)
class Eval:
    enabled: bool = False         # held-out evaluation before and after training (launch.train)
    n_objectives: tuple = (1, 2)
    n_tasks: int = 4
    split: str = "test"
    turns_per_objective: int = 2  # turns per episode: min(max_turns_cap, turns_per_objective x N + extra_turns)
    extra_turns: int = 1
    max_turns_cap: int = 8
    qa_files: tuple = ()          # held-out data of a registered task
    path: str = ""
    # the retrieval-memory variants memorybank / expel (activemem/text_memory.py; the same
    # defaults as its TextMemoryConfig): entries put into a prompt, the characters they may add
    # (header included), tasks rolled out together on one state of the store (1: every task
    # sees all earlier ones), and memorybank's forgetting (strength x this many tasks; 0: never)
    memory_topk: int = 3
    memory_chars: int = 1500
    memory_batch: int = 1
    memory_forget_tasks: int = 100

    def check(self) -> None:
        _need(self.n_tasks >= 1, f"eval.n_tasks={self.n_tasks}: need >= 1")
        _need(self.max_turns_cap >= 1, f"eval.max_turns_cap={self.max_turns_cap}: need >= 1")
        for name, low in (("memory_topk", 1), ("memory_chars", 0), ("memory_batch", 1), ("memory_forget_tasks", 0)):
            _need(getattr(self, name) >= low, f"eval.{name}={getattr(self, name)}: need >= {low}")


@dataclasses.dataclass(frozen=True)
class Distributed:
    coordinator_address: str = ""  # empty: single process, or what the cluster's environment says
    num_processes: int = 1
    process_id: int = -1

    def check(self) -> None:
        _need(self.num_processes >= 1, f"distributed.num_processes={self.num_processes}: need >= 1")


SECTIONS = {"model": Model, "mesh": Mesh, "sharding": Sharding, "engine": Engine, "lora": Lora, "data": Data,
            "train": Train, "optim": Optim, "checkpoint": Checkpoint, "log": Log, "eval": Eval,
            "distributed": Distributed}
TOP_LEVEL = {"seed": int, "out_dir": str, "topology": str}  # topology: the TPU slice a paper config is sized for
TOP_DEFAULTS = {"seed": 0, "out_dir": "", "topology": ""}


@dataclasses.dataclass(frozen=True)
class Run:
    """A checked run config: one typed object per section (policy: `PolicyConfig`)."""
    seed: int
    out_dir: str
    model: Model
    mesh: Optional[Mesh]          # None: the config has no mesh section (the loader puts every device
                                  # on the data axis)
    sharding: Sharding
    engine: Engine
    policy: Any
    lora: Lora
    data: Data
    train: Train
    optim: Optim
    checkpoint: Checkpoint
    log: Log
    eval: Eval
    distributed: Distributed
    topology: str = ""


def defaults(section: type, **overrides) -> ml_collections.ConfigDict:
    """A section's defaults as the ConfigDict a config file holds (with `overrides`)."""
    out = {f.name: (f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default)
           for f in dataclasses.fields(section)}
    unknown = sorted(set(overrides) - set(out))
    _need(not unknown, f"{section.__name__.lower()}: no such field(s) {unknown}")
    out.update(overrides)
    return ml_collections.ConfigDict(out)


def _typed(value, kind, where: str):
    """value checked against the annotation `kind` (ints are floats too; lists are tuples)."""
    if kind is bool:
        _need(isinstance(value, bool), f"{where}={value!r}: need True or False")
    elif kind is int:
        _need(isinstance(value, int) and not isinstance(value, bool), f"{where}={value!r}: need an integer")
    elif kind is float:
        _need(isinstance(value, (int, float)) and not isinstance(value, bool), f"{where}={value!r}: need a number")
        value = float(value)
    elif kind is str:
        _need(isinstance(value, str), f"{where}={value!r}: need a string")
    elif kind is tuple:
        _need(isinstance(value, (tuple, list)), f"{where}={value!r}: need a tuple")
        value = tuple(value)
    elif kind is dict:
        if isinstance(value, ml_collections.ConfigDict):
            value = value.to_dict()
        _need(isinstance(value, dict), f"{where}={value!r}: need a dict")
    return value


def section(cls: type, values, name: str, check: bool = True):
    """`values` (a ConfigDict or dict) as the typed section `cls`; missing fields take their
    defaults, an unknown one is an error naming it. check=False: types only, not the
    section's ranges (`build_section`: a file-backed family's n_tasks=0 means every row)."""
    if isinstance(values, ml_collections.ConfigDict):
        values = values.to_dict()
    _need(isinstance(values, dict), f"{name}: a section of fields, not {values!r}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(known))
    _need(not unknown, f"{name}.{unknown[0] if unknown else ''}: no such config field (known: {', '.join(known)})")
    out = cls(**{k: _typed(v, hints[k], f"{name}.{k}") for k, v in values.items()})
    if check and hasattr(out, "check"):
        out.check()
    return out


def load(cfg) -> Run:
    """cfg (a run ConfigDict) checked and typed; a ConfigError names the first bad field.
    Sections the config lacks take their defaults; sections it adds are errors."""
    top = {**TOP_DEFAULTS, **_top(cfg, TOP_LEVEL, SECTIONS)}
    parts = {name: part(cfg, name) for name in SECTIONS}
    policy = _policy(cfg)
    run = Run(policy=policy, **top, **parts)
    _need(not run.model.quant,
          f"model.quant={run.model.quant!r}: int8 weights are for evaluation and serving; train on float weights "
          "and evaluate the checkpoint with quant='int8'")
    _need(not (run.lora.rank and run.model.scan_layers),
          "lora.rank > 0 with model.scan_layers=True: LoRA adapts per-layer 2-D kernels; set model.scan_layers="
          "False (or lora.rank=0)")
    _need(not (run.train.key_coef and not policy.key_head),
          f"train.key_coef={run.train.key_coef} trains the key head, but policy.key_head is False")
    _need(not (policy.search_temperature and not policy.key_head),
          f"policy.search_temperature={policy.search_temperature} samples the search for GRPO to train the key head, "
          "but policy.key_head is False (nothing would learn from it): set policy.key_head=True or the temperature to 0")
    if run.data.name == "dossier":  # the environment's own rule, at load (envs/dossier.py)
        s = check_sizes(dict(run.data.dossier))
        try:
            check_tree_room(s["horizon"] * s["entities"] * s["attributes"], policy)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    return run


def part(cfg, name: str):
    """One typed part of a config: `cfg` a checked `Run` / `EvalRun` (its own) or a
    ConfigDict (that section checked now, missing fields from the dataclass defaults
    above, a missing section all defaults). name: a section of SECTIONS, "policy" (a
    PolicyConfig) or a top-level field (seed, out_dir, topology). A config without a mesh
    section has mesh None. This is what the builders (`activemem_jax.build`) read, so a
    default lives here only."""
    if isinstance(cfg, (Run, EvalRun)):
        return getattr(cfg, name)
    if name == "policy":
        return _policy(cfg)
    if name in TOP_DEFAULTS:
        return _typed(cfg[name], TOP_LEVEL[name], name) if name in cfg else TOP_DEFAULTS[name]
    if name not in SECTIONS:
        raise ConfigError(f"{name}: no such config section (known: {', '.join(sorted([*SECTIONS, 'policy']))})")
    if name not in cfg:
        return None if name == "mesh" else SECTIONS[name]()
    return section(SECTIONS[name], cfg[name], name)


EVAL_SECTIONS = {k: SECTIONS[k] for k in ("model", "mesh", "sharding", "engine", "data", "eval")}
EVAL_TOP_LEVEL = {"seed": int, "out_dir": str, "variants": tuple, "temperature": float, "checkpoint": str}
VARIANTS = ("activemem", "plain", "truncate")
BASELINES = ("vanilla", "cot", "memorybank", "expel")  # Table 1's prompting baselines (vanilla: an alias of
# plain) and its retrieval memory (vanilla + a text store, activemem/text_memory.py), on request


@dataclasses.dataclass(frozen=True)
class EvalRun:
    """A checked evaluation config (`launch.eval_activemem`): the training config's sections
    and names for what both have (model, engine, policy, data: the task and its files,
    eval: the turn budget), plus what only evaluation has."""
    model: Model
    mesh: Optional[Mesh]
    sharding: Sharding
    engine: Engine
    policy: Any
    data: Data
    eval: Eval
    variants: tuple = VARIANTS    # activemem | plain (the frozen model, full history) | truncate (MEM1's context)
                                  # | vanilla (= plain) | cot (plain + "Think step by step") (evaluate.py)
                                  # | memorybank | expel (vanilla + a text experience store: text_memory.py)
                                  # | an ablation that changes the policy (activemem/ablations.py: "w/o HLMT", ...)
    temperature: float = 0.01     # paper 6.1's evaluation temperature
    seed: int = 0
    checkpoint: str = ""          # a training run's checkpoints directory (its newest step); "": untrained
    out_dir: str = ""


def _policy(cfg):
    from activemem_jax.activemem.policy_config import PolicyConfig

    try:
        return PolicyConfig.from_dict(cfg.policy.to_dict() if "policy" in cfg else {})
    except (TypeError, ValueError) as e:
        raise ConfigError(f"policy: {e}") from None


def _top(cfg, top: dict, sections: dict) -> dict:
    extra = sorted(set(cfg.keys()) - set(sections) - set(top) - {"policy"})
    _need(not extra, f"{extra[0] if extra else ''}: no such config section (known: "
                     f"{', '.join(sorted([*sections, *top, 'policy']))})")
    return {k: _typed(cfg[k], kind, k) for k, kind in top.items() if k in cfg}


def load_eval(cfg) -> EvalRun:
    """An evaluation config checked and typed, as `load` does a training config."""
    top = _top(cfg, EVAL_TOP_LEVEL, EVAL_SECTIONS)
    parts = {name: part(cfg, name) for name in EVAL_SECTIONS}
    run = EvalRun(policy=_policy(cfg), **parts, **top)
    from activemem_jax.activemem.ablations import evaluation_ablations

    known = (*VARIANTS, *BASELINES, *evaluation_ablations())  # the no-memory baselines, the policy ablations
    bad = sorted(set(run.variants) - set(known))
    _need(run.variants and not bad, f"variants={run.variants}: choose from {known}")
    _need(run.temperature > 0, f"temperature={run.temperature}: need > 0 (0.01 is near greedy)")
    _need(not run.checkpoint or os.path.isdir(run.checkpoint),
          f"checkpoint={run.checkpoint!r}: no such directory (a training run's <out_dir>/checkpoints)")
    return run


__all__ = ["ConfigError", "EvalRun", "Run", "SECTIONS", "defaults", "load", "load_eval", "part", "section"]
