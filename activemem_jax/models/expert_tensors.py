"""Mixture-of-experts checkpoints: each sparse layer's experts shown as three stacked tensors.

The decoder keeps a layer's experts stacked, `[num_experts, ...]` (`decoder.Experts`).
Checkpoints store them one of two ways, both read here:

- per expert, as `save_pretrained` writes them (transformers 5 turns its fused
  parameters back into this layout on save): `model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight`,
  `[F, D]` / `[D, F]` each;
- fused, as transformers 5 holds them in memory (`model.state_dict()`):
  `model.layers.N.mlp.experts.gate_up_proj` `[E, 2F, D]` (gate rows first, then up) and
  `model.layers.N.mlp.experts.down_proj` `[E, D, F]`.

`StackedExperts` wraps a reader and replaces either layout by three tensors named
`model.layers.N.mlp.experts.*.{gate,up,down}_proj.weight` (`[E, F, D]`, `[E, F, D]`,
`[E, D, F]`), stacked (or sliced) when read, so `weights.load_state` places them as it
places any other tensor. A missing expert, an expert number past the config's count, or
experts of different shapes raise `CheckpointError` naming the tensor.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from activemem_jax.models.checkpoint_files import CheckpointError

PROJS = ("gate", "up", "down")
_PER_EXPERT = re.compile(r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight")
_FUSED = re.compile(r"model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)")


def stacked_name(layer: int, proj: str) -> str:
    """The name a layer's stacked expert weight goes by (`proj`: gate | up | down)."""
    return f"model.layers.{layer}.mlp.experts.*.{proj}_proj.weight"


def expert_name(layer: int, expert: int, proj: str) -> str:
    return f"model.layers.{layer}.mlp.experts.{expert}.{proj}_proj.weight"


class StackedExperts:
    """A checkpoint reader (`names`, `shape`, `read`, `file_of`) whose expert tensors are
    stacked per layer and projection; every other tensor passes through unchanged.

    num_experts: the config's expert count; sparse_layers: the layers whose MLP is the
    mixture of experts (each must hold all its experts in one of the two layouts)."""

    def __init__(self, reader, num_experts: int, sparse_layers: Sequence[int]):
        self._reader = reader
        self._num_experts = num_experts
        sparse = set(sparse_layers)
        per_expert: dict[tuple[int, str], dict[int, str]] = {}
        fused: dict[tuple[int, str], str] = {}
        self._passed = []  # every other tensor, expert tensors of layers the config calls dense included
        for name in reader.names():
            if (m := _PER_EXPERT.fullmatch(name)) and int(m[1]) in sparse:
                per_expert.setdefault((int(m[1]), m[3]), {})[int(m[2])] = name
            elif (m := _FUSED.fullmatch(name)) and int(m[1]) in sparse:
                fused[(int(m[1]), m[2])] = name
            else:
                self._passed.append(name)
        # stacked name -> (per-expert tensors to stack, or [one fused tensor] and the slice
        # of its axis 1 to take (None: all of it))
        self._stacks: dict[str, tuple[list[str], slice | None]] = {}
        self._fused: set[str] = set()
        for layer in sorted(sparse):
            own_fused = [fused[(layer, p)] for p in ("gate_up_proj", "down_proj") if (layer, p) in fused]
            if own_fused and any((layer, p) in per_expert for p in PROJS):
                raise CheckpointError(f"{reader.file_of(own_fused[0])}: layer {layer} holds its experts both "
                                      f"per expert and fused ({own_fused[0]!r}); keep one layout")
            if own_fused:
                self._add_fused(layer, fused)
            else:
                self._add_per_expert(layer, per_expert)

    def _add_per_expert(self, layer: int, per_expert: dict) -> None:
        for proj in PROJS:
            found = per_expert.get((layer, proj), {})
            extra = [name for e, name in sorted(found.items()) if e >= self._num_experts]
            if extra:
                raise CheckpointError(f"{self._reader.file_of(extra[0])}: tensor {extra[0]!r} names an expert "
                                      f"past config.json's num_experts={self._num_experts}; the two disagree")
            missing = [e for e in range(self._num_experts) if e not in found]
            if missing:
                where = self._reader.file_of(next(iter(found.values()))) if found else self._where()
                raise CheckpointError(
                    f"{where}: missing tensor {expert_name(layer, missing[0], proj)!r}"
                    f"{' (and %d more experts)' % (len(missing) - 1) if len(missing) > 1 else ''}; "
                    f"layer {layer} is sparse and config.json has num_experts={self._num_experts}")
            names = [found[e] for e in range(self._num_experts)]
            first = self._reader.shape(names[0])
            for name in names[1:]:
                if self._reader.shape(name) != first:
                    raise CheckpointError(
                        f"{self._reader.file_of(name)}: tensor {name!r} has shape {self._reader.shape(name)}, "
                        f"but {names[0]!r} has {first}; all experts of a layer must have one shape")
            self._stacks[stacked_name(layer, proj)] = (names, None)

    def _add_fused(self, layer: int, fused: dict) -> None:
        for part in ("gate_up_proj", "down_proj"):
            if (layer, part) not in fused:
                raise CheckpointError(f"{self._where()}: missing tensor 'model.layers.{layer}.mlp.experts.{part}' "
                                      f"(layer {layer} holds its other experts fused)")
        gate_up = fused[(layer, "gate_up_proj")]
        shape = self._reader.shape(gate_up)
        if len(shape) != 3 or shape[1] % 2:
            raise CheckpointError(f"{self._reader.file_of(gate_up)}: tensor {gate_up!r} has shape {shape}; "
                                  "expected [num_experts, 2 * moe_intermediate_size, hidden_size]")
        half = shape[1] // 2
        self._stacks[stacked_name(layer, "gate")] = ([gate_up], slice(0, half))
        self._stacks[stacked_name(layer, "up")] = ([gate_up], slice(half, None))
        self._stacks[stacked_name(layer, "down")] = ([fused[(layer, "down_proj")]], None)
        self._fused.update(stacked_name(layer, p) for p in PROJS)

    def _where(self) -> str:
        return ", ".join(sorted({self._reader.file_of(n) for n in self._reader.names()})) or "<empty checkpoint>"

    def names(self) -> list[str]:
        return self._passed + list(self._stacks)

    def file_of(self, name: str) -> str:
        return self._reader.file_of(self._stacks[name][0][0] if name in self._stacks else name)

    def shape(self, name: str) -> tuple[int, ...]:
        if name not in self._stacks:
            return self._reader.shape(name)
        names, part = self._stacks[name]
        if name not in self._fused:
            return (len(names),) + self._reader.shape(names[0])
        shape = self._reader.shape(names[0])
        if part is not None:
            shape = (shape[0], len(range(*part.indices(shape[1])))) + shape[2:]
        return shape

    def read(self, name: str) -> np.ndarray:
        if name not in self._stacks:
            return self._reader.read(name)
        names, part = self._stacks[name]
        if name not in self._fused:
            return np.stack([self._reader.read(n) for n in names])
        host = self._reader.read(names[0])
        return host if part is None else host[:, part]


__all__ = ["StackedExperts", "expert_name", "stacked_name"]
