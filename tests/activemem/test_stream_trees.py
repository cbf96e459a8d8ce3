"""Stream-scoped trees (activemem/streams.py, commit.finish_groups) against hand-built
trees: which slot a stream gets, which writes a group commits, which activations it
credits, and node credit keyed by identity (rl/grpo.hierarchical_advantages)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from activemem_jax.activemem import streams
from activemem_jax.activemem.commit import finish_groups
from activemem_jax.activemem.policy_config import PolicyConfig
from activemem_jax.memory import tree as hlmt
from activemem_jax.rl import grpo

D = 8


def _task(stream, episode):
    return {"id": f"s{stream}e{episode}", "stream": stream, "episode": episode}


def _unit(i):
    v = np.zeros((D,), np.float32)
    v[i] = 1.0
    return jnp.asarray(v)


def test_streams_keep_their_slot_start_empty_at_episode_0_and_evict_the_least_recent():
    store = streams.init_store(3, capacity=8, dim=D, max_children=4, max_depth=3)
    store, slots = streams.assign(store, [_task(7, 0), _task(7, 0), _task(9, 0)])
    assert slots.tolist() == [0, 0, 1]
    # write a node into stream 7's tree, then ask for its next episode: same slot, tree kept
    tree = jax.tree.map(lambda x: x[0], store.trees)
    tree, _ = hlmt.insert_node(tree, 0, _unit(1))
    store = store.replace(trees=jax.tree.map(lambda a, t: a.at[0].set(t), store.trees, tree))
    store, slots = streams.assign(store, [_task(7, 1), _task(5, 0)])
    assert slots.tolist() == [0, 2]
    assert int(np.asarray(store.trees.valid[0]).sum()) == 2          # root + the node, kept
    # a fourth stream evicts the least recently used slot not in the batch (stream 9's)
    store, slots = streams.assign(store, [_task(7, 2), _task(4, 1)])
    assert slots.tolist() == [0, 1]
    assert int(np.asarray(store.trees.valid[1]).sum()) == 1          # a stream new to its slot starts empty
    # episode 0 of a stream held already starts over (the next pass over the data)
    store, slots = streams.assign(store, [_task(7, 0)])
    assert slots.tolist() == [0] and int(np.asarray(store.trees.valid[0]).sum()) == 1
    with pytest.raises(ValueError, match="policy.stream_slots"):
        streams.assign(store, [_task(s, 0) for s in range(4)])
    with pytest.raises(ValueError, match="tree_scope='stream'"):
        streams.assign(store, [{"id": "x"}])


def test_a_group_commits_its_first_rollouts_writes_and_credits_every_members_snapshot_reads():
    cfg = PolicyConfig(tree_scope="stream", capacity=8, max_children=4, max_depth=3, max_ops=2,
                       prune_fraction=0.0, ema_beta=0.5)
    snap = hlmt.init_tree(8, D, 4, 3)
    snap, a = hlmt.insert_node(snap, 0, _unit(0))                     # slot 1: in the snapshot
    snapshots = jax.tree.map(lambda x: jnp.stack([x, x]), snap)
    logs = jax.tree.map(lambda x: jnp.stack([x, x]), hlmt.new_log(2, D))
    overlays = snapshots
    # member 0 inserts under node 1, member 1 inserts another node under the root: both
    # land in overlay slot 2 of their own overlay
    o0, l0, s0 = hlmt.log_insert(jax.tree.map(lambda x: x[0], overlays), jax.tree.map(lambda x: x[0], logs), 1,
                                 _unit(2), 0)
    o1, l1, s1 = hlmt.log_insert(jax.tree.map(lambda x: x[1], overlays), jax.tree.map(lambda x: x[1], logs), 0,
                                 _unit(3), 0)
    assert int(s0) == int(s1) == 2
    logs = jax.tree.map(lambda x, y: jnp.stack([x, y]), l0, l1)
    # turn 0: member 0 read [1], member 1 read [1]; turn 1: each read its own new node 2
    paths = jnp.asarray([[[1, -1, -1], [1, 2, -1]], [[1, -1, -1], [2, -1, -1]]], jnp.int32)
    credit = streams.snapshot_paths(snapshots.valid, paths)
    assert np.asarray(credit).tolist() == [[[1, -1, -1], [1, -1, -1]], [[1, -1, -1], [-1, -1, -1]]]
    returns = jnp.asarray([1.0, 0.0])
    trees, resolved, counts = finish_groups(cfg, 2, snapshots, logs, paths, credit, jnp.asarray([2, 2]), returns)
    tree = jax.tree.map(lambda x: x[0], trees)
    valid = np.asarray(tree.valid)
    assert valid.sum() == 3 and int(counts["inserts"]) == 1            # root, node 1, member 0's node only
    new = [i for i in np.flatnonzero(valid) if i not in (0, 1)][0]
    assert int(tree.parent[new]) == 1 and np.allclose(np.asarray(tree.emb[new]), np.asarray(_unit(2)))
    assert not np.any(np.all(np.isclose(np.asarray(tree.emb), np.asarray(_unit(3))), axis=-1))
    # node 1: 3 reads (member 0 twice, member 1 once) -> visits 3, S = (1 + 1 + 0) / 3
    assert int(tree.visits[1]) == 3
    assert np.isclose(float(tree.utility_ema[1]), 0.5 * (2.0 / 3.0))
    assert int(tree.visits[new]) == 1 and np.isclose(float(tree.utility_ema[new]), 0.5)
    assert np.asarray(resolved).tolist()[0] == [[1, -1, -1], [1, new, -1]]
    assert np.asarray(resolved).tolist()[1] == [[1, -1, -1], [-1, -1, -1]]


def test_idle_decay_lets_unread_memories_sink_to_the_prune_line():
    t = hlmt.init_tree(8, D, 4, 3)
    for i in range(4):
        t, _ = hlmt.insert_node(t, 0, _unit(i))
    t = t.replace(utility_ema=t.utility_ema.at[1:5].set(jnp.asarray([0.9, 0.8, 0.7, 0.6])))
    read = hlmt.Path(jnp.asarray([1, -1, -1]), jnp.int32(1), jnp.zeros((3,)))
    for _ in range(3):  # node 1 (the best) is never read again; node 4 (the worst) is read with return 1
        t2 = hlmt.record_activations(t, read.replace(nodes=jnp.asarray([4, -1, -1])), 1.0)
        t = hlmt.end_episode(t2, beta=0.5, prune_fraction=0.0, idle_decay=True)
    ema = np.asarray(t.utility_ema)
    assert np.allclose(ema[1:4], np.asarray([0.9, 0.8, 0.7]) * 0.125)
    assert np.isclose(ema[4], 1.0 - 0.4 * 0.125)
    kept = hlmt.end_episode(t2, beta=0.5, prune_fraction=0.0, idle_decay=False)
    assert np.isclose(float(kept.utility_ema[1]), float(t2.utility_ema[1]))  # without decay it stays
    pruned = hlmt.end_episode(t, beta=0.5, prune_fraction=0.5, idle_decay=True)
    assert np.asarray(pruned.valid)[1:5].tolist() == [True, False, False, True]  # the two least useful


def test_node_credit_is_keyed_by_identity_not_by_slot_index():
    """A group of 3 rollouts: rollouts 0 and 1 each wrote a node that happens to sit in
    overlay slot 5; they are different nodes, so neither is credited with the other's
    return. All three read snapshot node 2, whose utility is the group's mean return."""
    rewards = np.asarray([1.0, 0.0, 0.0], np.float32)
    episode = np.asarray([0, 0, 1, 1, 2], np.int32)
    overlay = np.asarray([[2, -1], [5, -1], [2, -1], [5, -1], [2, -1]], np.int32)
    snapshot_valid = np.zeros((3, 8), bool)
    snapshot_valid[:, [0, 2]] = True
    rows = snapshot_valid[episode]
    credit = np.asarray(streams.snapshot_paths(jnp.asarray(rows), jnp.asarray(overlay)[:, None, :]))[:, 0]
    assert credit.tolist() == [[2, -1], [-1, -1], [2, -1], [-1, -1], [2, -1]]
    eps = 1e-6
    got = np.asarray(grpo.hierarchical_advantages(rewards, 3, episode, credit, num_nodes=8, lambda_h=0.5,
                                                  eps=eps))
    mean, std = 1.0 / 3.0, np.std([1.0, 0.0, 0.0], ddof=1)  # the group std grpo uses (n - 1)
    a = (rewards - mean) / (std + eps)
    # U(2) = mean return of the rollouts that read node 2 = the group mean: node term 0
    want = a[episode]
    assert np.allclose(got, want, atol=1e-5)
    # keyed by slot index, slot 5 would be one node read by rollouts 0 and 1: U = 0.5
    by_slot = np.asarray(grpo.hierarchical_advantages(rewards, 3, episode, overlay, num_nodes=8, lambda_h=0.5,
                                                      eps=eps))
    assert np.isclose(by_slot[1] - want[1], 0.5 * (0.5 - mean) / (std + eps), atol=1e-5)


