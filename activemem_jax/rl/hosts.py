"""Multi-host plumbing for the trainer: every host rolls out its own prompts on its own
devices, then all hosts agree on padded sizes, share what the tree commit needs, and
feed their rows into one global update.

    hosts = Hosts(mesh)
    params = hosts.replicate(params)        # identical global arrays on every host
    n, = hosts.agree(local_rows)            # the maximum over hosts
    batch = hosts.shard(rows)               # rows -> global arrays over the data/fsdp axes

With one process every method reduces to the single-host operation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec


class Hosts:
    def __init__(self, mesh):
        self.mesh = mesh
        self.count = jax.process_count()
        self.index = jax.process_index()

    def replicate(self, tree):
        """A copy of `tree` replicated over the global mesh (identical on every host)."""
        sharding = NamedSharding(self.mesh, PartitionSpec())

        def put(x):
            x = np.asarray(x.addressable_data(0) if isinstance(x, jax.Array) else x)
            return jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])

        return jax.tree.map(put, tree)

    def local(self, tree):
        """This host's copy of replicated global arrays (the rollout side uses them)."""
        if self.count == 1:
            return tree
        return jax.tree.map(lambda x: jnp.asarray(np.asarray(x.addressable_data(0))), tree)

    def agree(self, *values: int) -> list[int]:
        """The maximum of each value over all hosts (so every host pads alike)."""
        if self.count == 1:
            return list(values)
        from jax.experimental import multihost_utils

        got = multihost_utils.process_allgather(np.asarray(values, np.int64))
        return [int(v) for v in np.max(got.reshape(self.count, -1), axis=0)]

    def allgather(self, x: np.ndarray) -> np.ndarray:
        """Every host's `x`, concatenated host by host."""
        if self.count == 1:
            return x
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))

    def gather_commit(self, logs, paths, turns, returns):
        """Every host's op logs / paths / returns, host by host, and this host's offset
        into them: the `gather` that `ActiveMem.commit` takes for a multi-host commit."""
        (max_turns,) = self.agree(paths.shape[1])
        paths = jnp.pad(paths, ((0, 0), (0, max_turns - paths.shape[1]), (0, 0)), constant_values=-1)
        gather = lambda x: jnp.asarray(self.allgather(np.asarray(x)))  # noqa: E731
        return (jax.tree.map(gather, logs), gather(paths), gather(turns), gather(returns),
                self.index * len(returns))

    def shard(self, batch: dict, skip=()) -> dict:
        """Rows -> global arrays, split over the mesh's data and fsdp axes (each host
        contributes its own rows when there are several); keys in `skip` are dropped."""
        axes = tuple(a for a in ("data", "fsdp") if self.mesh.shape[a] > 1)
        size = int(np.prod([self.mesh.shape[a] for a in axes])) if axes else 1
        rows = NamedSharding(self.mesh, PartitionSpec(axes or None))

        def put(x):
            if self.count > 1:
                return jax.make_array_from_process_local_data(rows, x)
            spec = rows if x.shape[0] % size == 0 else NamedSharding(self.mesh, PartitionSpec())
            return jax.device_put(x, spec)

        return {k: put(v) for k, v in batch.items() if k not in skip}


__all__ = ["Hosts"]
