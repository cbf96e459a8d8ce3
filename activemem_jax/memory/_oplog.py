"""Per-rollout op logs and their commit to the persistent tree (paper 8.1).

A rollout retrieves from an *overlay*: a copy of the frozen snapshot into whose free
slots its own inserts go (and onto which its updates apply), so it sees its pending
nodes. Every op it applies is also appended to a fixed-size `OpLog` whose targets are
snapshot slots (>= 0) or references to an earlier insert of the same log (-(j + 1)).
`commit` replays a batch of logs, rollout after rollout, onto the persistent tree and
resolves each reference to the slot that insert actually received there.
"""

from __future__ import annotations

import functools

import chex
import flax.struct
import jax
import jax.numpy as jnp

from activemem_jax.memory._ops import insert_node, update_node
from activemem_jax.memory._state import Tree, check_tree

OP_NONE, OP_INSERT, OP_UPDATE = 0, 1, 2


@flax.struct.dataclass
class OpLog:
    op: jax.Array      # [L] int32: OP_NONE / OP_INSERT / OP_UPDATE
    target: jax.Array  # [L] int32: snapshot slot (>= 0) or -(j + 1) = the node entry j inserted
    vec: jax.Array     # [L, d] float32: insert embedding or update target
    alpha: jax.Array   # [L, d] float32: update gate (zeros for inserts)
    slot: jax.Array    # [L] int32: overlay slot the entry inserted / updated
    length: jax.Array  # [] int32: entries used
    turn: jax.Array = None  # [L] int32: the rollout turn that wrote the entry (-1 unknown)
    prev: jax.Array = None  # [L, d] float32: an updated node's embedding before the update


def new_log(max_ops: int, dim: int) -> OpLog:
    return OpLog(op=jnp.zeros((max_ops,), jnp.int32), target=jnp.zeros((max_ops,), jnp.int32),
                 vec=jnp.zeros((max_ops, dim), jnp.float32),
                 alpha=jnp.zeros((max_ops, dim), jnp.float32),
                 slot=jnp.full((max_ops,), -1, jnp.int32), length=jnp.int32(0),
                 turn=jnp.full((max_ops,), -1, jnp.int32), prev=jnp.zeros((max_ops, dim), jnp.float32))


def _encode(log: OpLog, overlay_slot):
    """Overlay slot -> log target: -(j + 1) if entry j inserted it, else the slot itself."""
    mine = (log.op == OP_INSERT) & (log.slot == overlay_slot) & (jnp.arange(log.op.shape[0]) < log.length)
    return jnp.where(jnp.any(mine), -(jnp.argmax(mine) + 1), overlay_slot).astype(jnp.int32)


def _append(log: OpLog, do, op, target, vec, alpha, slot, turn, prev) -> OpLog:
    i = jnp.minimum(log.length, log.op.shape[0] - 1)

    def put(arr, value):
        return arr.at[i].set(jnp.where(do, value, arr[i]))

    return log.replace(op=put(log.op, op), target=put(log.target, target),
                       vec=put(log.vec, vec), alpha=put(log.alpha, alpha),
                       slot=put(log.slot, slot), length=log.length + do.astype(jnp.int32),
                       turn=put(log.turn, turn), prev=put(log.prev, prev))


def log_insert(overlay: Tree, log: OpLog, parent, emb, turn=-1):
    """Insert into the overlay and log it. Returns (overlay, log, overlay slot or -1);
    refused when the overlay refuses or the log is full."""
    room = log.length < log.op.shape[0]
    parent = jnp.asarray(parent, jnp.int32)
    overlay, slot = insert_node(overlay, jnp.where(room, parent, -1), emb)  # -1: refused
    do = slot >= 0
    log = _append(log, do, OP_INSERT, _encode(log, parent),
                  jnp.asarray(emb, jnp.float32), jnp.zeros_like(log.vec[0]), slot,
                  jnp.asarray(turn, jnp.int32), jnp.zeros_like(log.vec[0]))
    return overlay, log, slot