def test_nodes_the_members_wrote_are_keyed_by_their_writing_turn():
    """A group of 4 replays one episode on one snapshot (node 2). Members 0 and 1 inserted
    a node at turn 1 (into overlay slots 5 and 6) and read it at turn 3; member 2 inserted
    at turn 2 into slot 5 and read that; member 3 wrote nothing and read node 2. Ids: the
    snapshot node keeps slot 2, the turn-1 node is capacity + 1 for members 0 and 1 (one
    node, two slots), the turn-2 node capacity + 2 (slot 5, but another node)."""
    cap = 8
    snapshot_valid = np.zeros((4, cap), bool)
    snapshot_valid[:, [0, 2]] = True
    # [E, turns=1 (the reading turn), D=2]
    paths = np.asarray([[[5, -1]], [[6, -1]], [[5, -1]], [[2, -1]]], np.int32)
    writer = np.asarray([[[1, -1]], [[1, -1]], [[2, -1]], [[-1, -1]]], np.int32)
    ids = np.asarray(streams.credit_ids(jnp.asarray(snapshot_valid), jnp.asarray(paths), jnp.asarray(writer), cap))
    assert ids[:, 0].tolist() == [[cap + 1, -1], [cap + 1, -1], [cap + 2, -1], [2, -1]]
    # a snapshot node this rollout updated keeps its slot
    upd = np.asarray(streams.credit_ids(jnp.asarray(snapshot_valid[:1]), jnp.asarray([[[2, -1]]]),
                                        jnp.asarray([[[0, -1]]]), cap))
    assert upd.tolist() == [[[2, -1]]]
    rewards = np.asarray([1.0, 1.0, 0.0, 0.0], np.float32)
    episode = np.arange(4, dtype=np.int32)
    eps = 1e-6
    got = np.asarray(grpo.hierarchical_advantages(rewards, 4, episode, ids[:, 0], num_nodes=cap + 3,
                                                  lambda_h=0.5, eps=eps))
    mean, std = 0.5, np.std([1.0, 1.0, 0.0, 0.0], ddof=1)
    a = (rewards - mean) / (std + eps)
    u = np.asarray([1.0, 1.0, 0.0, 0.0])  # U(cap+1) = mean(1, 1); U(cap+2) = 0; U(2) = 0
    want = a + 0.5 * (u - mean) / (std + eps)
    assert np.allclose(got, want, atol=1e-5)
    # keyed only by snapshot nodes, members 0-2 read nothing creditable: no node term there
    plain = np.asarray(grpo.hierarchical_advantages(
        rewards, 4, episode, np.asarray(streams.snapshot_paths(jnp.asarray(snapshot_valid), jnp.asarray(paths)))[:, 0],
        num_nodes=cap, lambda_h=0.5, eps=eps))
    assert np.allclose(plain[:3], a[:3], atol=1e-5) and not np.allclose(got[:3], plain[:3], atol=1e-3)


