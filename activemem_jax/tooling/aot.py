"""Ahead-of-time compilation of a run's jitted steps for a TPU slice, on a machine without
one: abstract sharded inputs at a config's shapes, the run's own jitted functions, and
what the compiler says about each (per-device memory, FLOPs, bytes, time estimate).

    devices = topologies.slice_devices("v5p-8")
    mesh = topologies.slice_mesh("v5p-8", devices, data, fsdp, tensor)
    for c in train_functions(cfg, model_cfg, mesh, rules, length) + engine_functions(cfg, model_cfg, mesh, rules):
        report, compiled = compile_report(c.name, c.jitted, c.args, c.kwargs, c.work, c.mesh, chip)

The functions are the ones a run calls, not copies: `rl.update.TrainStep` (its jitted
update and log-prob pass), `activemem.step.controller_step` under the jit `ActiveMem`
builds, and the engine's `core.compiled(graphdef)` prefill and decode steps. Inputs are
`jax.ShapeDtypeStruct`s carrying the shardings the run gives them: backbone weights by
the config's logical-axis rules, controller / optimizer state replicated (`Hosts.
replicate`), training rows over the data and fsdp axes (`Hosts.shard`), the engine's
state as the engine places it (`engine_steps`).

XLA's cost analysis counts a loop body once (a `lax.scan` over micro-batches, or over
layers with scan_layers): an update with micro-batches is therefore reported per
micro-batch (its tokens and FLOPs are one micro-batch's), and a scanned model's counts come
from the same step unrolled at 1 and 2 layers, extended to all layers
(`aot_report.whole_model`). Where the compiler gives no time
estimate (it returns a negative one for some programs), the estimate is the roofline of
its own counts, max(FLOPs / peak, bytes / HBM bandwidth), marked "~". XLA does not count
inside a Pallas kernel: each splash call's FLOPs, bytes and roofline time are modelled
and added (`models/kernel_costs.py`), which makes that row's MFU an upper bound.

Model FLOPs (for MFU) count the useful work only: 2 x matmul parameters x tokens (a
mixture of experts' active ones: the router and the top-k experts), the
causal attention's QK and PV products, the vocabulary projection where it is computed;
an update (frozen backbone: activation gradients, no weight gradients) is 2 forwards;
rematerialization and padding are not counted.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from activemem_jax import build
from activemem_jax import sharding as shd
from activemem_jax import shapes
from activemem_jax.models.decode_kernel import paged_cache
from activemem_jax.shapes import pow2
from activemem_jax.tooling.aot_report import Report, Work, compile_report, layer_configs, whole_model  # noqa: F401

# Architecture descriptions (the config.json fields the decoder reads) of the paper's
# backbones, for configs whose model.path is not on this machine. Shapes only: no weights.
ARCHITECTURES: dict[str, dict] = {
    "Qwen2.5-1.5B-Instruct": dict(
        model_type="qwen2", vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
        num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=32768, rms_norm_eps=1e-6,
        rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False, sliding_window=32768,
        bos_token_id=151643, eos_token_id=151645),
    "Qwen3-8B": dict(
        model_type="qwen3", vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
        rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False, attention_bias=False,
        use_sliding_window=False, sliding_window=None, bos_token_id=151643, eos_token_id=151645),
    "SmolLM3-3B": dict(
        model_type="smollm3", vocab_size=128256, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
        num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=65536, rms_norm_eps=1e-6,
        rope_theta=5000000.0, tie_word_embeddings=True, bos_token_id=128000, eos_token_id=128012),
    # Table 10's backbone. The shapes (hidden, layers, heads, KV heads, head_dim, experts, top-k,
    # widths, vocab, norm_topk_prob, sparse step, mlp_only_layers, untied head) are those of every
    # Qwen3-30B-A3B release; rope_theta 1e7 and 262,144 positions are the 2507 Instruct's (the
    # first release had 1e6 and 40,960), taken from its published config.json as quoted
    # elsewhere, not read from a download here. intermediate_size is unused (no dense layer).
    "Qwen3-30B-A3B-Instruct-2507": dict(
        model_type="qwen3_moe", vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=48,
        num_attention_heads=32, num_key_value_heads=4, head_dim=128, max_position_embeddings=262144,
        rms_norm_eps=1e-6, rope_theta=10000000.0, tie_word_embeddings=False, attention_bias=False,
        use_sliding_window=False, sliding_window=None, num_experts=128, num_experts_per_tok=8,
        moe_intermediate_size=768, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
        bos_token_id=151643, eos_token_id=151645),
}
ARCHITECTURES["Qwen2.5-1.5B"] = ARCHITECTURES["Qwen2.5-1.5B-Instruct"]

def hf_fields(path: str) -> tuple[dict, str]:
    """(config.json fields, source) of a model path: a directory's config.json, or the
    known architecture its last path component names."""
    if os.path.isdir(path) and os.path.exists(os.path.join(path, "config.json")):
        with open(os.path.join(path, "config.json")) as f:
            return json.load(f), os.path.join(path, "config.json")
    name = os.path.basename(os.path.normpath(path))
    if name in ARCHITECTURES:
        return dict(ARCHITECTURES[name]), f"aot.ARCHITECTURES[{name!r}]"
    raise FileNotFoundError(f"model.path={path!r}: no config.json there and {name!r} is not a known "
                            f"architecture ({', '.join(ARCHITECTURES)}); pass a directory with config.json")


def runtime_options(model_section, with_scan: Optional[bool] = None, platform: Optional[str] = "tpu") -> dict:
    """The config's model switches (`load_from_config`'s fields but the path); with_scan
    overrides scan_layers; dtype "auto" becomes what it means on `platform` (the TPUs
    compiled for; None: this machine, for a local measurement)."""
    from activemem_jax.models.loading import MODEL_FIELDS, fast_dtype

    out = {k: model_section[k] for k in MODEL_FIELDS if k != "path" and k in model_section}
    if out.get("dtype") == "auto":
        out["dtype"] = fast_dtype(platform)
    if with_scan is not None:
        out["scan_layers"] = bool(with_scan)
    return out


def model_config(path: str, runtime: dict):
    """The ModelConfig `load_pretrained(path, **runtime)` would build, without reading
    weights: from a directory's config.json, a GGUF file's metadata ("embedded" too), or
    a known architecture named by the path."""
    from activemem_jax.models import ModelConfig, embedded_gguf_path
    from activemem_jax.models.checkpoint_files import GGUFReader

    path = embedded_gguf_path() if path == "embedded" else os.fspath(path)
    if path.endswith(".gguf") and os.path.exists(path):
        reader = GGUFReader(path)
        return ModelConfig.from_gguf_fields(reader.fields, has_output_weight="lm_head.weight" in reader.names(),
                                            source=path, **runtime)
    fields, source = hf_fields(path)
    return ModelConfig.from_hf_dict(fields, source=source, **runtime)


def abstract_backbone(config, mesh, rules=None):
    """(graphdef, state) of the Decoder for `config`, every weight a ShapeDtypeStruct with
    the sharding `load_pretrained` gives it (the logical axes through `rules`)."""
    from activemem_jax.models import Decoder

    graphdef, state = nnx.split(nnx.eval_shape(lambda: Decoder(config, mesh, rules)))
    leaves = []
    for path, var in nnx.to_flat_state(state):
        value = var.get_value()
        sharding = shd.named_sharding(value.shape, var.get_metadata().get("axes"), mesh, rules)
        leaves.append((path, var.replace(jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding))))
    return graphdef, nnx.from_flat_state(leaves)


def with_sharding(tree, sharding):
    """Abstract copies of `tree`'s arrays placed by `sharding` (one for all, or a function
    of the leaf)."""
    def one(x):
        s = sharding(x) if callable(sharding) else sharding
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s)

    return jax.tree.map(one, jax.eval_shape(lambda: tree) if not _is_abstract(tree) else tree)


def _is_abstract(tree) -> bool:
    return all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(tree))


def rows_sharding(mesh):
    """`Hosts.shard`'s placement: rows over the data and fsdp axes (replicated when the
    row count does not divide)."""
    axes = tuple(a for a in ("data", "fsdp") if mesh.shape[a] > 1)
    size = int(np.prod([mesh.shape[a] for a in axes])) if axes else 1
    rows = NamedSharding(mesh, PartitionSpec(axes or None))
    rep = NamedSharding(mesh, PartitionSpec())
    return lambda x: rows if x.shape and x.shape[0] % size == 0 else rep


def engine_steps(graphdef, model_cfg, mesh, rules, slots: int, rows: int):
    """(the engine's jitted steps, the decode state's shardings, how it is placed), as
    `Engine.__init__` builds them: with `core.state_shardings` (the state sharded by the
    rules, each step keeping it so) when the engine has it; else the engine of before,
    whose whole state was replicated (`NamedSharding(model.mesh, PartitionSpec())`)."""
    from activemem_jax.engine import core

    own = getattr(core, "state_shardings", None)
    if own is None:
        return core.compiled(graphdef), NamedSharding(mesh, PartitionSpec()), "replicated"
    shardings = own(model_cfg, slots, rows, mesh, rules, paged=paged_cache(model_cfg, mesh))
    return core.compiled(graphdef, shardings), shardings, "sharded by the rules"


# ---------------------------------------------------------------------------- FLOPs
def forward_flops(cfg, tokens: int, context: float, logits: int) -> float:
    """Useful FLOPs of the backbone over `tokens` tokens attending to `context` keys on
    average, with the vocabulary projection at `logits` positions. A sparse (MoE) layer
    counts the weights a token uses: the router and its top-k experts
    (`ModelConfig.mlp_matmul_params`), as `num_active_params` counts them."""
    d, h, kv, hd, layers = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.num_layers
    projections = d * h * hd * 2 + d * kv * hd * 2
    matmuls = layers * projections + sum(cfg.mlp_matmul_params(i) for i in range(layers))
    attn = 2 * 2 * h * hd * context  # QK^T and PV, per token and layer
    return 2.0 * matmuls * tokens + layers * attn * tokens + 2.0 * d * cfg.vocab_size * logits


# ---------------------------------------------------------------------------- training rows
def training_rows(cfg, model_cfg, rows: int, length: int, algo: str, with_old: bool) -> dict:
    """Abstract (unsharded) training rows as the trainer feeds the update: `collate`'s
    arrays of one made-up turn, at `rows` x `length` tokens, minus the host-side keys,
    plus what `Trainer.train_step` adds."""
    from activemem_jax.activemem.collate import collate
    from activemem_jax.activemem.policy_config import Step, Trajectory
    from activemem_jax.rl.rows import HOST_KEYS

    p = cfg.policy
    d, depth = model_cfg.hidden_size, p.max_depth
    answer = pow2(int(p.max_tokens), 1)  # collate's response width
    if length <= answer:
        raise ValueError(f"row length {length} leaves no room for the {answer}-token response")
    zeros = np.zeros((d,), np.float32)
    step = Step(prompt_ids=[1] * (length - answer), latent_pos=list(range(p.num_latents)),
                response_ids=[1] * answer, response_logprobs=[0.0] * answer, text="", observation="",
                h=zeros, p_bar=zeros, tree_action=0, tree_logp=0.0, tree_mask=np.ones((3,), bool),
                path=np.full((depth,), -1, np.int32), q=zeros, pooled=zeros,
                path_emb=np.zeros((depth, d), np.float32), writer_turn=np.full((depth,), -1, np.int32),
                writer_op=np.zeros((depth,), np.int32), writer_prev=np.zeros((depth, d), np.float32))
    one = collate([Trajectory(task={}, uid=0, steps=[step])], p.num_latents, max_len=length,
                          resp_len=answer, path_len=depth)
    one.pop("scored")
    one.update(adv=np.zeros((1,), np.float32), tree_adv=np.zeros((1,), np.float32), row_valid=np.ones((1,), bool))
    if algo == "sft":
        one["tree_target"] = np.zeros((1,), np.int32)
        if cfg.train.get("sft_head") == "mix":  # the rule's action beside the acted one (rl/update.py)
            one["tree_target_rule"] = np.zeros((1,), np.int32)
    batch = {k: jax.ShapeDtypeStruct((rows,) + v.shape[1:], v.dtype) for k, v in one.items() if k not in HOST_KEYS}
    if algo == "grpo" and with_old:
        batch["old_logp"] = jax.ShapeDtypeStruct((rows, answer), jnp.float32)
    if algo == "grpo" and cfg.train.beta:
        batch["ref_logp"] = jax.ShapeDtypeStruct((rows, answer), jnp.float32)
    return batch


def abstract_controller(cfg, model_cfg):
    """The controller's (graphdef, abstract state) as ActiveMem builds it from cfg.policy."""
    from activemem_jax.activemem.controller import Controller

    policy = build.policy_config(cfg)
    return nnx.split(nnx.eval_shape(lambda: Controller.from_policy(model_cfg.hidden_size, policy,
                                                                   rngs=nnx.Rngs(0))))


