"""Optional LoRA on the backbone's attention projections (paper 8.2; off by default).

    lora = init_lora(model.state, rank=8, targets=("q_proj", "v_proj"), key=key)
    state = merge_lora(model.state, lora, alpha=16.0)   # W + (alpha / r) (A @ B)^T, a new state

The adapters are a plain pytree {path: {"a": [in, r], "b": [r, out]}} trained beside the
controller (kernels are stored [out, in], hence the transpose); `b` starts at zero, so the merged backbone equals the frozen one until the
first update. The frozen weights are never modified: `merge_lora` returns new arrays
(gradients flow into A and B only), and the engine decodes with the merged state through
`Engine.set_weights`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


def _kernels(state, targets):
    for path, var in nnx.to_flat_state(state):
        names = [str(p) for p in path]
        if len(names) >= 2 and names[-1] == "kernel" and names[-2] in targets:
            yield ".".join(names), path, var


def init_lora(state, rank: int, targets=("q_proj", "v_proj"), key=None) -> dict:
    if rank < 1:
        raise ValueError(f"lora rank={rank}: use >= 1 (or turn LoRA off)")
    bad = [t for t in targets if t not in TARGETS]
    if bad:
        raise ValueError(f"lora targets {bad}: choose from {TARGETS}")
    key = jax.random.PRNGKey(0) if key is None else key
    out = {}
    for i, (name, _, var) in enumerate(_kernels(state, targets)):
        if var[...].dtype == jnp.int8:
            raise ValueError(f"{name} is int8: LoRA needs float backbone weights; load the model "
                             "without quant='int8' to train adapters")
        d_out, d_in = var[...].shape
        a = jax.random.normal(jax.random.fold_in(key, i), (d_in, rank), jnp.float32) / jnp.sqrt(d_in)
        out[name] = {"a": a, "b": jnp.zeros((rank, d_out), jnp.float32)}
    if not out:
        raise ValueError(f"no attention kernels named {targets} in the backbone state")
    return out


def merge_lora(state, lora: dict, alpha: float = 16.0):
    """A new backbone state with W + (alpha / rank) (A @ B)^T for every adapted kernel."""
    if not lora:
        return state
    leaves = []
    for path, var in nnx.to_flat_state(state):
        name = ".".join(str(p) for p in path)
        if name in lora:
            a, b = lora[name]["a"], lora[name]["b"]
            w = var[...]
            delta = (alpha / a.shape[1]) * (a @ b).T
            var = var.replace(value=(w.astype(jnp.float32) + delta).astype(w.dtype))
        leaves.append((path, var))
    return nnx.from_flat_state(leaves)


__all__ = ["TARGETS", "init_lora", "merge_lora"]