def test_key_loss_by_hand_and_the_key_head_starts_as_the_identity():
    from flax import nnx

    from activemem_jax.activemem.controller import Controller
    from activemem_jax.rl.update import key_loss

    ctrl = Controller(D, num_latents=0, hidden=8, key_head=True, rngs=nnx.Rngs(0))
    q = np.stack([_unit(0), (_unit(0) + _unit(1)) / np.sqrt(2), _unit(2), np.zeros(D)]).astype(np.float32)
    np.testing.assert_allclose(np.asarray(ctrl.key_of(q))[:3], q[:3], atol=1e-6)  # W_key starts at zero
    ids = np.asarray([0, 0, 1, -1], np.int32)  # rows 0 and 1 are about one thing; row 3 is padding
    loss, acc = key_loss(ctrl, jnp.asarray(q), jnp.asarray(ids), tau=0.5)
    s = q[:3] @ q[:3].T / 0.5

    def row(i, j):  # -log softmax over the other real rows
        others = [k for k in range(3) if k != i]
        return -(s[i, j] - np.log(np.sum(np.exp(s[i, others]))))
    want = (row(0, 1) + row(1, 0)) / 2  # row 2 has no partner: a negative only
    assert np.isclose(float(loss), want, atol=1e-5) and float(acc) == 1.0
    assert Controller(D, num_latents=0, hidden=8, rngs=nnx.Rngs(0)).key is None  # off by default