# ---------------------------------------------------------------------------- the run's steps
@dataclasses.dataclass
class Compilable:
    name: str
    jitted: Any
    args: tuple
    kwargs: dict
    work: Work
    mesh: Any
    note: str = ""


def engine_mesh(mesh, devices, hosts: int):
    """The rollout side's mesh as `Trainer` builds it: the training mesh on one host; with
    several hosts, `sharding.host_mesh` over one host's devices."""
    if hosts <= 1:
        return mesh
    return shd.host_mesh([d for d in devices if d.process_index == devices[0].process_index])


def train_functions(cfg, model_cfg, mesh, rules, length: int, algos=("grpo", "sft")) -> list[Compilable]:
    """The update step per algorithm and the old / reference log-prob pass, at the
    config's mini-batch of `length`-token rows."""
    from activemem_jax.activemem.lora import init_lora
    from activemem_jax.build import loss_config, optimizer_from
    from activemem_jax.rl.update import TrainStep

    graphdef, state = abstract_backbone(model_cfg, mesh, rules)
    ctrl_gd, ctrl_state = abstract_controller(cfg, model_cfg)
    rep = NamedSharding(mesh, PartitionSpec())
    lora = {}
    if cfg.lora.rank:
        lora = jax.eval_shape(lambda s: init_lora(s, cfg.lora.rank, tuple(cfg.lora.targets)), state)
    params = with_sharding({"controller": ctrl_state, "lora": lora}, rep)
    optimizer = optimizer_from(cfg)
    opt_state = with_sharding(jax.eval_shape(optimizer.init, params), rep)
    t = cfg.train
    rows = int(t.mini_batch_rows)
    # old log-probs ride along when there are several mini-batches or epochs (trainer.py)
    rollout_rows = t.prompts_per_step * t.group_size * max(int(cfg.data.get("max_turns", 1)), 1)
    with_old = t.ppo_epochs > 1 or rollout_rows > rows
    place = rows_sharding(mesh)
    out = []
    for algo in algos:
        batch = with_sharding(training_rows(cfg, model_cfg, rows, length, algo, with_old), place)
        answer = batch["resp_pos"].shape[1]
        fwd = forward_flops(model_cfg, rows * length, length / 2, rows * answer)
        step = TrainStep(graphdef, ctrl_gd, loss_config(cfg, algo), optimizer)
        micro = int(t.micro_batch_rows) if 0 < t.micro_batch_rows < rows else rows
        remat = getattr(model_cfg, "remat_mode", "full" if model_cfg.remat else "none")
        note = (f"per micro-batch of {micro} rows" if micro < rows else "whole mini-batch") + f", remat {remat}"
        scanned = bool(getattr(model_cfg, "scan_layers", False))
        out.append(Compilable(f"update {algo} {rows}x{length}", step._step, (params, opt_state, state, batch, jnp.float32(1.0)), {},
                              Work(micro * length, 2 * fwd * micro / rows, scanned), mesh, note))
        if algo == "grpo":
            out.append(Compilable(f"logprobs {rows}x{length}", step._logp, (params, state, batch), {},
                                  Work(rows * length, fwd, scanned), mesh, "old / reference policy"))
    return out


