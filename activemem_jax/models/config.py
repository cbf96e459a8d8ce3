"""`ModelConfig`: one decoder description for every supported family.

Built from a Hugging Face `config.json` (`from_hf_dict`) or from GGUF metadata
(`from_gguf_fields`). Family differences are switches (q/k/v bias, q/k RMSNorm,
head_dim, tied embeddings, RoPE scaling, sparse mixture-of-experts MLP layers), never
separate model classes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from activemem_jax.models.attention import check_attention
from activemem_jax.models.decode_kernel import check_decode

# model_type -> switches that the family fixes.
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {},
    "mistral": {},
    "qwen2": {"qkv_bias": True},
    "qwen3": {"qk_norm": True},
    "smollm3": {},  # Llama with NoPE layers (`rope_layers`)
    "qwen3_moe": {"qk_norm": True, "moe": True},  # Qwen3 with sparse MoE MLP layers (`moe_layers`)
}
# families read from Hugging Face directories only (their GGUF metadata is not mapped)
HF_ONLY = ("smollm3", "qwen3_moe")

SUPPORTED_ROPE_TYPES = ("default", "llama3")


class UnsupportedModelError(ValueError):
    """The checkpoint describes a model this decoder cannot run."""


@dataclasses.dataclass(frozen=True)
class RopeConfig:
    theta: float = 10000.0
    rope_type: str = "default"  # "default" | "llama3"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 4096
    rope: RopeConfig = RopeConfig()
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False
    hidden_act: str = "silu"
    # per layer: True = rotary positions, False = NoPE (SmolLM3's no_rope_layers); () = all rotary
    rope_layers: tuple[bool, ...] = ()
    # Mixture of experts (Qwen3-MoE). moe_layers[i]: layer i's MLP is sparse (a router picks
    # num_experts_per_tok of num_experts SwiGLU experts of width moe_intermediate_size, their
    # outputs weighted by the router's softmax, renormalized over the chosen ones when
    # norm_topk_prob); otherwise dense with intermediate_size. () = every layer dense.
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    norm_topk_prob: bool = False
    moe_layers: tuple[bool, ...] = ()
    bos_token_id: Optional[int] = None
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: Optional[int] = None
    # Runtime switches (not properties of the checkpoint).
    dtype: str = "float32"  # parameter dtype: "float32" | "bfloat16"
    # activations and KV cache; "" = same as dtype. bfloat16 weights with float32
    # activations halve weight traffic and run the matmuls on bf16 units (AMX on CPU)
    # while the residual stream, attention and cache stay float32.
    activation_dtype: str = ""
    # "int8": every matmul weight (projections, MLP, embedding / lm_head) is stored as int8
    # with one float32 scale per output row, and each matmul quantizes its input rows to
    # int8 on the fly (W8A8, int32 accumulation): a quarter of f32's weight traffic.
    # Norms and biases keep `dtype`. For decoding and serving.
    quant: str = ""
    remat: bool = False  # rematerialize each layer in the backward pass (remat_policy "full")
    # what the backward pass keeps of each layer: "none" | "full" (recompute everything) |
    # "dots_saveable" | "dots_with_no_batch_dims_saveable" (keep matmul outputs);
    # "" = "full" if remat else "none"
    remat_policy: str = ""
    # stacked layer weights [L, ...] run under one scan: compile time independent of depth
    # (on CPU the unrolled layers decode faster)
    scan_layers: bool = False
    # attention implementation: "auto" (by platform) | "xla" | "splash" (TPU) | "cudnn" (GPU);
    # see models/attention.py
    attention: str = "auto"
    # the engine's decode attention: "auto" (paged on TPU and GPU) | "xla" | "paged"
    # (a Pallas paged kernel over a paged cache); see models/decode_kernel.py
    decode_attention: str = "auto"

    def __post_init__(self):
        if self.num_heads % self.num_kv_heads:
            raise UnsupportedModelError(
                f"num_attention_heads={self.num_heads} is not a multiple of "
                f"num_key_value_heads={self.num_kv_heads}")
        if self.rope.rope_type not in SUPPORTED_ROPE_TYPES:
            raise NotImplementedError(
                f"rope_scaling.rope_type={self.rope.rope_type!r} is not implemented "
                f"(supported: {', '.join(SUPPORTED_ROPE_TYPES)})")
        if self.hidden_act not in ("silu", "swish"):
            raise NotImplementedError(f"hidden_act={self.hidden_act!r} is not implemented (only silu)")
        for name in ("dtype", "activation_dtype"):
            value = getattr(self, name)
            if value not in ("float32", "bfloat16") and not (name == "activation_dtype" and value == ""):
                raise ValueError(f"{name}={value!r}: use 'float32' or 'bfloat16'")
        if self.remat_policy not in ("", "none", "full", "dots_saveable", "dots_with_no_batch_dims_saveable"):
            raise ValueError(f"remat_policy={self.remat_policy!r}: use 'none', 'full', 'dots_saveable' "
                             "or 'dots_with_no_batch_dims_saveable'")
        if self.remat and self.remat_policy == "none":
            raise ValueError("remat=True contradicts remat_policy='none'; give one of them")
        check_attention(self.attention)
        check_decode(self.decode_attention)
        if self.quant not in ("", "int8"):
            raise ValueError(f"quant={self.quant!r}: use '' (no quantization) or 'int8'")
        self._check_moe()

    def _check_moe(self) -> None:
        if not any(self.moe_layers):
            return
        if len(self.moe_layers) != self.num_layers:
            raise UnsupportedModelError(f"moe_layers has {len(self.moe_layers)} entries for "
                                        f"num_hidden_layers={self.num_layers}")
        if not 1 <= self.num_experts_per_tok <= self.num_experts:
            raise UnsupportedModelError(f"num_experts_per_tok={self.num_experts_per_tok} must lie in "
                                        f"[1, num_experts={self.num_experts}]")
        if self.moe_intermediate_size <= 0:
            raise UnsupportedModelError(f"moe_intermediate_size={self.moe_intermediate_size} must be positive")
        if self.quant:
            raise NotImplementedError(f"quant={self.quant!r} is not implemented for mixture-of-experts "
                                      "layers; load this model with quant=''")
        if self.scan_layers and len(set(self.moe_layers)) > 1:
            raise NotImplementedError(
                "scan_layers=True needs every layer alike, but this model mixes dense and sparse MLP "
                "layers (decoder_sparse_step / mlp_only_layers); load it with scan_layers=False")

    @property
    def act_dtype(self) -> str:
        return self.activation_dtype or self.dtype

    @property
    def remat_mode(self) -> str:
        """The remat policy in force: remat_policy, else "full" with remat, else "none"."""
        return self.remat_policy or ("full" if self.remat else "none")

    @property
    def num_params(self) -> int:
        d, h, kv, hd, f = (self.hidden_size, self.num_heads, self.num_kv_heads,
                           self.head_dim, self.intermediate_size)
        attn = d * h * hd * 2 + d * kv * hd * 2
        attn += (h * hd + 2 * kv * hd) * self.qkv_bias + d * self.o_bias + 2 * hd * self.qk_norm
        sparse = sum(self.layer_is_sparse(i) for i in range(self.num_layers))
        mlp = (self.num_layers - sparse) * 3 * d * f
        mlp += sparse * self.num_experts * d * (3 * self.moe_intermediate_size + 1)  # experts + router
        head = 0 if self.tie_word_embeddings else self.vocab_size * d
        return self.num_layers * (attn + 2 * d) + mlp + self.vocab_size * d + d + head

    @property
    def num_active_params(self) -> int:
        """Parameters one token's forward pass uses: `num_params` less, in each sparse layer, the
        num_experts - num_experts_per_tok experts its router does not pick (the router and the
        chosen experts count). A dense model's is `num_params`."""
        sparse = sum(self.layer_is_sparse(i) for i in range(self.num_layers))
        idle = self.num_experts - self.num_experts_per_tok
        return self.num_params - sparse * idle * 3 * self.hidden_size * self.moe_intermediate_size

    def mlp_matmul_params(self, i: int) -> int:
        """The MLP weights one token multiplies in layer i: the dense SwiGLU's 3·d·f, or the
        router's d·E and its top-k experts' 3·d·f_moe each."""
        d = self.hidden_size
        if self.layer_is_sparse(i):
            return d * self.num_experts + self.num_experts_per_tok * 3 * d * self.moe_intermediate_size
        return 3 * d * self.intermediate_size

    def layer_uses_rope(self, i: int) -> bool:
        return not self.rope_layers or bool(self.rope_layers[i])

    def layer_is_sparse(self, i: int) -> bool:
        """Whether layer i's MLP is the mixture of experts (else the dense SwiGLU)."""
        return bool(self.moe_layers) and bool(self.moe_layers[i])

    def replace(self, **kw) -> "ModelConfig":
        return dataclasses.replace(self, **kw)

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_hf_dict(cls, cfg: Mapping[str, Any], *, source: str = "config.json",
                     **runtime) -> "ModelConfig":
        model_type = cfg.get("model_type")
        if model_type not in FAMILIES:
            raise UnsupportedModelError(
                f"{source}: unknown architecture model_type={model_type!r} "
                f"(architectures={cfg.get('architectures')}); supported: {sorted(FAMILIES)}")
        for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                    "num_attention_heads"):
            if key not in cfg:
                raise UnsupportedModelError(f"{source}: required field {key!r} is missing")
        _reject_unsupported_hf_fields(cfg, model_type, source)
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        head_dim = cfg.get("head_dim") or hidden // heads
        eos = cfg.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, (list, tuple)) else ((eos,) if eos is not None else ())
        fam = FAMILIES[model_type]
        return cls(
            model_type=model_type,
            vocab_size=int(cfg["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(cfg["intermediate_size"]),
            num_layers=int(cfg["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(head_dim),
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            max_position_embeddings=int(cfg.get("max_position_embeddings", 4096)),
            rope=_rope_from_hf(cfg, source),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=fam.get("qkv_bias", False) or bool(cfg.get("attention_bias", False)),
            o_bias=bool(cfg.get("attention_bias", False)),
            qk_norm=fam.get("qk_norm", False),
            hidden_act=cfg.get("hidden_act", "silu"),
            rope_layers=_rope_layers_from_hf(cfg, model_type, source),
            **(_moe_from_hf(cfg, source) if fam.get("moe") else {}),
            bos_token_id=cfg.get("bos_token_id"),
            eos_token_ids=eos_ids,
            pad_token_id=cfg.get("pad_token_id"),
            **runtime,
        )

    @classmethod
    def from_gguf_fields(cls, fields: Mapping[str, Any], *, has_output_weight: bool,
                         source: str = "gguf", **runtime) -> "ModelConfig":
        """`fields`: plain GGUF key -> value (already decoded)."""
        arch = fields.get("general.architecture")
        if arch in HF_ONLY:
            raise UnsupportedModelError(f"{source}: {arch} GGUF files are not read (their layer layout "
                                        "is not mapped); load the Hugging Face directory instead")
        if arch not in FAMILIES:
            raise UnsupportedModelError(
                f"{source}: unknown architecture general.architecture={arch!r}; "
                f"supported: {sorted(FAMILIES)}")

        def get(key, default=None, required=False):
            full = f"{arch}.{key}"
            if full not in fields:
                if required:
                    raise UnsupportedModelError(f"{source}: GGUF metadata {full!r} is missing")
                return default
            return fields[full]

        heads = int(get("attention.head_count", required=True))
        hidden = int(get("embedding_length", required=True))
        vocab = get("vocab_size") or len(fields.get("tokenizer.ggml.tokens", ()))
        if not vocab:
            raise UnsupportedModelError(f"{source}: cannot tell the vocab size "
                                        f"({arch}.vocab_size and tokenizer.ggml.tokens missing)")
        scaling = get("rope.scaling.type")
        if scaling not in (None, "none", "linear") or (scaling == "linear" and get("rope.scaling.factor", 1.0) != 1.0):
            raise NotImplementedError(f"{source}: {arch}.rope.scaling.type={scaling!r} is not implemented")
        if get("attention.sliding_window") is not None:
            raise NotImplementedError(f"{source}: {arch}.attention.sliding_window is not implemented")
        eos = fields.get("tokenizer.ggml.eos_token_id")
        fam = FAMILIES[arch]
        return cls(
            model_type=arch,
            vocab_size=int(vocab),
            hidden_size=hidden,
            intermediate_size=int(get("feed_forward_length", required=True)),
            num_layers=int(get("block_count", required=True)),
            num_heads=heads,
            num_kv_heads=int(get("attention.head_count_kv", heads)),
            head_dim=int(get("attention.key_length", hidden // heads)),
            rms_norm_eps=float(get("attention.layer_norm_rms_epsilon", 1e-6)),
            max_position_embeddings=int(get("context_length", 4096)),
            rope=RopeConfig(theta=float(get("rope.freq_base", 10000.0))),
            tie_word_embeddings=not has_output_weight,
            qkv_bias=fam.get("qkv_bias", False),
            qk_norm=fam.get("qk_norm", False),
            bos_token_id=fields.get("tokenizer.ggml.bos_token_id"),
            eos_token_ids=(int(eos),) if eos is not None else (),
            pad_token_id=fields.get("tokenizer.ggml.padding_token_id"),
            **runtime,
        )


def _reject_unsupported_hf_fields(cfg: Mapping[str, Any], model_type: str, source: str) -> None:
    if cfg.get("mlp_bias"):
        raise NotImplementedError(f"{source}: mlp_bias=True is not implemented")
    window = cfg.get("sliding_window")
    uses_window = cfg.get("use_sliding_window", model_type == "mistral")
    if uses_window and window is not None and int(window) < int(cfg.get("max_position_embeddings", 0)):
        raise NotImplementedError(
            f"{source}: sliding_window={window} (< max_position_embeddings) is not implemented; "
            "set sliding_window to null to run with full attention")
    layer_types = cfg.get("layer_types")
    if layer_types and any(t != "full_attention" for t in layer_types):
        raise NotImplementedError(f"{source}: layer_types other than full_attention are not implemented")


def _rope_layers_from_hf(cfg: Mapping[str, Any], model_type: str, source: str) -> tuple[bool, ...]:
    """SmolLM3: `no_rope_layers[i]` is 1 where layer i uses rotary positions (the name is
    transformers'), else every `no_rope_layer_interval`-th layer is NoPE."""
    if model_type != "smollm3":
        return ()
    n = int(cfg["num_hidden_layers"])
    flags = cfg.get("no_rope_layers")
    if flags is None:
        every = int(cfg.get("no_rope_layer_interval", 4))
        flags = [int((i + 1) % every != 0) for i in range(n)]
    if len(flags) != n:
        raise UnsupportedModelError(f"{source}: no_rope_layers has {len(flags)} entries for "
                                    f"num_hidden_layers={n}")
    return tuple(bool(f) for f in flags)


def _moe_from_hf(cfg: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Qwen3-MoE's expert fields. Layer i is sparse when it is not in `mlp_only_layers` and
    (i + 1) is a multiple of `decoder_sparse_step` (transformers' rule); config.json names
    the expert count `num_local_experts` (transformers' attribute map) or `num_experts`."""
    shared = sorted(k for k, v in cfg.items() if "shared_expert" in k and v)
    if shared:
        raise NotImplementedError(f"{source}: shared experts ({', '.join(shared)}) are not implemented; "
                                  "Qwen3-MoE has none")
    experts = cfg.get("num_experts", cfg.get("num_local_experts"))
    if experts is None:
        raise UnsupportedModelError(f"{source}: required field 'num_experts' (or 'num_local_experts') is missing")
    n, experts = int(cfg["num_hidden_layers"]), int(experts)
    step = int(cfg.get("decoder_sparse_step", 1))
    if step < 1:
        raise UnsupportedModelError(f"{source}: decoder_sparse_step={step} must be at least 1")
    dense = {int(i) for i in cfg.get("mlp_only_layers") or ()}
    layers = tuple(experts > 0 and i not in dense and (i + 1) % step == 0 for i in range(n))
    if not any(layers):
        return {}
    for key in ("num_experts_per_tok", "moe_intermediate_size"):
        if key not in cfg:
            raise UnsupportedModelError(f"{source}: required field {key!r} is missing")
    return dict(num_experts=experts, num_experts_per_tok=int(cfg["num_experts_per_tok"]),
                moe_intermediate_size=int(cfg["moe_intermediate_size"]),
                norm_topk_prob=bool(cfg.get("norm_topk_prob", False)), moe_layers=layers)


def _rope_from_hf(cfg: Mapping[str, Any], source: str) -> RopeConfig:
    params = dict(cfg.get("rope_parameters") or {})
    scaling = cfg.get("rope_scaling") or {}
    params.update({k: v for k, v in scaling.items() if v is not None})
    theta = params.get("rope_theta", cfg.get("rope_theta", 10000.0))
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise NotImplementedError(
            f"{source}: rope_scaling.rope_type={rope_type!r} is not implemented "
            f"(supported: {', '.join(SUPPORTED_ROPE_TYPES)})")
    if rope_type == "default":
        return RopeConfig(theta=float(theta))
    return RopeConfig(
        theta=float(theta), rope_type=rope_type, factor=float(params["factor"]),
        low_freq_factor=float(params.get("low_freq_factor", 1.0)),
        high_freq_factor=float(params.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=int(params.get("original_max_position_embeddings", 8192)))