def test_expert_tree_actions_are_taken_where_the_mask_allows_and_fall_back_otherwise():
    from flax import nnx

    from activemem_jax.activemem.controller import Controller
    from activemem_jax.activemem.step import StepConfig, controller_step

    ctrl = Controller(D, num_latents=0, hidden=8, rngs=nnx.Rngs(0))
    gd, params = nnx.split(ctrl)
    tree = hlmt.init_tree(8, D, 4, 3)
    tree, _ = hlmt.insert_node(tree, 0, _unit(0))
    overlays = jax.tree.map(lambda x: jnp.stack([x] * 4), tree)
    logs = jax.tree.map(lambda x: jnp.stack([x] * 4), hlmt.new_log(4, D))
    # rows 0, 1 find node 1 (a path); rows 2, 3 find nothing
    q = jnp.stack([_unit(0), _unit(0), _unit(3), _unit(3)])
    forced = jnp.asarray([2, 0, 2, 1], jnp.int32)  # update, none, update (no path: insert), insert
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    _, _, out = controller_step(gd, params, overlays, logs, q, q, keys, jnp.ones(4, bool), jnp.int32(0),
                                StepConfig(tau_stop=0.5, rule=True), forced)
    assert np.asarray(out.action).tolist() == [2, 0, 1, 1]
    # the threshold rule's action on the same states, whatever acted (train.sft_head="rule"):
    # update where a path was found, insert where none was
    assert np.asarray(out.rule_action).tolist() == [2, 2, 1, 1]


def test_prune_and_merge_act_on_a_scripted_stream():
    """Three episodes of one stream, committed as the rollout commits them
    (finish_groups, group size 1): four facts stored in episode 0, only facts 0 and 1 read
    then and afterwards; in episode 2 an update moves fact 1's node onto fact 0's. The
    unread facts decay to the prune line and go (floor(0.4 x 4) = 1 a commit, then
    floor(0.4 x 3) = 1); the two siblings merge."""
    cfg = PolicyConfig(tree_scope="stream", capacity=16, max_children=8, max_depth=3, max_ops=4,
                       prune_fraction=0.4, ema_beta=0.5, idle_utility="decay", tau_merge=0.9)
    tree = hlmt.init_tree(16, D, 8, 3)
    one = lambda x: jax.tree.map(lambda a: a[None], x)  # noqa: E731
    log, overlay = hlmt.new_log(4, D), tree
    for i in range(4):  # overlay slots 1..4 hold facts 0..3
        overlay, log, _ = hlmt.log_insert(overlay, log, 0, _unit(i), 0)
    pruned, merged, inserts = [], [], []
    for episode in range(3):
        if episode:
            log = hlmt.new_log(4, D)
        if episode == 2:  # a reminder-like update: fact 1's node onto fact 0's direction
            _, log = hlmt.log_update(tree, log, slot[1], _unit(0), jnp.ones((D,)), 0)
        read = (1, 2) if episode == 0 else (slot[0], slot[1])
        paths = jnp.asarray([[[read[0], -1, -1], [read[1], -1, -1]]], jnp.int32)
        credit = streams.snapshot_paths(one(tree).valid, paths)
        trees, _, counts = finish_groups(cfg, 1, one(tree), one(log), paths, credit, jnp.asarray([2]),
                                         jnp.asarray([1.0]))
        tree = jax.tree.map(lambda a: a[0], trees)
        pruned.append(int(counts["pruned"]))
        merged.append(int(counts["merged"]))
        inserts.append(int(counts["inserts"]))
        valid = np.flatnonzero(np.asarray(tree.valid))[1:]
        slot = {int(np.argmax(np.asarray(tree.emb[i]))): int(i) for i in valid}
        if episode == 0:
            assert sorted(slot) == [0, 1, 3]  # fact 2 (unread, the lower slot of the two) went first
    assert inserts == [4, 0, 0] and pruned == [1, 1, 0] and merged == [0, 0, 1]
    assert sorted(slot) == [0]  # fact 3 pruned in episode 1; fact 1's node merged into fact 0's