def named_train_functions(cfg, model_cfg, mesh, rules, length: int, names) -> list[Compilable]:
    """The training steps among `names` (update_grpo, update_sft, logprobs), compiled only
    for the algorithms they need."""
    algos = tuple(a for a in ("grpo", "sft") if f"update_{a}" in names or (a == "grpo" and "logprobs" in names))
    if not algos:
        return []
    out = []
    for c in train_functions(cfg, model_cfg, mesh, rules, length, algos):
        key = "logprobs" if c.name.startswith("logprobs") else "update_" + c.name.split()[1]
        if key in names:
            out.append(c)
    return out


def controller_function(cfg, model_cfg, mesh) -> Compilable:
    """`controller_step` under the jit `ActiveMem` builds, for a rollout's episodes."""
    from activemem_jax.activemem.step import controller_step
    from activemem_jax.memory import tree as hlmt

    pc = build.policy_config(cfg)
    t = cfg.train
    e = int(t.prompts_per_step * t.group_size)
    d = model_cfg.hidden_size
    ctrl_gd, ctrl_state = abstract_controller(cfg, model_cfg)
    rep = NamedSharding(mesh, PartitionSpec())

    def stacked():
        tree = hlmt.init_tree(pc.capacity, d, pc.max_children, pc.max_depth)
        log = hlmt.new_log(pc.max_ops, d)
        grow = lambda x: jnp.broadcast_to(x, (e,) + x.shape)  # noqa: E731  (rollout._stack)
        return jax.tree.map(grow, tree), jax.tree.map(grow, log)

    overlays, logs = jax.eval_shape(stacked)
    keys = jax.eval_shape(lambda: jax.vmap(jax.random.PRNGKey)(jnp.zeros((e,), jnp.int32)))
    f32 = jax.ShapeDtypeStruct((e, d), jnp.float32)
    args = with_sharding((ctrl_state, overlays, logs, f32, f32, keys, jax.ShapeDtypeStruct((e,), jnp.bool_),
                          jax.ShapeDtypeStruct((), jnp.int32)), rep)
    scfg = dataclasses.replace(pc.step_config, greedy=False, rule=False)
    jitted = jax.jit(controller_step, static_argnums=(0, 9))  # as ActiveMem.__init__
    return Compilable(f"controller step E={e}", jitted, (ctrl_gd, *args, scfg), {},
                      Work(0, 0.0), mesh, f"capacity {pc.capacity}")


