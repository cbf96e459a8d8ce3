"""The jitted training step: losses over a row batch, optax update, NaN/inf guard.

Trainable parameters are one pytree {"controller": nnx.State, "lora": {...} or {}}; the
frozen backbone state is an argument, never differentiated nor updated.

    opt = build.optimizer_from(cfg)           # AdamW from the run config's optim section
    step = TrainStep(model.graphdef, controller_graphdef, build.loss_config(cfg), opt)
    params, opt_state, metrics = step(params, opt_state, backbone_state, batch)

Row batches come from `activemem.collate` plus "adv" [R] (the episode's group advantage),
"tree_adv" [R] (the per-step hierarchical one) and "row_valid" [R]. Losses read the
compact response view (resp_pos / resp_mask [R, A]); "old_logp" and "ref_logp" are [R, A].
Rollouts that sampled the tree search also carry its record ("search_q", "search_emb",
"search_ok", "search_pick"): GRPO then credits the path's log-probability, recomputed
under the current key head, with the row's token advantage "adv" (`search_log_probs`).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import optax
from flax import nnx

from activemem_jax.activemem.controller import masked_log_probs
from activemem_jax.activemem.inject import policy_logprobs
from activemem_jax.activemem.lora import merge_lora
from activemem_jax.activemem.recompute import recompute_p_bar
from activemem_jax.build import LossConfig  # the loss config and the optimizer are built in build.py
from activemem_jax.memory import tree as hlmt
from activemem_jax.rl import grpo


def _forward(model_gd, ctrl_gd, params, backbone_state, batch, cfg: LossConfig, entropy: bool, split=None):
    if params["lora"]:  # LoRA makes every column depend on the trained parameters
        split = None
    state = merge_lora(backbone_state, params["lora"], cfg.lora_alpha) if params["lora"] else backbone_state
    model = nnx.merge(model_gd, state)
    ctrl = nnx.merge(ctrl_gd, params["controller"])
    batch = {**batch, "p_bar": recompute_p_bar(ctrl, batch, cfg.path_pool)}  # gradient through the episode's own writes
    if cfg.tree_only:
        zeros = jnp.zeros(batch["resp_pos"].shape, jnp.float32)
        out = (zeros, zeros) if entropy else zeros
    else:
        out = policy_logprobs(model, ctrl, batch, cfg.chunk, with_entropy=entropy, split=split)
    tree_lp = _tree_log_probs(ctrl, batch, cfg)
    chosen = jnp.take_along_axis(tree_lp, batch["tree_action"][:, None], axis=-1)[:, 0]
    return out, chosen, tree_lp


def _tree_log_probs(ctrl, batch, cfg: LossConfig):
    """log pi_tree [R, 3] over the allowed actions (batch["p_bar"] recomputed), at GRPO's
    sampling temperature."""
    logits = ctrl.tree(ctrl.shared(batch["h"], batch["p_bar"]))
    if cfg.algo == "grpo" and cfg.tree_temperature != 1.0:
        logits = logits / cfg.tree_temperature
    return masked_log_probs(logits, batch["tree_mask"] | (jnp.arange(3) == 0))


def key_loss(controller, q, ids, tau: float = 0.1):
    """The retrieval key head's loss (supervised contrastive, SFT): observations with the
    same key id (the environment's name for what they are about, -1 none) should be each
    other's nearest keys. q [K, d] the observations' query vectors, ids [K] int. Each row
    with a partner scores -mean over its partners of log softmax_j(k_i . k_j / tau), j over
    every other row with an id; rows without a partner only serve as others' negatives.
    Returns (loss, share of those rows whose nearest other key is a partner)."""
    chex.assert_rank([q, ids], [2, 1], custom_message="key_loss: q must be [K, d], ids [K]")
    chex.assert_equal_shape_prefix([q, ids], 1, custom_message="key_loss: one id per query row")
    k = controller.key_of(q)
    n = ids.shape[0]
    real = ids >= 0
    eye = jnp.eye(n, dtype=bool)
    logits = jnp.where(real[None, :] & ~eye, (k @ k.T) / tau, -1e30)
    logp = logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True)
    pos = (ids[:, None] == ids[None, :]) & real[:, None] & ~eye
    has = jnp.any(pos, axis=-1)
    per_row = -jnp.sum(jnp.where(pos, logp, 0.0), axis=-1) / jnp.maximum(jnp.sum(pos, axis=-1), 1)
    count = jnp.maximum(jnp.sum(has), 1)
    hit = jnp.take_along_axis(pos, jnp.argmax(logits, axis=-1)[:, None], axis=-1)[:, 0]
    return jnp.sum(jnp.where(has, per_row, 0.0)) / count, jnp.sum(hit & has) / count


def search_log_probs(controller, batch: dict, cfg: LossConfig):
    """(log pi(path) [R] of the rollout's sampled searches under `controller`'s key head,
    searched [R] rows where the search had a child to choose). The candidates' embeddings
    are constants (as stored when searched); the gradient reaches the key head."""
    query_key = controller.key_of(batch["search_q"])
    cand_keys = controller.key_of(batch["search_emb"])
    logp = hlmt.path_log_prob(query_key, cand_keys, batch["search_ok"], batch["search_pick"], cfg.tau_stop,
                              cfg.closer, cfg.search_temperature)
    return logp, searched_rows(batch)


def searched_rows(batch: dict):
    """[R] bool: valid rows whose recorded search chose among at least one child."""
    reached = batch["search_ok"] & (batch["search_pick"] >= 0)[..., None]
    return jnp.any(reached, axis=(-1, -2)) & batch["row_valid"]


def normalizers(batch, agg: str):
    """(token-term count, tree-term count, search-term count) of a row batch: what each
    loss term divides by, so micro-batch losses can be weighted back into the mini-batch's
    exact loss."""
    mask = batch["resp_mask"] & batch["row_valid"][:, None]
    if agg == "token-mean":
        tokens = jnp.sum(mask)
    elif agg == "seq-mean-token-mean":
        tokens = jnp.sum(jnp.any(mask, axis=-1))
    else:  # seq-mean-token-sum-norm: a mean over all rows
        tokens = mask.shape[0]
    chooses = jnp.sum((jnp.sum(batch["tree_mask"], axis=-1) > 1) & batch["row_valid"])
    searches = jnp.sum(searched_rows(batch)) if "search_pick" in batch else 0
    return jnp.asarray(tokens, jnp.float32), chooses.astype(jnp.float32), jnp.asarray(searches, jnp.float32)


def loss_fn(params, backbone_state, batch, model_gd, ctrl_gd, cfg: LossConfig, weights=(1.0, 1.0, 1.0),
            split=None):
    """The loss of one row batch; weights scale the token, tree and search terms (a
    micro-batch's share of its mini-batch's normalizers). split: see
    `activemem.inject.policy_forward`."""
    (logp, entropy), tree_logp, tree_lp = _forward(model_gd, ctrl_gd, params, backbone_state, batch,
                                                   cfg, entropy=True, split=split)
    mask = batch["resp_mask"] & batch["row_valid"][:, None]
    chooses = (jnp.sum(batch["tree_mask"], axis=-1) > 1) & batch["row_valid"]
    m = mask.astype(jnp.float32)
    metrics = {"entropy": jnp.sum(entropy * m) / jnp.maximum(jnp.sum(m), 1.0)}
    if cfg.algo == "grpo":
        # without recorded old log-probs (one update per rollout): the current ones, detached
        old = batch["old_logp"] if "old_logp" in batch else jax.lax.stop_gradient(logp)
        token_loss, pm = grpo.policy_loss(logp, old, batch["adv"], mask, cfg.clip_eps,
                                          cfg.clip_eps_high, cfg.agg, batch.get("ref_logp"), cfg.beta)
        tree_term = grpo.tree_loss(tree_logp, batch["tree_adv"], chooses)
        if cfg.tree_kl and "ref_tree_lp" in batch:  # train.tree_kl: stay near the head GRPO started from
            kl = grpo.tree_kl(tree_lp, batch["ref_tree_lp"], chooses)
            tree_term = tree_term + cfg.tree_kl * kl
            metrics["tree_kl"] = kl
        metrics.update(pm)
    elif cfg.algo == "sft":  # cross-entropy on expert tokens; tree head imitates the rule
        token_loss = grpo.aggregate(-logp, mask, cfg.agg)
        target_lp = jnp.take_along_axis(tree_lp, batch["tree_target"][:, None], axis=-1)[:, 0]
        if cfg.rule_share:  # train.sft_head="mix", a soft target: (1 - w) on the acted write, w on the rule's
            rule_lp = jnp.take_along_axis(tree_lp, batch["tree_target_rule"][:, None], axis=-1)[:, 0]
            target_lp = (1.0 - cfg.rule_share) * target_lp + cfg.rule_share * rule_lp
        tree_term = -jnp.sum(target_lp * chooses) / jnp.maximum(jnp.sum(chooses), 1.0)
        metrics["tree_acc"] = jnp.sum((jnp.argmax(tree_lp, -1) == batch["tree_target"]) * chooses) / \
            jnp.maximum(jnp.sum(chooses), 1.0)
    else:
        raise ValueError(f"algo={cfg.algo!r}: grpo or sft")
    if cfg.tree_only:
        token_loss = jnp.float32(0.0)
    loss = token_loss + cfg.tree_coef * tree_term
    out = weights[0] * token_loss + cfg.tree_coef * weights[1] * tree_term
    if cfg.algo == "grpo" and "search_pick" in batch and cfg.search_coef:  # REINFORCE on the sampled search
        search_lp, searched = search_log_probs(nnx.merge(ctrl_gd, params["controller"]), batch, cfg)
        count = jnp.maximum(jnp.sum(searched), 1.0)
        search_term = -jnp.sum(jnp.where(searched, search_lp * batch["adv"], 0.0)) / count
        loss, out = loss + cfg.search_coef * search_term, out + cfg.search_coef * weights[2] * search_term
        metrics.update(search_loss=search_term,
                       search_logp=jnp.sum(jnp.where(searched, search_lp, 0.0)) / count)
    if "key_q" in batch and cfg.key_coef:  # the step's observations and their keys (one chunk a step)
        ctrl = nnx.merge(ctrl_gd, params["controller"])
        k_loss, k_acc = key_loss(ctrl, batch["key_q"], batch["key_id"], cfg.key_tau)
        loss, out = loss + cfg.key_coef * k_loss, out + cfg.key_coef * k_loss
        metrics.update(key_loss=k_loss, key_acc=k_acc)
    metrics.update(token_loss=token_loss, tree_loss=tree_term, loss=loss)
    return out, metrics


HEADS = {"shared": ("mlp_in", "mlp_out"), "latent": ("latent",), "tree": ("tree",), "insert": ("insert",),
         "gate": ("gate",), "update": ("update",), "key": ("key",)}


def head_grad_norms(grads) -> dict:
    """grad_<head> norms of the controller's parts (shared MLP, latent, tree, insert, gate,
    update) and of LoRA: which heads the loss reaches."""
    ctrl = grads["controller"]
    out = {}
    for head, names in HEADS.items():
        parts = [ctrl[n] for n in names if n in ctrl and ctrl[n] is not None]
        if parts or head != "key":  # the key head is reported only where it exists
            out[f"grad_{head}"] = optax.tree.norm(parts) if parts else jnp.float32(0.0)
    if grads["lora"]:
        out["grad_lora"] = optax.tree.norm(grads["lora"])
    return out


def scale_head(updates, head: str, factor: float):
    """`updates` with the controller head `head`'s leaves (HEADS) multiplied by `factor`."""
    names = HEADS[head]

    def one(path, u):
        keys = [getattr(k, "key", None) for k in path]
        hit = len(keys) > 1 and keys[0] == "controller" and keys[1] in names
        return u * jnp.asarray(factor, u.dtype) if hit else u
    return jax.tree_util.tree_map_with_path(one, updates)