@pytest.mark.parametrize("credit_writes,utility_start,pruned_fact", [
    (False, "zero", 1),   # the fresh fact was never read: utility 0, it goes first
    (True, "zero", 1),    # written = read once, but the EMA's 0 prior leaves it at beta x 0.5 = 0.15 < 0.42
    (True, "first", 0),   # its first activation sets 0.5 > the stale fact's 0.7 x 0.6 = 0.42
])
def test_a_fresh_memory_outranks_a_stale_one_only_with_write_credit_and_a_first_read_start(
        credit_writes, utility_start, pruned_fact):
    """One stale fact (utility 0.6 from three earlier reads, unread this episode) and one
    fact the episode inserts; the episode returns 0.5 and nothing reads either node. Half
    the nodes (floor(0.5 x 2) = 1) are pruned: the lower utility goes."""
    cfg = PolicyConfig(tree_scope="stream", capacity=8, max_children=4, max_depth=3, max_ops=2, prune_fraction=0.5,
                       ema_beta=0.3, idle_utility="decay", credit_writes=credit_writes, utility_start=utility_start)
    tree, stale = hlmt.insert_node(hlmt.init_tree(8, D, 4, 3), 0, _unit(0))
    tree = tree.replace(utility_ema=tree.utility_ema.at[stale].set(0.6), visits=tree.visits.at[stale].set(3))
    log = hlmt.new_log(2, D)
    _, log, _ = hlmt.log_insert(tree, log, 0, _unit(1), 0)
    one = lambda x: jax.tree.map(lambda a: a[None], x)  # noqa: E731
    nowhere = jnp.full((1, 1, 3), -1, jnp.int32)
    kept_cfg = dataclasses.replace(cfg, prune_fraction=0.0)
    kept, _, _ = finish_groups(kept_cfg, 1, one(tree), one(log), nowhere, nowhere, jnp.asarray([1]),
                               jnp.asarray([0.5]))
    ema = np.asarray(kept.utility_ema[0])
    fresh = int(np.flatnonzero(np.asarray(kept.valid[0]))[-1])
    assert np.isclose(ema[stale], 0.7 * 0.6)
    assert np.isclose(ema[fresh], {(False, "zero"): 0.0, (True, "zero"): 0.15, (True, "first"): 0.5}[
        (credit_writes, utility_start)])
    trees, _, counts = finish_groups(cfg, 1, one(tree), one(log), nowhere, nowhere, jnp.asarray([1]),
                                     jnp.asarray([0.5]))
    left = [int(np.argmax(np.asarray(trees.emb[0, i]))) for i in np.flatnonzero(np.asarray(trees.valid[0]))[1:]]
    assert int(counts["pruned"]) == 1 and left == [1 - pruned_fact]


def test_credit_slots_counts_each_written_slot_once_and_skips_minus_one():
    t = hlmt.init_tree(6, D, 4, 3)
    for i in range(3):
        t, _ = hlmt.insert_node(t, 0, _unit(i))
    t = hlmt.credit_slots(t, jnp.asarray([[1, -1], [3, 1]]), jnp.asarray([[0.5], [1.0]]))
    assert np.asarray(t.episode_hits).tolist() == [0, 2, 0, 1, 0, 0]
    assert np.allclose(np.asarray(t.episode_return_sum), [0, 1.5, 0, 1.0, 0, 0])
    assert np.asarray(t.visits).tolist() == [0, 2, 0, 1, 0, 0]
