"""Device mesh with axes (data, fsdp, tensor) and the logical-axis rules table.

Every parameter carries logical axis names (`embed`, `heads`, `kv_heads`, `mlp`,
`vocab`, ...). One table, `DEFAULT_RULES` unless a config gives its own, maps each
logical name to mesh axes. A mesh axis that does not divide the dimension is dropped
for that array (replicated along it), so odd shapes (9 heads on tensor=4) still load.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor")

# logical axis -> mesh axis (or tuple of mesh axes, or None for replicated).
# Configs carry their own copy (`config.sharding.rules`) to override entries.
DEFAULT_RULES: dict[str, object] = {
    "batch": ("data", "fsdp"),
    "vocab": "tensor",
    "embed": "fsdp",
    "heads": "tensor",
    "kv_heads": "tensor",
    "head_dim": None,
    "mlp": "tensor",
    "expert": None,  # the leading axis of stacked MoE expert weights (and the router's output)
    "norm": None,
    "length": None,
    "layers": None,  # the leading axis of stacked (scanned) layer weights and KV cache
}


def make_mesh(data: int = 1, fsdp: int = 1, tensor: int = 1,
              devices: Optional[Sequence[jax.Device]] = None) -> Mesh:
    """A mesh over `data * fsdp * tensor` devices (-1 in one axis takes the rest)."""
    devices = list(devices if devices is not None else jax.devices())
    sizes = [data, fsdp, tensor]
    if sizes.count(-1) > 1:
        raise ValueError("at most one mesh axis may be -1")
    if -1 in sizes:
        known = int(np.prod([s for s in sizes if s != -1]))
        sizes[sizes.index(-1)] = len(devices) // known
    n = int(np.prod(sizes))
    if n > len(devices) or n <= 0:
        raise ValueError(f"mesh data={sizes[0]} x fsdp={sizes[1]} x tensor={sizes[2]} needs {n} "
                         f"devices; {len(devices)} are visible")
    return Mesh(np.asarray(devices[:n]).reshape(sizes), MESH_AXES)


def host_mesh(devices: Optional[Sequence[jax.Device]] = None) -> Mesh:
    """A multi-host run's rollout mesh: FSDP over this host's own devices (each host rolls
    out with its own engine; the update runs on the global mesh)."""
    return make_mesh(fsdp=-1, devices=list(devices) if devices is not None else jax.local_devices())


def rules_dict(rules: Optional[Iterable] = None) -> dict[str, object]:
    """Normalize a rules table (a mapping, e.g. a ConfigDict, or pairs) over the defaults."""
    if rules is None:
        rules = {}
    items = rules.items() if hasattr(rules, "items") else rules
    out = dict(DEFAULT_RULES)
    for name, target in items:
        if isinstance(target, list):
            target = tuple(target)
        out[str(name)] = target
    return out


def logical_to_spec(shape: Sequence[int], axes: Optional[Sequence[Optional[str]]], mesh: Mesh,
                    rules: Optional[Iterable] = None) -> PartitionSpec:
    """PartitionSpec for an array of `shape` whose dimensions carry logical `axes`."""
    if axes is None:
        return PartitionSpec()
    if len(axes) != len(shape):
        raise ValueError(f"logical axes {tuple(axes)} do not match shape {tuple(shape)}")
    table = rules_dict(rules)
    used: set[str] = set()
    spec = []
    for dim, name in zip(shape, axes):
        target = table.get(name) if name is not None else None
        targets = (target,) if isinstance(target, str) else tuple(target or ())
        kept = []
        size = 1
        for mesh_axis in targets:
            if mesh_axis in used or mesh.shape.get(mesh_axis, 1) == 1:
                continue
            if dim % (size * mesh.shape[mesh_axis]) == 0:
                kept.append(mesh_axis)
                size *= mesh.shape[mesh_axis]
        used.update(kept)
        spec.append(None if not kept else (kept[0] if len(kept) == 1 else tuple(kept)))
    return PartitionSpec(*spec)


def named_sharding(shape, axes, mesh: Mesh, rules=None) -> NamedSharding:
    return NamedSharding(mesh, logical_to_spec(shape, axes, mesh, rules))
