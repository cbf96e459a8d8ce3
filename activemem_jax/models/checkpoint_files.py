"""Readers for checkpoint files: safetensors (single or sharded) and GGUF.

Each reader exposes `names()`, `shape(name)`, `read(name) -> np.ndarray` and
`file_of(name)`, with tensors named as in Hugging Face checkpoints (GGUF names are
translated and llama.cpp's Q/K row permutation is undone here). Tensors are read
lazily: safetensors through a memory map, GGUF dequantized one tensor at a time.
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any, Iterable

import ml_dtypes
import numpy as np


class CheckpointError(ValueError):
    """A checkpoint file is missing, truncated, corrupt or does not fit the model."""


_ST_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
    "BOOL": np.bool_,
}


class SafetensorsReader:
    """One `model.safetensors` or a sharded set listed in `model.safetensors.index.json`."""

    def __init__(self, files: Iterable[str]):
        self._entries: dict[str, tuple[str, dict[str, Any], int]] = {}
        for path in files:
            self._index_file(path)

    @classmethod
    def from_directory(cls, directory: str) -> "SafetensorsReader":
        index = os.path.join(directory, "model.safetensors.index.json")
        single = os.path.join(directory, "model.safetensors")
        if os.path.exists(index):
            try:
                with open(index) as f:
                    weight_map = json.load(f)["weight_map"]
            except (OSError, ValueError, KeyError) as e:
                raise CheckpointError(f"{index}: unreadable shard index ({e}); "
                                      "re-save the checkpoint with save_pretrained") from e
            files = sorted({os.path.join(directory, v) for v in weight_map.values()})
            missing = [f for f in files if not os.path.exists(f)]
            if missing:
                raise CheckpointError(f"{index} lists shard files that do not exist: {missing}")
            reader = cls(files)
            absent = sorted(set(weight_map) - set(reader.names()))
            if absent:
                raise CheckpointError(f"{index} maps tensors that no shard holds: {absent[:5]}")
            return reader
        if os.path.exists(single):
            return cls([single])
        raise CheckpointError(f"{directory}: no model.safetensors or model.safetensors.index.json")

    def _index_file(self, path: str) -> None:
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as f:
                head = f.read(8)
                if len(head) < 8:
                    raise CheckpointError(f"{path}: file is {size} bytes, too short for a "
                                          "safetensors header (truncated?)")
                n = int.from_bytes(head, "little")
                if n <= 0 or 8 + n > size:
                    raise CheckpointError(f"{path}: header length {n} exceeds the file size "
                                          f"{size} (truncated or not a safetensors file)")
                header = json.loads(f.read(n))
        except OSError as e:
            raise CheckpointError(f"{path}: cannot read ({e})") from e
        except (ValueError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{path}: corrupt safetensors header ({e})") from e
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__":
                continue
            start, end = info["data_offsets"]
            if base + end > size:
                raise CheckpointError(
                    f"{path}: tensor {name!r} ends at byte {base + end} but the file has {size} "
                    "bytes: the file is truncated; copy or download it again")
            if info["dtype"] not in _ST_DTYPES:
                raise CheckpointError(f"{path}: tensor {name!r} has unsupported dtype {info['dtype']}")
            self._entries[name] = (path, info, base)

    def names(self) -> list[str]:
        return list(self._entries)

    def file_of(self, name: str) -> str:
        return self._entries[name][0]

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._entries[name][1]["shape"])

    def read(self, name: str) -> np.ndarray:
        path, info, base = self._entries[name]
        dtype = np.dtype(_ST_DTYPES[info["dtype"]])
        start, end = info["data_offsets"]
        shape = tuple(info["shape"])
        if (end - start) != int(np.prod(shape)) * dtype.itemsize:
            raise CheckpointError(f"{path}: tensor {name!r} byte range does not match its "
                                  f"shape {shape} and dtype {info['dtype']} (corrupt header)")
        return np.memmap(path, dtype=dtype, mode="r", offset=base + start, shape=shape)


# GGUF tensor name -> Hugging Face name.
_GGUF_TO_HF = (
    (r"token_embd\.weight", r"model.embed_tokens.weight"),
    (r"output_norm\.weight", r"model.norm.weight"),
    (r"output\.weight", r"lm_head.weight"),
    (r"blk\.(\d+)\.attn_q\.(weight|bias)", r"model.layers.\1.self_attn.q_proj.\2"),
    (r"blk\.(\d+)\.attn_k\.(weight|bias)", r"model.layers.\1.self_attn.k_proj.\2"),
    (r"blk\.(\d+)\.attn_v\.(weight|bias)", r"model.layers.\1.self_attn.v_proj.\2"),
    (r"blk\.(\d+)\.attn_output\.(weight|bias)", r"model.layers.\1.self_attn.o_proj.\2"),
    (r"blk\.(\d+)\.attn_q_norm\.weight", r"model.layers.\1.self_attn.q_norm.weight"),
    (r"blk\.(\d+)\.attn_k_norm\.weight", r"model.layers.\1.self_attn.k_norm.weight"),
    (r"blk\.(\d+)\.ffn_gate\.weight", r"model.layers.\1.mlp.gate_proj.weight"),
    (r"blk\.(\d+)\.ffn_up\.weight", r"model.layers.\1.mlp.up_proj.weight"),
    (r"blk\.(\d+)\.ffn_down\.weight", r"model.layers.\1.mlp.down_proj.weight"),
    (r"blk\.(\d+)\.attn_norm\.weight", r"model.layers.\1.input_layernorm.weight"),
    (r"blk\.(\d+)\.ffn_norm\.weight", r"model.layers.\1.post_attention_layernorm.weight"),
)
# Architectures whose Q/K rows llama.cpp's converter permutes.
_GGUF_PERMUTED_ARCHS = ("llama", "mistral")


def _field_value(field) -> Any:
    try:
        return field.contents()
    except Exception:  # noqa: BLE001 - odd field types are metadata we do not need
        return None


def parsed_gguf(path: str):
    """`gguf.GGUFReader(path)`, parsed once per file version: the weights loader and the
    tokenizer read the same file, and parsing its 49k-token vocabulary takes seconds."""
    st = os.stat(path)
    return _parsed_gguf(os.path.realpath(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=2)
def _parsed_gguf(path: str, size: int, mtime_ns: int):
    import gguf

    del size, mtime_ns  # the cache key: a rewritten file is parsed again
    return gguf.GGUFReader(path)


class GGUFReader:
    """A `.gguf` file through the `gguf` package; names and layouts translated to HF."""

    def __init__(self, path: str):
        self.path = path
        try:
            self._reader = parsed_gguf(path)
        except Exception as e:  # gguf raises ValueError/IndexError/struct errors
            raise CheckpointError(f"{path}: cannot parse GGUF file ({type(e).__name__}: {e}); "
                                  "the file is truncated, corrupt, or not GGUF") from e
        self.fields = {k: _field_value(f) for k, f in self._reader.fields.items()
                       if not k.startswith("tokenizer.ggml.") or k.endswith("_id")}
        self.fields["tokenizer.ggml.tokens"] = range(
            len(self._reader.fields["tokenizer.ggml.tokens"].data)
        ) if "tokenizer.ggml.tokens" in self._reader.fields else ()
        self.arch = self.fields.get("general.architecture")
        self._tensors = {}
        self._skipped = []
        for t in self._reader.tensors:
            hf = _gguf_to_hf_name(t.name)
            if hf is None:
                self._skipped.append(t.name)
            else:
                self._tensors[hf] = t
        if "rope_freqs.weight" in self._skipped:
            raise NotImplementedError(
                f"{path}: tensor 'rope_freqs.weight' (Llama-3 RoPE scaling stored in GGUF) is not "
                "implemented; load the Hugging Face checkpoint of this model instead")

    @property
    def skipped(self) -> list[str]:
        return list(self._skipped)

    def names(self) -> list[str]:
        return list(self._tensors)

    def file_of(self, name: str) -> str:
        return self.path

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(int(d) for d in reversed(self._tensors[name].shape))

    def read(self, name: str) -> np.ndarray:
        import gguf

        t = self._tensors[name]
        try:
            w = gguf.quants.dequantize(t.data, t.tensor_type)
        except NotImplementedError as e:
            raise CheckpointError(f"{self.path}: tensor {t.name!r} has quant type "
                                  f"{t.tensor_type.name}, which gguf cannot dequantize") from e
        except Exception as e:
            raise CheckpointError(f"{self.path}: tensor {t.name!r} cannot be read "
                                  f"({type(e).__name__}: {e}); the file may be truncated") from e
        w = np.asarray(w, np.float32).reshape(self.shape(name))
        if self.arch in _GGUF_PERMUTED_ARCHS:
            heads = self.fields.get(f"{self.arch}.attention.head_count")
            if name.endswith("self_attn.q_proj.weight"):
                w = _reverse_permute(w, int(heads))
            elif name.endswith("self_attn.k_proj.weight"):
                w = _reverse_permute(w, int(self.fields.get(f"{self.arch}.attention.head_count_kv", heads)))
        return w


def _gguf_to_hf_name(name: str):
    for pattern, repl in _GGUF_TO_HF:
        if re.fullmatch(pattern, name):
            return re.sub(pattern, repl, name)
    return None


def _reverse_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's interleaving of rotary halves in Q/K rows."""
    rows = w.shape[0]
    half = rows // n_head // 2
    return w.reshape(n_head, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
