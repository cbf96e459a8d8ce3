"""p_bar_t recomputed under the current controller in the training loss
(docs/design_training.md#gradient-through-memory).

    p_bar = recompute_p_bar(controller, batch)    # [R, d], differentiable in phi

A path node of the frozen snapshot is a constant (`path_emb`). A node the same episode
wrote earlier is rebuilt from its last write's recorded inputs: an insert at turn s is
normalize(q_s + W_ins u_s), an update at turn r is normalize((1 - a) e_prev + a (q_r +
W_upd u_r)) with a = sigmoid(W_gate u_r), where u = MLP_shared(h, p_bar) of that turn
with its p_bar held constant (and the node before the update, e_prev, too: one write is
unrolled, not the node's whole history). So W_ins, W_upd, W_gate and the shared MLP get
gradient through every later turn that retrieved what they wrote. With the rollout's own
parameters this equals the p_bar the rollout used (a test checks it).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from activemem_jax.memory import tree as hlmt

EPS = 1e-12


def _unit(x):
    """x / |x| with a finite gradient at 0 (padding rows are all zeros)."""
    return x * jax.lax.rsqrt(jnp.maximum(jnp.sum(x * x, axis=-1, keepdims=True), EPS * EPS))


def recompute_p_bar(controller, batch: dict, pool: str = "mean"):
    """batch: p_bar [R, d] and, from `collate.path_rows`, path_mask [R, D], path_emb,
    writer_op, writer_h, writer_p_bar, writer_q, writer_prev. Without them (or D = 0)
    the recorded p_bar comes back unchanged. pool: "mean" (the paper's path mean) or
    "leaf" (the path's last node), as the rollout pooled (policy.path_pool)."""
    if "path_mask" not in batch or batch["path_mask"].shape[-1] == 0:
        return batch["p_bar"]
    mask = batch["path_mask"]
    r, depth = mask.shape
    d = batch["path_emb"].shape[-1]
    flat = lambda x: x.reshape(r * depth, d)  # noqa: E731
    u = controller.shared(flat(batch["writer_h"]), jax.lax.stop_gradient(flat(batch["writer_p_bar"])))
    q = flat(batch["writer_q"])
    inserted = _unit(controller.insert_vec(u, q))
    alpha = controller.gate_vec(u)
    updated = _unit((1.0 - alpha) * flat(batch["writer_prev"]) + alpha * controller.update_vec(u, q))
    op = batch["writer_op"].reshape(-1, 1)
    emb = jnp.where(op == hlmt.OP_INSERT, inserted,
                    jnp.where(op == hlmt.OP_UPDATE, updated, flat(batch["path_emb"])))
    emb = emb.reshape(r, depth, d) * mask[..., None]
    if pool == "leaf":  # the last node of the path (zeros when empty)
        last = jnp.maximum(jnp.sum(mask, axis=1) - 1, 0)
        return jnp.take_along_axis(emb, last[:, None, None], axis=1)[:, 0]
    return jnp.sum(emb, axis=1) / jnp.maximum(jnp.sum(mask, axis=1), 1)[:, None].astype(jnp.float32)


__all__ = ["recompute_p_bar"]