def log_update(overlay: Tree, log: OpLog, idx, target, alpha, turn=-1):
    """Update an overlay node and log it (skipped for invalid nodes or a full log)."""
    idx = jnp.asarray(idx, jnp.int32)
    i = jnp.clip(idx, 0, overlay.capacity - 1)
    do = (log.length < log.op.shape[0]) & (idx > 0) & (idx < overlay.capacity) & overlay.valid[i]
    prev = overlay.emb[i]
    overlay = update_node(overlay, jnp.where(do, idx, -1), target, alpha)
    alpha_vec = jnp.broadcast_to(jnp.asarray(alpha, jnp.float32), log.vec.shape[1:])
    log = _append(log, do, OP_UPDATE, _encode(log, idx), jnp.asarray(target, jnp.float32),
                  alpha_vec, idx, jnp.asarray(turn, jnp.int32), prev)
    return overlay, log


def last_writer(log: OpLog, nodes):
    """For overlay slots `nodes` [D] (-1 pad): the index of the log's latest entry that
    inserted or updated each one, or -1 (a node of the frozen snapshot no entry touched)."""
    entries = jnp.arange(log.op.shape[0])
    live = (entries < log.length) & (log.op != OP_NONE)
    hit = live[None, :] & (log.slot[None, :] == nodes[:, None]) & (nodes[:, None] >= 0)
    latest = jnp.max(jnp.where(hit, entries[None, :], -1), axis=-1)
    return latest.astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("return_slots",))  # one compile per shape outside a jit
def commit(tree: Tree, logs: OpLog, return_slots: bool = False):
    """Replay logs [R, L] (or one log [L]) onto the persistent tree, rollout by rollout,
    in one `lax.scan`. With return_slots, also the slot each entry's node got ([R, L],
    -1 where refused or not an insert)."""
    check_tree(tree, "commit")
    chex.assert_rank(logs.op, {1, 2}, custom_message="commit: logs.op must be [L] or [R, L]")
    chex.assert_equal_shape_prefix([logs.op, logs.target, logs.slot, logs.vec, logs.alpha], logs.op.ndim,
                                   custom_message="commit: the log's fields must share their [R, L] entries")
    chex.assert_axis_dimension(logs.vec, -1, tree.dim,
                               custom_message=f"commit: log vectors must be [.., d={tree.dim}], the tree's dim")
    single = logs.op.ndim == 1
    if single:
        logs = jax.tree.map(lambda x: x[None], logs)
    r, l = logs.op.shape
    flat = jax.tree.map(lambda x: x.reshape((r * l,) + x.shape[2:]),
                        logs.replace(length=jnp.zeros((r, l), jnp.int32)))
    rollout = jnp.repeat(jnp.arange(r), l)
    entry = jnp.tile(jnp.arange(l), r)
    live = entry < logs.length[rollout]

    def step(carry, xs):
        t, assigned = carry
        item, ro, en, is_live = xs
        ref = jnp.clip(-item.target - 1, 0, l - 1)
        node = jnp.where(item.target >= 0, item.target, assigned[ro, ref])
        active = is_live & (node >= 0)
        do_ins = active & (item.op == OP_INSERT)
        do_upd = active & (item.op == OP_UPDATE)
        t, slot = insert_node(t, jnp.where(do_ins, node, -1), item.vec)  # -1: no-op
        t = update_node(t, jnp.where(do_upd, node, -1), item.vec, item.alpha)
        assigned = assigned.at[ro, en].set(jnp.where(do_ins, slot, -1))
        return (t, assigned), None

    (tree, assigned), _ = jax.lax.scan(step, (tree, jnp.full((r, l), -1, jnp.int32)),
                                       (flat, rollout, entry, live))
    if not return_slots:
        return tree
    return tree, (assigned[0] if single else assigned)


def resolve_slots(log: OpLog, assigned, overlay_nodes):
    """Map overlay slots (e.g. a path's nodes) to persistent slots after `commit`:
    a node this log inserted gets the slot `assigned` to it; others keep their slot."""
    nodes = jnp.asarray(overlay_nodes, jnp.int32)
    live = (log.op == OP_INSERT) & (jnp.arange(log.op.shape[0]) < log.length)
    hit = live[None, :] & (log.slot[None, :] == nodes.reshape(-1)[:, None])
    mapped = jnp.where(jnp.any(hit, axis=-1), assigned[jnp.argmax(hit, axis=-1)], nodes.reshape(-1))
    return jnp.where(nodes.reshape(-1) >= 0, mapped, nodes.reshape(-1)).reshape(nodes.shape)
