"""One controller step for a batch of episodes: traverse, controller, masked tree action,
tree edit and op log. Pure and jitted (one compile per batch size).

    overlays, logs, out = controller_step(graphdef, params, overlays, logs, h, q, keys, live,
                                          turn, cfg)

`overlays` / `logs` are batched (leading axis E): each episode reads its own copy of the
frozen snapshot plus its pending nodes (docs/design_memory.md#rollout-and-commit). h [E, d] is
the observation's last-token state (the controller's input), q [E, d] its unit query
vector (traversal, and what inserts and updates start from, docs/design_memory.md#tree-writes).
Masks (docs/design_memory.md#tree-action-masks): update needs a non-empty path; insert needs a
free slot, room in the op log, a node the tree accepts (depth, children) and no child of
the leaf already closer than tau_merge to it.

Tree actions come from the head (sampled, or argmax with greedy), or from the threshold
rule (insert when the path is empty, else update the leaf) with `rule` (SFT targets) or
when the head is off (`tree_actions=False`: the static hierarchy ablation,
docs/design_training.md#ablations).
Rows the head did not choose get a noop-only mask, so no loss term trains the head there.

With `search_temperature` > 0 a sampled step samples the search as well (memory/_search.py:
each level draws among the children and stop) and reports each level's candidates (their
stored embeddings), the choices and the path's log-probability, which GRPO's search term
recomputes under the current key head (rl/update.py). Greedy and rule steps search greedily.

For the loss's recomputation of p_bar (docs/design_training.md#gradient-through-memory), every
path node also reports its embedding at retrieval time and, when this episode wrote it,
which turn did and how.
"""

from __future__ import annotations

import dataclasses

import chex
import flax.struct
import jax
import jax.numpy as jnp
from flax import nnx

from activemem_jax.activemem.controller import INSERT, UPDATE, masked_log_probs
from activemem_jax.memory import tree as hlmt


@dataclasses.dataclass(frozen=True)
class StepConfig:
    use_tree: bool = True       # False: w/o HLMT (no retrieval, p_bar = 0, no tree edits)
    tree_actions: bool = True   # False: w/o tree action head (the threshold rule acts)
    tau_stop: float = 0.6
    tau_merge: float = 0.9
    closer: bool = False        # a step down needs a child closer than its parent (policy.descend)
    pool: str = "mean"          # p_bar: the path's mean (paper) | its "leaf" (policy.path_pool)
    greedy: bool = False        # argmax tree actions (evaluation)
    tree_temperature: float = 1.0  # sampled tree actions come from softmax(logits / T) (policy.tree_temperature)
    search_temperature: float = 0.0  # > 0: sampled rollouts sample the search too (memory/_search.py;
                                     # policy.search_temperature); greedy and rule steps search greedily
    rule: bool = False          # the threshold rule instead of the head (SFT targets):
                                # insert when the path is empty, else update the leaf


@flax.struct.dataclass
class StepOutput:
    latents: jax.Array      # [E, K, d]
    p_bar: jax.Array        # [E, d]
    action: jax.Array       # [E] int32 (noop / insert / update)
    logp: jax.Array         # [E] log pi_tree(action) under the mask
    mask: jax.Array         # [E, 3] bool, actions the head chose among (noop only: no choice)
    path: jax.Array         # [E, max_depth] int32 overlay slots (-1 pad)
    path_len: jax.Array     # [E] int32
    slot: jax.Array         # [E] int32 overlay slot inserted / updated (-1 none)
    path_emb: jax.Array     # [E, max_depth, d] the path nodes' embeddings when retrieved
    writer_turn: jax.Array  # [E, max_depth] int32 turn of this episode that last wrote the node (-1)
    writer_op: jax.Array    # [E, max_depth] int32 OP_INSERT / OP_UPDATE of that write (0 none)
    writer_prev: jax.Array  # [E, max_depth, d] the node before that update (zeros for inserts)
    search_emb: jax.Array   # [E, L, C, d] a sampled search's candidates per level, as stored (L = 0: greedy)
    search_ok: jax.Array    # [E, L, C] bool, real candidates
    search_pick: jax.Array  # [E, L] int32 the choice per level (C: stop, -1: level not reached)
    search_logp: jax.Array  # [E] log pi(path) of the sampled search, as drawn (0 greedy)
    rule_action: jax.Array  # [E] int32 the threshold rule's action on this state (whatever acted)


