"""One key-mapping table from Hugging Face tensor names to the decoder's state paths,
and the placement of each tensor straight onto its (sharded) devices.
"""

from __future__ import annotations

import logging
import re
from typing import Optional

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from activemem_jax import sharding as shd
from activemem_jax.models.checkpoint_files import CheckpointError
from activemem_jax.models.quant import quantize_rows

log = logging.getLogger(__name__)


# HF tensor name (regex) -> decoder state path (template). Layouts agree (Linear kernels
# are [out, in] on both sides), so tensors load as they are. A sparse layer's experts come
# stacked [E, ...] under `experts.*` names (`models/expert_tensors.py`).
KEY_MAP: tuple[tuple[str, str], ...] = (
    (r"model\.embed_tokens\.weight", "embedding"),
    (r"model\.layers\.(\d+)\.self_attn\.([qkvo])_proj\.weight", r"layers.\1.attn.\2_proj.kernel"),
    (r"model\.layers\.(\d+)\.self_attn\.([qkvo])_proj\.bias", r"layers.\1.attn.\2_proj.bias"),
    (r"model\.layers\.(\d+)\.self_attn\.([qk])_norm\.weight", r"layers.\1.attn.\2_norm.scale"),
    (r"model\.layers\.(\d+)\.mlp\.(gate|up|down)_proj\.weight", r"layers.\1.mlp.\2_proj.kernel"),
    (r"model\.layers\.(\d+)\.mlp\.gate\.weight", r"layers.\1.mlp.router.kernel"),
    (r"model\.layers\.(\d+)\.mlp\.experts\.\*\.(gate|up|down)_proj\.weight", r"layers.\1.mlp.experts.\2_proj"),
    (r"model\.layers\.(\d+)\.input_layernorm\.weight", r"layers.\1.input_norm.scale"),
    (r"model\.layers\.(\d+)\.post_attention_layernorm\.weight", r"layers.\1.post_attn_norm.scale"),
    (r"model\.norm\.weight", "final_norm.scale"),
    (r"lm_head\.weight", "lm_head.kernel"),
)
# Tensors some checkpoints carry that the decoder recomputes or does not use.
IGNORED = (r".*rotary_emb\.inv_freq",)


def map_name(hf_name: str) -> Optional[str]:
    """HF tensor name -> dotted state path, or None if not a model weight."""
    for pattern, template in KEY_MAP:
        if re.fullmatch(pattern, hf_name):
            return re.sub(pattern, template, hf_name)
    return None