class TrainStep:
    """Jitted (params, opt_state, backbone_state, batch) -> (params, opt_state, metrics).
    A non-finite loss or gradient leaves params and optimizer state untouched and sets
    metrics["skipped"] = 1. A batch may carry "split" (shared, grad_from) (rl/rows.py):
    the columns before grad_from run forward only (compiled once per split).
    update_scale multiplies the optimizer's updates: GRPO's own learning rate
    (optim.lr_grpo / optim.lr_controller) on the optimizer state SFT warmed, so the
    state keeps one shape across phases and checkpoints. A call may give its own `scale`
    (a traced scalar: a per-step schedule compiles once). A GRPO step multiplies the tree
    head's updates by cfg.tree_rate on top (optim.lr_tree_grpo)."""

    def __init__(self, model_gd, ctrl_gd, cfg: LossConfig, optimizer: optax.GradientTransformation,
                 update_scale: float = 1.0):
        self.model_gd, self.ctrl_gd, self.cfg, self.optimizer = model_gd, ctrl_gd, cfg, optimizer
        self.update_scale = float(update_scale)
        self._step = jax.jit(self._fn, donate_argnums=(0, 1), static_argnames=("split",))
        self._logp = jax.jit(self._logp_fn, static_argnames=("split",))
        self._tree_lp = jax.jit(self._tree_lp_fn)

    def _grads(self, params, backbone_state, batch, split=None):
        """(loss, metrics, grads) of the mini-batch; with micro_batch_rows, a `lax.scan`
        over micro-batches (memory of one micro-batch) whose weighted sum is exact."""
        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
        rows = batch["tokens"].shape[0]
        micro = self.cfg.micro_batch_rows
        if micro and micro < rows and "key_q" in batch:  # the key loss is not per row: once, outside
            keys = {k: batch.pop(k) for k in ("key_q", "key_id")}
            loss, metrics, grads = self._grads(params, backbone_state, batch, split)

            def k_loss(p):
                out = key_loss(nnx.merge(self.ctrl_gd, p["controller"]), keys["key_q"], keys["key_id"],
                               self.cfg.key_tau)
                return self.cfg.key_coef * out[0], out
            (kl, (raw, acc)), kg = jax.value_and_grad(k_loss, has_aux=True)(params)
            metrics = {**metrics, "key_loss": raw, "key_acc": acc, "loss": metrics["loss"] + kl}
            return loss + kl, metrics, jax.tree.map(jnp.add, grads, kg)
        if not micro or micro >= rows:
            (_, metrics), grads = grad_fn(params, backbone_state, batch, self.model_gd, self.ctrl_gd, self.cfg,
                                          split=split)
            return metrics["loss"], metrics, grads
        if rows % micro:
            raise ValueError(f"{rows} rows per mini-batch is not a multiple of micro_batch_rows={micro}")
        micro_batches = jax.tree.map(lambda x: x.reshape((rows // micro, micro) + x.shape[1:]), batch)
        total_tok, total_tree, total_search = normalizers(batch, self.cfg.agg)

        def one(acc, mb):
            tok, tree, search = normalizers(mb, self.cfg.agg)
            w = (tok / jnp.maximum(total_tok, 1.0), tree / jnp.maximum(total_tree, 1.0),
                 search / jnp.maximum(total_search, 1.0))
            (loss, metrics), g = grad_fn(params, backbone_state, mb, self.model_gd, self.ctrl_gd, self.cfg, w,
                                         split)
            share = {"token_loss": w[0], "tree_loss": w[1], "tree_acc": w[1], "tree_kl": w[1], "search_loss": w[2],
                     "search_logp": w[2], "loss": None}
            metrics = {k: v * (share.get(k) if share.get(k) is not None else w[0]) for k, v in metrics.items()
                       if k != "loss"}
            metrics["loss"] = loss
            return jax.tree.map(jnp.add, acc, (g, metrics)), None

        first = jax.tree.map(lambda x: x[0], micro_batches)
        zero_metrics = jax.eval_shape(lambda: grad_fn(params, backbone_state, first, self.model_gd, self.ctrl_gd,
                                                      self.cfg, split=split)[0][1])
        init = (jax.tree.map(jnp.zeros_like, params), jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), zero_metrics))
        (grads, metrics), _ = jax.lax.scan(one, init, micro_batches)
        return metrics["loss"], metrics, grads

    def _fn(self, params, opt_state, backbone_state, batch, scale, split=None):
        loss, metrics, grads = self._grads(params, backbone_state, batch, split)
        grad_norm = optax.tree.norm(grads)
        finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)

        def apply(args):
            p, s = args
            updates, s = self.optimizer.update(grads, s, p)
            updates = jax.tree.map(lambda u: u * scale.astype(u.dtype), updates)
            if self.cfg.algo == "grpo" and self.cfg.tree_rate != 1.0:  # optim.lr_tree_grpo
                updates = scale_head(updates, "tree", self.cfg.tree_rate)
            return optax.apply_updates(p, updates), s

        params, opt_state = jax.lax.cond(finite, apply, lambda a: a, (params, opt_state))
        metrics.update(grad_norm=grad_norm, skipped=(~finite).astype(jnp.float32), **head_grad_norms(grads))
        return params, opt_state, metrics

    def __call__(self, params, opt_state, backbone_state, batch, scale: float | None = None):
        batch = dict(batch)
        split = batch.pop("split", None)
        scale = jnp.float32(self.update_scale if scale is None else scale)
        return self._step(params, opt_state, backbone_state, batch, scale, split=tuple(split) if split else None)

    def _logp_fn(self, params, backbone_state, batch, split=None):
        logp, _, _ = _forward(self.model_gd, self.ctrl_gd, params, backbone_state, batch, self.cfg,
                              entropy=False, split=split)
        return logp

    def _tree_lp_fn(self, params, batch):
        ctrl = nnx.merge(self.ctrl_gd, params["controller"])
        batch = {**batch, "p_bar": recompute_p_bar(ctrl, batch, self.cfg.path_pool)}
        return _tree_log_probs(ctrl, batch, self.cfg)

    def tree_logprobs(self, params, batch):
        """The tree head's log-probs [R, 3] under `params` (the reference of train.tree_kl),
        no gradient and no backbone pass."""
        batch = {k: v for k, v in batch.items() if k != "split"}
        return self._tree_lp(params, batch)

    def logprobs(self, params, backbone_state, batch):
        """Token log-probs [R, T] under `params` (old policy / reference), no gradient."""
        batch = dict(batch)
        split = batch.pop("split", None)
        return self._logp(params, backbone_state, batch, split=tuple(split) if split else None)


__all__ = ["TrainStep", "head_grad_norms", "key_loss", "loss_fn", "scale_head", "search_log_probs"]
