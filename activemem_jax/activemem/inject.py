"""Latent injection into the frozen backbone's input embeddings
(docs/design_memory.md#latent-injection), and the training forward that recomputes m_t from the
recorded (h_t, p_bar_t) of each turn.

    emb = splice(embeds, latents, latent_pos)      # [B, T, D] <- [B, K, D] at [B, K]
    logp = policy_logprobs(backbone, controller, batch)   # [B, T] log p(token_t | < t)

Gradients reach the controller through the frozen LLM's graph; the backbone weights are
never differentiated (they are not `nnx.Param`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from activemem_jax.models.kv_cache import KVCache
from activemem_jax.models.decoder import positions_from_mask


def splice(embeds, latents, latent_pos):
    """Replace embeds[b, latent_pos[b, k]] by latents[b, k]; positions < 0 are unused."""
    b, t = embeds.shape[:2]
    if latents.shape[1] == 0:
        return embeds
    rows = jnp.arange(b)[:, None]
    pos = jnp.where(latent_pos >= 0, latent_pos, t)  # t: dropped
    return embeds.at[rows, pos].set(latents.astype(embeds.dtype), mode="drop")


def token_logprobs(model, hidden, tokens, chunk: int = 128, with_entropy: bool = False):
    """logp [B, T]: log p(tokens[:, t] | tokens[:, < t]) (0 at t = 0), from the final
    hidden states [B, T, D] in sequence chunks under `jax.checkpoint`, so the [B, T, V]
    logits never exist at once (nor in the backward pass). with_entropy: also the
    entropy [B, T] of each predictive distribution (aligned the same way)."""
    b, t, d = hidden.shape
    targets = tokens[:, 1:]
    h = hidden[:, :-1]
    n = t - 1
    c = min(chunk, max(n, 1))
    pad = (-n) % c
    h = jnp.pad(h, ((0, 0), (0, pad), (0, 0)))
    targets = jnp.pad(targets, ((0, 0), (0, pad)))
    h = h.reshape(b, -1, c, d).swapaxes(0, 1)
    targets = targets.reshape(b, -1, c).swapaxes(0, 1)

    @jax.checkpoint
    def one(args):
        hc, tc = args
        logp = jax.nn.log_softmax(model.lm_logits(hc), axis=-1)
        chosen = jnp.take_along_axis(logp, tc[..., None], axis=-1)[..., 0]
        ent = -jnp.sum(jnp.exp(logp) * logp, axis=-1) if with_entropy else jnp.zeros_like(chosen)
        return chosen, ent

    def unchunk(x):
        x = x.swapaxes(0, 1).reshape(b, -1)[:, :n]
        return jnp.concatenate([jnp.zeros((b, 1), x.dtype), x], axis=1)

    chosen, ent = jax.lax.map(one, (h, targets))
    return (unchunk(chosen), unchunk(ent)) if with_entropy else unchunk(chosen)


def response_logprobs(model, hidden, tokens, positions, chunk: int = 128, with_entropy: bool = False):
    """Like `token_logprobs`, only at `positions` [B, A] (the response tokens; -1 = pad):
    log p(tokens[b, p] | tokens[b, < p]) as [B, A], computing the vocabulary projection
    for those A positions only (responses are a small part of a long prompt)."""
    pos = jnp.maximum(positions, 1)
    h = jnp.take_along_axis(hidden, (pos - 1)[..., None], axis=1)           # [B, A, D]
    targets = jnp.take_along_axis(tokens, pos, axis=1)                      # [B, A]
    # token_logprobs scores token t with hidden t - 1: shift the targets right by one
    padded = jnp.concatenate([h, h[:, :1]], axis=1)
    out = token_logprobs(model, padded, jnp.concatenate([targets[:, :1], targets], axis=1), chunk,
                         with_entropy)
    if with_entropy:
        return out[0][:, 1:], out[1][:, 1:]
    return out[:, 1:]


def policy_forward(model, controller, tokens, attention_mask, latent_pos, h, p_bar, split=None):
    """The backbone over tokens [B, T] with m_t = controller(h, p_bar) spliced in at
    latent_pos [B, K]. Returns (hidden [B, T, D], latents [B, K, D]).

    split = (shared, grad_from), static: columns [0, shared) hold the same tokens in
    every row and are run once, for row 0; columns [shared, grad_from) come before every
    latent and are run forward only, into a KV cache; only columns [grad_from, T) are
    differentiated. hidden then covers those columns alone: [B, T - grad_from, D]. Exact
    for a frozen backbone (no LoRA): nothing before the first latent depends on phi. Each
    chunk's queries sit at the same slots in every row (`query_start`), so an attention
    kernel serves them all (models/attention.py)."""
    latents = controller.latents(controller.shared(h, p_bar))
    if not split or split == (0, 0):
        embeds = splice(model.embed_tokens(tokens), latents, latent_pos)
        _, hidden, _ = model(embeds=embeds, positions=positions_from_mask(attention_mask),
                             attention_mask=attention_mask, return_logits=False)
        return hidden, latents
    shared, start = split
    b, t = tokens.shape
    positions = positions_from_mask(attention_mask)
    mask = attention_mask.astype(bool)
    cache = KVCache.init(model.config, 1 if shared else b, t)
    if shared:  # one row: every row's first `shared` tokens are these
        _, _, cache = model(tokens[:1, :shared], positions=positions[:1, :shared],
                            attention_mask=mask[:1, :shared], cache=cache, return_logits=False)
        cache = cache.repeat_rows(b)
    if start > shared:
        slots = jnp.broadcast_to(jnp.arange(shared, start, dtype=jnp.int32), (b, start - shared))
        _, _, cache = model(tokens[:, shared:start], positions=positions[:, shared:start],
                            attention_mask=mask[:, shared:start], cache=cache, slots=slots, return_logits=False,
                            query_start=shared)
    cache = jax.lax.stop_gradient(cache)
    rel = jnp.where(latent_pos >= 0, latent_pos - start, -1)
    embeds = splice(model.embed_tokens(tokens[:, start:]), latents, rel)
    slots = jnp.broadcast_to(jnp.arange(start, t, dtype=jnp.int32), (b, t - start))
    _, hidden, _ = model(embeds=embeds, positions=positions[:, start:], attention_mask=mask[:, start:],
                         cache=cache, slots=slots, return_logits=False, query_start=start)
    return hidden, latents


def policy_logprobs(model, controller, batch: dict, chunk: int = 128, with_entropy: bool = False,
                    split=None):
    """batch: tokens, attention_mask, latent_pos, h, p_bar (see rollout.collate), and
    optionally resp_pos [B, A]. Returns logp [B, T] of each token given its prefix, under
    the injected prefix, or [B, A] at resp_pos (and the entropies with with_entropy).
    split (see `policy_forward`) needs resp_pos, every response after grad_from."""
    hidden, _ = policy_forward(model, controller, batch["tokens"], batch["attention_mask"],
                               batch["latent_pos"], batch["h"], batch["p_bar"], split)
    if split and split != (0, 0):
        if "resp_pos" not in batch:
            raise ValueError("a split forward scores resp_pos only: the batch has none")
        start = split[1]
        pos = jnp.where(batch["resp_pos"] > start, batch["resp_pos"] - start, -1)
        return response_logprobs(model, hidden, batch["tokens"][:, start:], pos, chunk, with_entropy)
    if "resp_pos" in batch:  # only the response positions: [B, A]
        return response_logprobs(model, hidden, batch["tokens"], batch["resp_pos"], chunk, with_entropy)
    return token_logprobs(model, hidden, batch["tokens"], chunk, with_entropy)


__all__ = ["policy_forward", "policy_logprobs", "response_logprobs", "splice", "token_logprobs"]