def _path_str(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def load_state(abstract_state: nnx.State, reader, mesh: Mesh, rules=None,
               tie_word_embeddings: bool = False) -> nnx.State:
    """Fill `abstract_state` (from `nnx.eval_shape`) with the reader's tensors, each put
    directly onto its sharded placement on `mesh`. Stacked layers (`scan_layers`: one
    `layers.attn.q_proj.kernel` [L, ...] instead of `layers.{i}.attn.q_proj.kernel`) are
    filled layer by layer from the same per-layer tensors."""
    targets = {}
    unknown = []
    for name in reader.names():
        mapped = map_name(name)
        if mapped is None:
            if not any(re.fullmatch(p, name) for p in IGNORED):
                unknown.append(name)
            continue
        targets[mapped] = name
    if unknown:
        log.warning("ignoring %d tensors the decoder does not use, e.g. %s", len(unknown), unknown[:3])

    def source(key: str) -> Optional[str]:  # int8 scales come from the same tensor as their weights
        if key in targets:
            return targets[key]
        return targets.get(key[:-len(_SCALE)]) if key.endswith(_SCALE) else None

    flat = nnx.to_flat_state(abstract_state)
    sources = {path: [source(k) for k in _layer_keys(path, var)] for path, var in flat}
    missing = [k for path, var in flat for k, src in zip(_layer_keys(path, var), sources[path]) if src is None]
    if missing:
        where = sorted({reader.file_of(n) for n in reader.names()}) or ["<empty checkpoint>"]
        expected = [_hf_name_for(p) for p in missing[:5]]
        raise CheckpointError(
            f"{', '.join(where)}: missing tensor(s) {expected}"
            f"{' and %d more' % (len(missing) - 5) if len(missing) > 5 else ''}; "
            "the checkpoint is incomplete or its config.json does not describe it")
    if tie_word_embeddings and "lm_head.kernel" in targets:
        log.info("checkpoint has lm_head.weight but config ties embeddings; lm_head ignored")

    leaves, quantized = [], {}
    for path, var in flat:
        key = _path_str(path)
        part = "scale" if key.endswith(_SCALE) else "q" if var.get_value().dtype == np.int8 else None
        names = sources[path]
        stacked = _is_stacked(path)
        leaves.append((path, _place(var, reader, names, stacked, mesh, rules, part, quantized)))
    return nnx.from_flat_state(leaves)


_SCALE = "_scale"  # `kernel_scale`, `embedding_scale`: the int8 scales of `kernel`, `embedding`


def _is_stacked(path: tuple) -> bool:
    """A stacked layer weight: `layers.attn...` (no layer number after `layers`)."""
    return len(path) > 1 and str(path[0]) == "layers" and not str(path[1]).isdigit()


def _layer_keys(path: tuple, var) -> list[str]:
    """The unrolled state paths a variable holds: itself, or one per layer when stacked."""
    if not _is_stacked(path):
        return [_path_str(path)]
    rest = _path_str(path[1:])
    return [f"layers.{i}.{rest}" for i in range(var.get_value().shape[0])]


def _hf_name_for(state_path: str) -> str:
    """Inverse lookup of KEY_MAP, for error messages (groups appear in the same order)."""
    for pattern, template in KEY_MAP:
        regex = r"(\w+)".join(re.escape(piece) for piece in re.split(r"\\\d", template))
        m = re.fullmatch(regex, state_path)
        if m:
            hf = pattern.replace("\\.", ".").replace("\\*", "*")
            for value in m.groups():
                hf = re.sub(r"\([^)]*\)", value, hf, count=1)
            return hf
    return state_path


def _host_tensor(reader, hf_name: str, part, quantized: dict) -> np.ndarray:
    """The tensor as stored (part None), or its int8 rows / row scales (part "q" / "scale"),
    quantized once and kept in `quantized` until the other part is taken."""
    if part is None:
        return reader.read(hf_name)
    if hf_name not in quantized:
        quantized[hf_name] = dict(zip(("q", "scale"), quantize_rows(reader.read(hf_name))))
    out = quantized[hf_name].pop(part)
    if not quantized[hf_name]:  # both parts placed: free the host copy
        del quantized[hf_name]
    return out


def _check_shape(reader, hf_name: str, part, expected: tuple):
    file_shape = reader.shape(hf_name)
    if part == "scale":
        file_shape = file_shape[:1]
    if file_shape != expected:
        raise CheckpointError(
            f"{reader.file_of(hf_name)}: tensor {hf_name!r} has shape {file_shape}, the config "
            f"expects {expected}; config.json and the weights disagree")


def _place(var, reader, hf_names: list, stacked: bool, mesh: Mesh, rules, part=None, quantized=None):
    """Put one variable on its devices: a single tensor, or (stacked) one per layer along
    the leading axis. Each distinct shard is assembled on the host once, from tensors read
    (and quantized) one at a time."""
    abstract = var.get_value()
    shape = tuple(abstract.shape)
    sharding = shd.named_sharding(shape, var.get_metadata().get("axes"), mesh, rules)
    layer_shape = shape[1:] if stacked else shape
    for name in hf_names:
        _check_shape(reader, name, part, layer_shape)

    def norm(index) -> tuple:
        index = tuple(index) + (slice(None),) * (len(shape) - len(index))
        return tuple(sl.indices(n) for sl, n in zip(index, shape))

    shards = {norm(i): i for i in sharding.addressable_devices_indices_map(shape).values()}
    buffers: dict = {}
    if not stacked:
        host = _host_tensor(reader, hf_names[0], part, quantized)
        for key, index in shards.items():
            buffers[key] = np.ascontiguousarray(host[index], dtype=abstract.dtype)
        del host
    else:
        for key, index in shards.items():
            buffers[key] = np.empty([len(range(*k)) for k in key], abstract.dtype)
        for layer, name in enumerate(hf_names):
            host = _host_tensor(reader, name, part, quantized)
            for key, index in shards.items():
                here = range(*key[0])
                if layer in here:
                    buffers[key][here.index(layer)] = host[tuple(slice(*k) for k in key[1:])]
            del host
    value = jax.make_array_from_callback(shape, sharding, lambda index: buffers[norm(index)])
    buffers.clear()
    return var.replace(value)


__all__ = ["KEY_MAP", "map_name", "load_state", "CheckpointError"]