def engine_functions(cfg, model_cfg, mesh, rules) -> list[Compilable]:
    """The engine's jitted prefill (a batched chunk of the longest prompts, reading the
    whole context) and decode step (every slot, reading the whole context)."""
    from activemem_jax.engine import core
    from activemem_jax.engine import prefill

    slots, max_len = int(cfg.engine.max_slots), int(cfg.engine.max_len)
    rows = max_len + prefill.PREFILL_CHUNK
    graphdef, state = abstract_backbone(model_cfg, mesh, rules)
    fns, place, how = engine_steps(graphdef, model_cfg, mesh, rules, slots, rows)
    abstract = jax.eval_shape(lambda: core.init_state(model_cfg, slots, rows, paged_cache(model_cfg, mesh)))
    if isinstance(place, NamedSharding):
        dstate = with_sharding(abstract, place)
    else:
        dstate = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, place)
    rep = NamedSharding(mesh, PartitionSpec())
    r = shapes.prefill_bucket(min(max_len, prefill.PREFILL_CHUNK))  # the longest chunk the engine runs
    cap = max(1, min(slots, prefill.PREFILL_TOKENS // r))  # Engine._prefill's group of chunks
    p = min(shapes.prefill_rows(cap, slots), max(cap, prefill.PREFILL_TOKENS // r))  # Engine._run_prefill
    i32, f32 = jnp.int32, jnp.float32
    sds = jax.ShapeDtypeStruct
    inputs = (sds((p,), i32), sds((p, r), i32), sds((p,), i32), sds((p,), i32),
              sds((p, core.MAX_LATENTS, model_cfg.hidden_size), f32), sds((p, core.MAX_LATENTS), i32),
              (sds((p,), f32), sds((p,), i32), sds((p,), f32), sds((p,), i32)))
    inputs = with_sharding(inputs, rep)
    kv_prefill = shapes.kv_bucket(max_len, rows)
    kv_decode = shapes.kv_bucket(max_len, rows, low=128)
    note = f"decode state {how}"
    return [
        Compilable(f"prefill {p}x{r} kv={kv_prefill}", fns["prefill"], (state, dstate, *inputs),
                   dict(kv_len=kv_prefill, fresh=False),
                   Work(p * r, forward_flops(model_cfg, p * r, kv_prefill - r / 2, p), model_cfg.scan_layers), mesh,
                   note),
        Compilable(f"decode {slots} slots kv={kv_decode}", fns["generate"], (state, dstate, None),
                   dict(kv_len=kv_decode, top=False),
                   Work(slots, forward_flops(model_cfg, slots, kv_decode, slots), model_cfg.scan_layers), mesh, note),
    ]


__all__ = ["ARCHITECTURES", "Compilable", "Report", "Work", "abstract_backbone", "abstract_controller",
           "compile_report", "controller_function", "engine_functions", "engine_mesh", "engine_steps",
           "forward_flops", "hf_fields", "layer_configs", "model_config", "named_train_functions",
           "rows_sharding", "runtime_options", "train_functions", "training_rows", "whole_model", "with_sharding"]