def _leaf(path: hlmt.Path):
    return jnp.where(path.length > 0, path.nodes[jnp.maximum(path.length - 1, 0)], 0)


def _allowed(overlay, log, path, insert_vec, cfg: StepConfig):
    leaf = _leaf(path)
    room = log.length < log.op.shape[0]
    _, slot = hlmt.insert_node(overlay, leaf, insert_vec)
    _, best, has = hlmt.best_child(overlay, leaf, insert_vec)
    insert_ok = room & (slot >= 0) & ~(has & (best > cfg.tau_merge))
    update_ok = room & (path.length > 0)
    return jnp.stack([jnp.bool_(True), insert_ok & cfg.use_tree, update_ok & cfg.use_tree])


def _apply(overlay, log, action, leaf, insert_vec, update_vec, gate, turn):
    overlay, log, slot = hlmt.log_insert(overlay, log, jnp.where(action == INSERT, leaf, -1), insert_vec, turn)
    overlay, log = hlmt.log_update(overlay, log, jnp.where(action == UPDATE, leaf, -1), update_vec, gate, turn)
    return overlay, log, jnp.where(action == UPDATE, leaf, slot)


def _writers(overlay, log, nodes):
    entry = hlmt.last_writer(log, nodes)
    safe = jnp.maximum(entry, 0)
    has = entry >= 0
    emb = jnp.where((nodes >= 0)[:, None], overlay.emb[jnp.maximum(nodes, 0)], 0.0)
    return (emb, jnp.where(has, log.turn[safe], -1), jnp.where(has, log.op[safe], 0),
            jnp.where(has[:, None], log.prev[safe], 0.0))


