"""Hierarchical Latent Memory Tree (HLMT): the public API.

    from activemem_jax.memory import tree as hlmt
    t = hlmt.init_tree(capacity, dim, max_children=16, max_depth=8)
    path = hlmt.traverse(t, query, tau_stop=0.5)   # Path(nodes [max_depth], length, sims)
    path, cand, pick, logp = hlmt.sample_traverse(t, query, rng, 0.5, False, 0.05)  # the search as a policy
    t, idx = hlmt.insert_node(t, parent, emb)       # idx = -1 when refused
    t = hlmt.update_node(t, idx, target, alpha)     # e <- normalize((1-alpha) e + alpha target)
    t = hlmt.record_activations(t, path, episode_return)
    t = hlmt.credit_slots(t, slots, episode_return)  # the nodes an episode wrote, as activations
    t = hlmt.end_episode(t, beta=0.1, prune_fraction=0.05, tau_merge=0.9)
    t = hlmt.commit(t, logs)                        # replay rollouts' op logs

Every function is pure and jit/vmap-able (over a batch of trees and of queries).
"""

from activemem_jax.memory._maintenance import end_episode
from activemem_jax.memory._ops import (best_child, credit_slots, insert_node, path_leaf, path_mean,
                                      record_activations, traverse, update_node)
from activemem_jax.memory._oplog import (OP_INSERT, OP_NONE, OP_UPDATE, OpLog, commit, log_insert,
                                         log_update, last_writer, new_log, resolve_slots)
from activemem_jax.memory._search import level_logits, path_log_prob, sample_traverse
from activemem_jax.memory._state import (Path, Tree, children_from_parents, depths_from_parents,
                                         from_parents, init_tree, normalize)
from activemem_jax.memory.describe import describe, format_description

__all__ = [
    "OP_INSERT", "OP_NONE", "OP_UPDATE", "OpLog", "Path", "Tree", "best_child",
    "children_from_parents", "commit", "credit_slots",
    "depths_from_parents", "describe", "end_episode", "format_description", "from_parents",
    "init_tree", "insert_node", "last_writer", "level_logits", "log_insert", "log_update", "new_log", "normalize",
    "path_leaf", "path_log_prob", "path_mean",
    "record_activations", "resolve_slots", "sample_traverse", "traverse", "update_node",
]
