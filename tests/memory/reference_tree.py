"""A plain-Python HLMT (dicts of nodes), written from the rules in the docstrings of
activemem_jax.memory, as the independent reference. float32 numpy arithmetic."""

from __future__ import annotations

import dataclasses

import numpy as np

F = np.float32
EPS = 1e-12
TIE_TOL = 1e-6  # cosines this close to the best count as ties (lowest slot wins)


def unit(v):
    v = np.asarray(v, F)
    n = F(np.sqrt(np.sum(v * v, dtype=F)))
    return v / max(n, F(EPS)), n


@dataclasses.dataclass
class Node:
    emb: np.ndarray
    parent: int
    util: float = 0.0
    visits: int = 0
    ret_sum: float = 0.0
    hits: int = 0


class RefTree:
    def __init__(self, capacity, dim, max_children, max_depth):
        self.capacity, self.dim, self.c, self.max_depth = capacity, dim, max_children, max_depth
        self.nodes = {0: Node(np.zeros(dim, F), -1)}

    def copy(self):
        other = RefTree(self.capacity, self.dim, self.c, self.max_depth)
        other.nodes = {k: dataclasses.replace(v, emb=v.emb.copy()) for k, v in self.nodes.items()}
        return other

    def children(self, p):
        return sorted(k for k, v in self.nodes.items() if v.parent == p and k != 0)

    def depth(self, k):
        d = 0
        while k != 0:
            k = self.nodes[k].parent
            d += 1
        return d

    def _best_child(self, p, q):
        sims = {c: F(np.dot(self.nodes[c].emb, q)) for c in self.children(p)}
        best = max(sims.values())
        return min(c for c, s in sims.items() if s >= best - TIE_TOL), best

    # ------------------------------------------------------------------ online ops
    def traverse(self, query, tau):
        q, _ = unit(query)
        cur, path = 0, []
        for _ in range(self.max_depth):
            if not self.children(cur):
                break
            pick, best = self._best_child(cur, q)
            if best < tau:
                break
            path.append(pick)
            cur = pick
        return path

    def insert(self, parent, emb):
        e, norm = unit(emb)
        if not (0 <= parent < self.capacity) or parent not in self.nodes or norm <= EPS:
            return -1
        free = [s for s in range(1, self.capacity) if s not in self.nodes]
        cur = parent
        while True:
            if self.depth(cur) >= self.max_depth:
                return -1
            if len(self.children(cur)) < self.c:
                break
            cur, _ = self._best_child(cur, e)
        if not free:
            return -1
        self.nodes[free[0]] = Node(e, cur)
        return free[0]

    def update(self, idx, target, alpha):
        if idx <= 0 or idx not in self.nodes:
            return
        mixed = (F(1) - F(alpha)) * self.nodes[idx].emb + F(alpha) * np.asarray(target, F)
        e, norm = unit(mixed)
        if norm > EPS:
            self.nodes[idx].emb = e

    def record(self, path, ret):
        for k in path:
            n = self.nodes[k]
            n.ret_sum = F(n.ret_sum + F(ret))
            n.hits += 1
            n.visits += 1

    # ------------------------------------------------------------------ maintenance
    def end_episode(self, beta, prune_fraction, tau_merge):
        beta = F(beta)
        for n in self.nodes.values():
            if n.hits > 0:
                n.util = F((F(1) - beta) * F(n.util) + beta * F(F(n.ret_sum) / F(n.hits)))
        # prune
        live = sorted((k for k in self.nodes if k != 0), key=lambda k: (self.nodes[k].util, k))
        k = int(np.floor(F(prune_fraction) * F(len(live))))
        for node in live[:k]:
            p = self.nodes[node].parent
            kids = self.children(node)
            if len(self.children(p)) - 1 + len(kids) <= self.c:
                for ch in kids:
                    self.nodes[ch].parent = p
                del self.nodes[node]
        # merge, from the state at the start of merging
        emb0 = {k: v.emb.copy() for k, v in self.nodes.items()}
        count0 = {k: len(self.children(k)) for k in self.nodes}
        target = {k: k for k in self.nodes}
        for p in sorted(self.nodes):
            members = self.children(p)
            surv = list(range(len(members)))
            load = [count0[m] for m in members]
            for j, mj in enumerate(members):
                for i in range(j):
                    sim = F(np.dot(emb0[members[i]], emb0[mj]))
                    if surv[i] == i and sim > tau_merge and load[i] + count0[mj] <= self.c:
                        surv[j] = i
                        load[i] += count0[mj]
                        break
            for j, mj in enumerate(members):
                target[mj] = members[surv[j]]
        groups = {}
        for k, t in target.items():
            if k != 0:
                groups.setdefault(t, []).append(k)
        for s, members in groups.items():
            if len(members) > 1:
                total = np.zeros(self.dim, F)
                for m in sorted(members):
                    total = total + emb0[m]
                self.nodes[s].emb, _ = unit(total)
                self.nodes[s].util = F(sum(F(self.nodes[m].util) for m in members) / F(len(members)))
                self.nodes[s].visits = sum(self.nodes[m].visits for m in members)
        for k in [k for k in self.nodes if target[k] != k]:
            del self.nodes[k]
        for k, n in self.nodes.items():
            if k != 0:
                n.parent = target[n.parent]
        for n in self.nodes.values():
            n.ret_sum, n.hits = 0.0, 0

    # ------------------------------------------------------------------ comparison
    def assert_matches(self, tree, atol=1e-5):
        valid = np.asarray(tree.valid)
        assert sorted(np.flatnonzero(valid).tolist()) == sorted(self.nodes), "valid slots differ"
        parent = np.asarray(tree.parent)
        depth = np.asarray(tree.depth)
        children = np.asarray(tree.children)
        emb = np.asarray(tree.emb)
        for k, n in self.nodes.items():
            assert parent[k] == n.parent, f"parent of {k}: {parent[k]} != {n.parent}"
            assert depth[k] == self.depth(k), f"depth of {k}"
            assert sorted(c for c in children[k] if c >= 0) == self.children(k), f"children of {k}"
            np.testing.assert_allclose(emb[k], n.emb, atol=atol, err_msg=f"emb of {k}")
            np.testing.assert_allclose(np.asarray(tree.utility_ema)[k], n.util, atol=1e-6)
            assert np.asarray(tree.visits)[k] == n.visits, f"visits of {k}"
            assert np.asarray(tree.episode_hits)[k] == n.hits, f"hits of {k}"
            np.testing.assert_allclose(np.asarray(tree.episode_return_sum)[k], n.ret_sum, atol=1e-6)