def controller_step(graphdef, params, overlays, logs, h, q, keys, live, turn, cfg: StepConfig, forced=None,
                    explore=None):
    """h, q [E, d]; keys [E] PRNG keys; live [E] bool (finished episodes change nothing);
    turn: the rollout turn (recorded with each write). forced [E] int32: an expert's
    tree action per episode (-1: none; SFT with the environment's writes), taken where the
    mask allows it; a masked update falls back to an insert (and a masked insert to an
    update), else noop. explore [E] bool: with a sampled search, the episodes that sample
    it this turn (the others search greedily and record nothing; None: all)."""
    chex.assert_rank([h, q, live], [2, 2, 1], custom_message="controller_step: h, q [E, d], live [E]")
    chex.assert_equal_shape([h, q], custom_message="controller_step: h and q")
    chex.assert_equal_shape_prefix([h, keys, live], 1, custom_message="controller_step: one row per episode")
    chex.assert_axis_dimension(overlays.emb, 2, h.shape[1],
                               custom_message="controller_step: the trees' dim must equal the backbone's d")
    controller = nnx.merge(graphdef, params)
    e, d = h.shape
    max_depth = overlays.max_depth
    width = overlays.children.shape[-1]
    sampled = cfg.use_tree and cfg.search_temperature > 0 and not (cfg.greedy or cfg.rule)
    levels = max_depth if sampled else 0
    search_emb = jnp.zeros((e, levels, width, d), jnp.float32)
    search_ok = jnp.zeros((e, levels, width), bool)
    search_pick = jnp.full((e, levels), -1, jnp.int32)
    search_logp = jnp.zeros((e,), jnp.float32)
    if cfg.use_tree:
        # with the key head the search compares keys, key(q) against key(node), while the
        # nodes keep what was written (their values); without it key() is the identity
        search = overlays if controller.key is None else overlays.replace(emb=controller.key_of(overlays.emb))
        query_key = controller.key_of(q)
        if sampled:  # the search as a policy (GRPO credits its choices: rl/update.py)
            rngs = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
            path, cand, search_pick, search_logp = jax.vmap(lambda t, x, r: hlmt.sample_traverse(
                t, x, r, cfg.tau_stop, cfg.closer, cfg.search_temperature))(search, query_key, rngs)
            if explore is not None:  # the others search greedily
                greedy = jax.vmap(lambda t, x: hlmt.traverse(t, x, cfg.tau_stop, cfg.closer))(search, query_key)
                path = jax.tree.map(lambda a, b: jnp.where(explore.reshape((e,) + (1,) * (a.ndim - 1)), a, b),
                                    path, greedy)
                search_pick = jnp.where(explore[:, None], search_pick, -1)
                search_logp = jnp.where(explore, search_logp, 0.0)
                cand = jnp.where(explore[:, None, None], cand, -1)
            search_ok = cand >= 0
            search_emb = jax.vmap(lambda t, c: jnp.where((c >= 0)[..., None], t.emb[jnp.maximum(c, 0)], 0.0))(
                overlays, cand)
        else:
            path = jax.vmap(lambda t, x: hlmt.traverse(t, x, cfg.tau_stop, cfg.closer))(search, query_key)
        p_bar = jax.vmap(hlmt.path_leaf if cfg.pool == "leaf" else hlmt.path_mean)(overlays, path)
    else:
        path = hlmt.Path(nodes=jnp.full((e, max_depth), -1, jnp.int32),
                         length=jnp.zeros((e,), jnp.int32), sims=jnp.zeros((e, max_depth)))
        p_bar = jnp.zeros((e, d), jnp.float32)
    path_emb, w_turn, w_op, w_prev = jax.vmap(_writers)(overlays, logs, path.nodes)
    out = controller(h, p_bar, q)
    mask = jax.vmap(lambda t, lg, p, v: _allowed(t, lg, p, v, cfg))(overlays, logs, path, out.insert_vec)
    logp_all = masked_log_probs(out.tree_logits, mask)
    head = cfg.use_tree and cfg.tree_actions and not cfg.rule
    want = jnp.where(path.length > 0, UPDATE, INSERT)  # the threshold rule, where the mask allows it
    rule_action = jnp.where(jnp.take_along_axis(mask, want[:, None], axis=-1)[:, 0], want, 0)
    if not head:
        action = rule_action
    elif cfg.greedy:
        action = jnp.argmax(logp_all, axis=-1)
    else:
        if cfg.tree_temperature != 1.0:  # exploration: the tempered head samples and is scored
            logp_all = masked_log_probs(out.tree_logits / cfg.tree_temperature, mask)
        action = jax.vmap(jax.random.categorical)(keys, logp_all)
    if forced is not None:
        allowed = lambda a: jnp.take_along_axis(mask, a[:, None], axis=-1)[:, 0]  # noqa: E731
        other = jnp.where(forced == UPDATE, INSERT, UPDATE)
        expert = jnp.where(allowed(jnp.maximum(forced, 0)), forced, jnp.where(allowed(other), other, 0))
        action = jnp.where(forced >= 0, jnp.where(forced == 0, 0, expert), action)
    action = jnp.where(live, action, 0).astype(jnp.int32)
    logp = jnp.take_along_axis(logp_all, action[:, None], axis=-1)[:, 0]
    leaf = jax.vmap(_leaf)(path)
    turns = jnp.full((e,), turn, jnp.int32)
    overlays, logs, slot = jax.vmap(_apply)(overlays, logs, action, leaf, out.insert_vec,
                                            out.update_vec, out.gate, turns)
    # SFT's rule rows keep their mask (the head imitates the rule there); the static
    # ablation's rows get noop-only masks (nothing trains a head that does not act)
    shown = mask if (head or cfg.rule) else mask & (jnp.arange(3) == 0)
    return overlays, logs, StepOutput(
        latents=out.latents, p_bar=p_bar, action=action, logp=jnp.where(live, logp, 0.0),
        mask=shown & live[:, None], path=path.nodes, path_len=path.length,
        slot=jnp.where(action > 0, slot, -1), path_emb=path_emb, writer_turn=w_turn,
        writer_op=w_op, writer_prev=w_prev, search_emb=search_emb, search_ok=search_ok & live[:, None, None],
        search_pick=jnp.where(live[:, None], search_pick, -1), search_logp=jnp.where(live, search_logp, 0.0),
        rule_action=jnp.where(live, rule_action, 0).astype(jnp.int32))


__all__ = ["StepConfig", "StepOutput", "controller_step"]
