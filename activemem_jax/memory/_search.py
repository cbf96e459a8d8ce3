"""A sampled tree search: the greedy traversal (`_ops.traverse`) as a policy, so GRPO can
credit the search with the answer it led to (docs/design_memory.md#a-learned-retrieval-key-key_headtrue-trainkey_coef).

At every level the search chooses among the node's children and "stop": logits are the
children's cosines to the query and, for stop, the threshold a greedy step must beat
(tau_stop; with `closer` also the cosine of the node itself), all divided by a
temperature. Its argmax is the greedy traversal (up to exact ties); sampling it explores
other children. The rollout records each level's candidates and choice; the loss
recomputes the path's log-probability from them under the current key head
(`path_log_prob`), with the same `level_logits`.

    path, cand, pick, logp = sample_traverse(keyed_tree, key_of_query, rng, tau_stop, closer, T)
    logp = path_log_prob(key_of_query, key_of(cand_emb), cand >= 0, pick, tau_stop, closer, T)
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from activemem_jax.memory._state import Path, Tree, check_tree, check_vector, normalize


def level_logits(sims, ok, here, tau_stop: float, closer: bool, temperature: float):
    """[..., C + 1] logits of one level: the children's cosines sims [..., C] (ok [..., C]
    marks real children) then stop, scored tau_stop (with `closer`, max(tau_stop, here):
    here [...] the cosine of the node the level starts from, -inf at the root)."""
    stop = jnp.full(sims.shape[:-1], tau_stop, jnp.float32)
    if closer:
        stop = jnp.maximum(stop, here)
    logits = jnp.concatenate([jnp.where(ok, sims, -jnp.inf), stop[..., None]], axis=-1)
    return logits / temperature


@functools.partial(jax.jit, static_argnames=("closer",))  # one compile per shape outside a jit
def sample_traverse(tree: Tree, query, rng, tau_stop: float, closer: bool, temperature: float):
    """(Path, cand [max_depth, C] the children slots each level chose among (-1 pad and for
    levels not reached), pick [max_depth] the choice: a column of cand, C for stop, -1 for
    levels not reached, logp [] the drawn path's log-probability, summed as it was drawn).
    A level without children is recorded with only stop to choose (log-probability 0).
    `tree`'s embeddings and `query` are what the search compares (keys)."""
    check_tree(tree, "sample_traverse")
    check_vector(query, tree.dim, "query", "sample_traverse")
    unit, _ = normalize(query)
    depth, width = tree.max_depth, tree.children.shape[1]

    def level(i, carry):
        cur, here, active, length, nodes, sims_out, cand, pick, logp = carry
        row = tree.children[cur]
        ok = (row >= 0) & active
        sims = tree.emb[jnp.maximum(row, 0)] @ unit
        logits = level_logits(sims, ok, here, tau_stop, closer, temperature)
        c = jax.random.categorical(jax.random.fold_in(rng, i), logits)
        logp = logp + jnp.where(active, jax.nn.log_softmax(logits)[c], 0.0)
        take = active & (c < width)
        col = jnp.minimum(c, width - 1)
        node = row[col]
        cand = cand.at[i].set(jnp.where(ok, row, -1))
        pick = pick.at[i].set(jnp.where(active, c, -1))
        nodes = nodes.at[i].set(jnp.where(take, node, -1))
        sims_out = sims_out.at[i].set(jnp.where(take, sims[col], 0.0))
        return (jnp.where(take, node, cur), jnp.where(take, sims[col], here), take,
                length + take.astype(jnp.int32), nodes, sims_out, cand, pick, logp)

    init = (jnp.int32(0), jnp.float32(-jnp.inf), jnp.bool_(True), jnp.int32(0),
            jnp.full((depth,), -1, jnp.int32), jnp.zeros((depth,), jnp.float32),
            jnp.full((depth, width), -1, jnp.int32), jnp.full((depth,), -1, jnp.int32), jnp.float32(0.0))
    _, _, _, length, nodes, sims, cand, pick, logp = jax.lax.fori_loop(0, depth, level, init)
    return Path(nodes=nodes, length=length, sims=sims), cand, pick, logp


@functools.partial(jax.jit, static_argnames=("closer",))
def path_log_prob(query_key, cand_keys, ok, pick, tau_stop: float, closer: bool, temperature: float):
    """log pi(path) [...] of recorded choices: query_key [..., d] and cand_keys [..., D, C, d]
    (unit keys), ok [..., D, C], pick [..., D] as `sample_traverse` records them (a
    level's `here` is the cosine of the child picked one level up). Differentiable in the
    keys."""
    sims = jnp.einsum("...d,...lcd->...lc", query_key, cand_keys)
    width = sims.shape[-1]
    col = jnp.clip(pick, 0, width - 1)
    picked = jnp.take_along_axis(sims, col[..., None], axis=-1)[..., 0]  # [..., D]
    root = jnp.full(picked.shape[:-1] + (1,), -jnp.inf, jnp.float32)
    here = jnp.concatenate([root, picked[..., :-1]], axis=-1)
    logits = level_logits(sims, ok, here, tau_stop, closer, temperature)
    logp = jax.nn.log_softmax(logits, axis=-1)
    chosen = jnp.take_along_axis(logp, jnp.maximum(pick, 0)[..., None], axis=-1)[..., 0]
    return jnp.sum(jnp.where(pick >= 0, chosen, 0.0), axis=-1)


__all__ = ["level_logits", "path_log_prob", "sample_traverse"]
