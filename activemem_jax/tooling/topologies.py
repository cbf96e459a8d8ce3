"""TPU slices by their user-facing names (v5p-8, v5e-16, ...) and their devices on a
machine without a TPU, for ahead-of-time compilation (`launch/aot.py`).

    sl = SLICES["v5p-8"]
    devices = slice_devices("v5p-8")            # 4 abstract TPU v5 devices (needs libtpu)
    mesh = slice_mesh("v5p-8", devices, data=1, fsdp=-1, tensor=1)

With `libtpu` installed (the version `jax[tpu]` pins), `jax.experimental.topologies.
get_topology_desc` describes a named slice on any host; `jit(...).lower(...).compile()`
over a mesh of those devices builds the TPU executable, so its per-device memory and the
compiler's cost estimates can be read here (MaxText's `train_compile.py` does the same).
Chip figures are Google Cloud's published per-chip numbers (HBM capacity, peak bf16 dense
matmul throughput, HBM bandwidth).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import numpy as np


class TopologyError(ValueError):
    """An unknown slice name, or a mesh that does not fit the slice."""


@dataclasses.dataclass(frozen=True)
class Chip:
    name: str
    hbm_gib: float       # HBM per chip
    peak_tflops: float   # bf16 dense matmul, per chip
    hbm_gbps: float      # HBM bandwidth, GB/s per chip


CHIPS = {
    "v4": Chip("TPU v4", 32.0, 275.0, 1228.0),
    "v5e": Chip("TPU v5e", 16.0, 197.0, 819.0),
    "v5p": Chip("TPU v5p", 95.0, 459.0, 2765.0),
    "v6e": Chip("TPU v6e", 32.0, 918.0, 1640.0),
}


@dataclasses.dataclass(frozen=True)
class Slice:
    name: str                 # user-facing, e.g. "v5p-8" (v4 / v5p count TensorCores, v5e / v6e chips)
    topology: str             # libtpu's topology name, e.g. "v5:2x2x1"
    chip_config: str          # "megacore" (one device per chip of two cores) or "default"
    host_bounds: tuple        # chips per host in each dimension
    chips: int

    @property
    def chip(self) -> Chip:
        return CHIPS[self.name.split("-")[0]]

    @property
    def hosts(self) -> int:
        return self.chips // int(np.prod(self.host_bounds))


def _slices():
    out = {}
    for gen, topo_gen in (("v4", "v4"), ("v5p", "v5")):  # megacore: name counts cores, 2 per chip
        for cores, shape in ((8, "2x2x1"), (16, "2x2x2"), (32, "2x2x4"), (64, "2x4x4"), (128, "4x4x4")):
            out[f"{gen}-{cores}"] = Slice(f"{gen}-{cores}", f"{topo_gen}:{shape}", "megacore", (2, 2, 1),
                                          cores // 2)
    for gen in ("v5e", "v6e"):  # one core per chip; 8-chip hosts for the -8, 4-chip hosts beyond
        out[f"{gen}-1"] = Slice(f"{gen}-1", f"{gen}:1x1", "default", (1, 1, 1), 1)
        out[f"{gen}-4"] = Slice(f"{gen}-4", f"{gen}:2x2", "default", (2, 2, 1), 4)
        out[f"{gen}-8"] = Slice(f"{gen}-8", f"{gen}:2x4", "default", (2, 4, 1), 8)
        for chips, shape in ((16, "4x4"), (32, "4x8"), (64, "8x8"), (128, "8x16"), (256, "16x16")):
            out[f"{gen}-{chips}"] = Slice(f"{gen}-{chips}", f"{gen}:{shape}", "default", (2, 2, 1), chips)
    return out


SLICES: dict[str, Slice] = _slices()


def get_slice(name: str) -> Slice:
    if name not in SLICES:
        raise TopologyError(f"unknown topology {name!r}; known: {', '.join(SLICES)}")
    return SLICES[name]


def slice_devices(name: str) -> list:
    """The abstract TPU devices of slice `name` (no TPU needed; libtpu must be installed)."""
    sl = get_slice(name)
    import importlib.util

    if importlib.util.find_spec("libtpu") is None:
        raise TopologyError(f"compiling for {name} needs libtpu: bash launch/install.sh tpu (or test)")
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", sl.name)  # quiets libtpu's host probing
    # no TPU is opened: several processes (tests, aot.py) may load libtpu at once
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    from jax.experimental.topologies import get_topology_desc

    try:
        topo = get_topology_desc(platform="tpu", topology_name=sl.topology, chip_config_name=sl.chip_config,
                                 chips_per_host_bounds=sl.host_bounds)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise TopologyError(f"cannot describe {name} ({sl.topology}): {type(e).__name__}: {first}") from e
    devices = list(topo.devices)
    if len(devices) != sl.chips:
        raise TopologyError(f"{name}: libtpu gave {len(devices)} devices for {sl.topology}; expected {sl.chips}")
    return devices


def mesh_sizes(name: str, n_devices: int, data: int, fsdp: int, tensor: int) -> tuple[int, int, int]:
    """(data, fsdp, tensor) over all `n_devices` of the slice (-1 in one axis takes the
    rest); a TopologyError names the numbers when they do not multiply to the slice."""
    sizes = [int(data), int(fsdp), int(tensor)]
    text = f"mesh data={data} x fsdp={fsdp} x tensor={tensor}"
    if sizes.count(-1) > 1 or any(s == 0 or s < -1 for s in sizes):
        raise TopologyError(f"{text}: use positive sizes, at most one of them -1")
    if -1 in sizes:
        known = int(np.prod([s for s in sizes if s != -1]))
        if n_devices % known:
            raise TopologyError(f"{text}: {known} does not divide the {n_devices} devices of {name}")
        sizes[sizes.index(-1)] = n_devices // known
    if int(np.prod(sizes)) != n_devices:
        raise TopologyError(f"{text} = {int(np.prod(sizes))} devices; {name} has {n_devices}: "
                            "the mesh must cover the slice")
    return tuple(sizes)


def slice_mesh(name: str, devices: Sequence, data: int = 1, fsdp: int = -1, tensor: int = 1):
    """The run's (data, fsdp, tensor) mesh over the slice's devices, laid out as
    `sharding.make_mesh` lays out `jax.devices()`."""
    from activemem_jax.sharding import make_mesh

    d, f, t = mesh_sizes(name, len(devices), data, fsdp, tensor)
    return make_mesh(data=d, fsdp=f, tensor=t, devices=list(devices))


__all__ = ["CHIPS", "Chip", "SLICES", "Slice", "TopologyError", "get_slice", "mesh_sizes", "slice_devices",
           "slice_mesh"]
