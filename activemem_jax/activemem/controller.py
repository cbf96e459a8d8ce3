"""The dual-head memory controller W_phi (paper 3.3, docs/design_memory.md#controller).

    ctrl = Controller(d_model=576, num_latents=4, hidden=512, rngs=nnx.Rngs(0))
    out = ctrl(h, p_bar)     # h, p_bar [B, d] -> ControllerOutput

u = MLP_shared([h_t ; p_bar_t]) (2 layers); the latent head gives m_t [B, K, d], the tree
head logits over (noop, insert, update). The write heads are residuals on the query q_t
of the observation that writes (docs/design_memory.md#tree-writes): a new node is
normalize(q_t + W_ins u), an update moves the leaf towards q_t + W_upd u with the gate
alpha = sigmoid(W_gate u).
W_ins, W_upd and W_gate start at zero: a new node starts as the state that wrote it
(alpha 0.5), and the heads learn what to add. The residuals' norms are capped at
`max_residual` (0.5 by default: a node keeps cos >= 0.89 to the unit query that wrote
it), so what the heads add cannot make a node unfindable by the observations it is
about: without the cap, a few SFT steps grew W_ins u past |q| = 1, every new node looked
alike, inserts were masked as duplicates and no question found its fact.

Decisions where the paper is silent:
- h_t is RMS-normalized and p_bar_t scaled by sqrt(d) before the MLP, so both inputs
  have unit scale whatever the backbone's hidden-state norm.
- The tree head starts at zero (a uniform policy over the allowed actions), and the
  latent head's bias starts at an embedding `latent_init` (the placeholder token's own
  embedding by default) with a small kernel, so an untrained controller barely moves
  the frozen model.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp
from flax import nnx

NOOP, INSERT, UPDATE = 0, 1, 2
TREE_ACTIONS = ("noop", "insert", "update")
ACTIVATIONS = {"gelu": jax.nn.gelu, "silu": jax.nn.silu}


@flax.struct.dataclass
class ControllerOutput:
    u: jax.Array            # [B, hidden]
    latents: jax.Array      # [B, K, d]
    tree_logits: jax.Array  # [B, 3] (unmasked)
    insert_vec: jax.Array   # [B, d] q + W_ins u (normalized when inserted)
    gate: jax.Array         # [B, d] alpha = sigmoid(W_gate u)
    update_vec: jax.Array   # [B, d] q + W_upd u


class Controller(nnx.Module):
    def __init__(self, d_model: int, *, num_latents: int, hidden: int = 512,
                 activation: str = "gelu", latent_init=None, latent_init_std: float = 1e-3,
                 max_residual: float = 0.5, key_head: bool = False, rngs: nnx.Rngs):
        if num_latents not in (0, 1, 2, 4, 8):
            raise ValueError(f"num_latents={num_latents}: use 0, 2, 4 or 8 (1 also works)")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r}: use one of {sorted(ACTIVATIONS)}")
        self.d_model, self.num_latents, self.activation = d_model, num_latents, activation
        self.max_residual = float(max_residual)
        d, k = d_model, num_latents
        self.mlp_in = nnx.Linear(2 * d, hidden, rngs=rngs)
        self.mlp_out = nnx.Linear(hidden, hidden, rngs=rngs)
        if k:
            bias = (jnp.zeros((k * d,), jnp.float32) if latent_init is None
                    else jnp.tile(jnp.asarray(latent_init, jnp.float32).reshape(d), k))
            self.latent = nnx.Linear(hidden, k * d, rngs=rngs,
                                     kernel_init=nnx.initializers.normal(latent_init_std))
            self.latent.bias[...] = bias
        else:
            self.latent = None
        self.tree = nnx.Linear(hidden, 3, rngs=rngs, kernel_init=nnx.initializers.zeros)
        zeros = nnx.initializers.zeros
        self.insert = nnx.Linear(hidden, d, rngs=rngs, kernel_init=zeros)
        self.gate = nnx.Linear(hidden, d, rngs=rngs, kernel_init=zeros)
        self.update = nnx.Linear(hidden, d, rngs=rngs, kernel_init=zeros)
        # the retrieval key head (off by default): the tree search compares normalize(x + W_key x)
        # of the query and of each node, W_key from zero; the nodes themselves are unchanged
        self.key = nnx.Linear(d, d, rngs=rngs, kernel_init=zeros) if key_head else None

    @classmethod
    def from_policy(cls, d_model: int, config, *, latent_init=None, rngs: nnx.Rngs) -> "Controller":
        """The controller a PolicyConfig describes, for a backbone of width d_model (what
        ActiveMem builds and what `aot.py` compiles)."""
        return cls(d_model, num_latents=config.num_latents, hidden=config.hidden, activation=config.activation,
                   latent_init=latent_init, latent_init_std=config.latent_init_std,
                   max_residual=config.max_write_residual, key_head=config.key_head, rngs=rngs)

    def shared(self, h, p_bar):
        h = jnp.asarray(h, jnp.float32)
        h = h * jax.lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + 1e-6)
        p = jnp.asarray(p_bar, jnp.float32) * jnp.sqrt(jnp.float32(self.d_model))
        act = ACTIVATIONS[self.activation]
        return act(self.mlp_out(act(self.mlp_in(jnp.concatenate([h, p], axis=-1)))))

    def key_of(self, q):
        """What the tree search compares: a unit vector q itself, or with the key head
        normalize(q + W_key q) (trained by SFT's key loss, `rl.update.key_loss`), applied
        to the query and to every node alike, so a node keeps what was written (the
        value a question wants) while the search looks only at what the key keeps (what
        it is about). Finite for zero rows (empty slots, padding)."""
        q = jnp.asarray(q, jnp.float32)
        if self.key is None:
            return q
        k = q + self.key(q)
        return k * jax.lax.rsqrt(jnp.maximum(jnp.sum(k * k, axis=-1, keepdims=True), 1e-24))

    def latents(self, u):
        """m_t [B, K, d] from u [B, hidden] (what the training forward recomputes)."""
        if self.latent is None:
            return jnp.zeros(u.shape[:-1] + (0, self.d_model), jnp.float32)
        return self.latent(u).reshape(u.shape[:-1] + (self.num_latents, self.d_model))

    def _capped(self, r):
        sq = jnp.sum(r * r, axis=-1, keepdims=True)
        return r * jnp.minimum(1.0, self.max_residual * jax.lax.rsqrt(jnp.maximum(sq, 1e-24)))

    def insert_vec(self, u, q):
        """The new node's (unnormalized) embedding q + W_ins u (residual norm capped)."""
        return jnp.asarray(q, jnp.float32) + self._capped(self.insert(u))

    def update_vec(self, u, q):
        """The update target q + W_upd u (residual norm capped)."""
        return jnp.asarray(q, jnp.float32) + self._capped(self.update(u))

    def gate_vec(self, u):
        """alpha = sigmoid(W_gate u)."""
        return jax.nn.sigmoid(self.gate(u))

    def __call__(self, h, p_bar, q) -> ControllerOutput:
        """h [B, d] the observation's last-token state; p_bar [B, d] the path mean; q
        [B, d] the observation's query vector (what a write starts from)."""
        u = self.shared(h, p_bar)
        return ControllerOutput(u=u, latents=self.latents(u), tree_logits=self.tree(u),
                                insert_vec=self.insert_vec(u, q), gate=self.gate_vec(u),
                                update_vec=self.update_vec(u, q))


def masked_log_probs(logits, mask):
    """log pi_tree over the allowed actions (mask [B, 3] bool; noop is always allowed)."""
    return jax.nn.log_softmax(jnp.where(mask, logits, -1e30), axis=-1)


__all__ = ["ACTIVATIONS", "Controller", "ControllerOutput", "INSERT", "NOOP", "TREE_ACTIONS",
           "UPDATE", "masked_log_probs"]
