"""Recall baselines computed by the environment (hand-checked), the LEARNED verdict, and
evaluation that leaves the policy it measures unchanged."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from launch import eval_report as report

from activemem_jax.envs.recall import CODES, RecallEnv, make_recall_tasks, recall_baselines


def tiny_policy(embedded_model, engine, **switches):
    """An ActiveMem on the embedded model with the tiny config's policy and `switches`."""
    from activemem_jax.activemem import ActiveMem, PolicyConfig
    from configs import activemem_tiny_cpu

    cfg = PolicyConfig.from_dict(activemem_tiny_cpu.get_config().policy.to_dict())
    return ActiveMem(embedded_model, engine, PolicyConfig(**{**cfg.__dict__, **switches}), seed=0)


def _task(answers, order):
    return {"id": "t", "names": [f"N{i}" for i in range(len(answers))], "answers": list(answers),
            "order": list(order)}


def test_baselines_by_hand():
    codes = ("red", "blue", "green", "black")
    tasks = [_task(["red", "blue", "green"], [0, 1, 2, 2]),   # last fact: green
             _task(["blue", "blue", "red"], [1, 0, 2])]       # last fact: red
    b = recall_baselines(tasks, codes)
    assert b["chance"] == 0.25 and b["ceiling"] == 1.0
    # last fact: task 0 asks green twice of 4 (0.5); task 1 asks red once of 3 (1/3)
    assert b["last_fact"] == pytest.approx((0.5 + 1 / 3) / 2)
    # asked codes: task 0 red blue green green; task 1 blue blue red -> blue: (1/4 + 2/3) / 2, green: (2/4) / 2
    assert b["best_constant_code"] == "blue" and b["best_constant"] == pytest.approx((0.25 + 2 / 3) / 2)
    # memory of the last k facts: right when the asked index >= n - k, chance (0.25) otherwise
    m1 = ((0.25 + 0.25 + 1 + 1) / 4 + (0.25 + 0.25 + 1) / 3) / 2
    m2 = ((0.25 + 1 + 1 + 1) / 4 + (1 + 0.25 + 1) / 3) / 2
    assert b["memory_1"] == pytest.approx(m1) and b["memory_2"] == pytest.approx(m2) and b["memory_3"] == 1.0
    assert "memory_4" not in b


def test_baselines_of_the_demo_tasks_order_as_expected():
    tasks = make_recall_tasks("test", 16, 4, seed=1, n_questions=6)
    b = RecallEnv("test").baselines(tasks)
    mem = [b[f"memory_{k}"] for k in range(1, 5)]
    assert mem == sorted(mem) and mem[-1] == 1.0 and b["chance"] == 1 / len(CODES)
    assert b["chance"] < b["last_fact"] < b["memory_3"] < 1.0


def test_baselines_refuse_what_cannot_be_computed():
    with pytest.raises(ValueError, match="data.codes"):
        recall_baselines([_task(["red"], [0])], ("red",))
    with pytest.raises(ValueError, match="data.n_facts"):
        recall_baselines([{"id": "x", "names": [], "answers": [], "order": []}])
    with pytest.raises(ValueError, match="data.n_facts"):
        make_recall_tasks("train", 2, 0)
    with pytest.raises(ValueError, match="data.codes"):
        make_recall_tasks("train", 2, 2, codes=("red",))


def test_env_reports_answers_outside_the_code_set():
    env = RecallEnv("train", max_turns=4)
    env.reset([_task(["red", "blue"], [1, 0])])
    for text in ("OK", "OK", "blue", "I think"):
        _, _, _, info = env.step([text])
    assert info[0]["per_question_em"] == [1.0, 0.0] and info[0]["per_question_in_set"] == [1.0, 0.0]


def _rows(after, before=None, n=16):
    """Verdict rows on n real test tasks: per-task accuracies `after[s]` (a number, or a rule
    of rule_units to copy) for each seed s, `before` for every untrained controller."""
    from activemem_jax.envs.recall import rule_units

    tasks = make_recall_tasks("test", n, 4, seed=5, n_questions=6)
    rules, baselines = rule_units(tasks), recall_baselines(tasks)

    def row(score):
        units = dict(rules[score]) if isinstance(score, str) else {t["id"]: float(score) for t in tasks}
        return {"accuracy": float(np.mean(list(units.values()))), "baselines": baselines, "units": units,
                "rule_units": rules, "format_failure": 0.0, "path_share": 0.5, "path_len": 0.5, "tree_size": 4.0}

    out = {f"before (seed {s})": row(before or 0.0) for s in range(len(after))}
    out.update({f"after (seed {s})": row(a) for s, a in enumerate(after)})
    return out


def test_verdict_needs_an_interval_over_seeds_and_questions():
    from activemem_jax.activemem.evaluate import recall_verdict
    from activemem_jax.envs.recall import NO_TRAINING

    one = recall_verdict(_rows([0.9]), NO_TRAINING)
    assert one["learned"] is None and one["spread"] is None and one["interval"] is None  # one seed: no claim
    # a perfect 3-fact memory in both seeds: LEARNED, and it beats the 2-fact memory but not its own
    three = recall_verdict(_rows(["memory_3", "memory_3"]), NO_TRAINING)
    assert three["learned"] is True and three["beats_memory"] == 2 and three["spread"] == 0.0
    assert three["best_untrained_rule"] == "last_fact" and three["interval"]["lo"] > 0
    # two seeds a hair above the last-fact rule (one more right answer than it on 4 tasks, one
    # fewer on 2): no spread between the seeds, but the questions leave the interval across zero
    rules = _rows(["last_fact"])["after (seed 0)"]["rule_units"]
    step = {0: 1 / 6, 2: -1 / 6}
    nudged = {u: min(1.0, max(0.0, v + (step.get(i % 4, 0.0) if i % 8 != 6 else 0.0)))
              for i, (u, v) in enumerate(rules["last_fact"].items())}
    close = _rows([0.0, 0.0])
    for s in (0, 1):
        close[f"after (seed {s})"].update(units=nudged, accuracy=float(np.mean(list(nudged.values()))))
    near = recall_verdict(close, NO_TRAINING)
    assert near["spread"] == 0.0 and 0 < near["margin"] < 0.05
    assert near["interval"]["against"] == "last_fact" and near["interval"]["lo"] < 0 < near["interval"]["hi"]
    assert near["learned"] is False and near["beats_memory"] == 0
    assert report.verdict_line(near).endswith("NOT LEARNED; beats no perfect memory_k by its interval")
    assert report.verdict_line(three).endswith(": LEARNED; beats memory_2 (a perfect memory of the last 2) by its "
                                               "interval, not memory_3")
    assert report.verdict_line(one).endswith("one seed: no spread (train.seeds lists the seeds to train)")
    # one seed far above every rule, one at the last-fact rule: the weaker seed decides
    mixed = recall_verdict(_rows([1.0, "last_fact"]), NO_TRAINING)
    assert mixed["margin"] > 0.25 and mixed["learned"] is False
    # against each seed's own untrained controller: a controller as good before as after has learned nothing
    same = recall_verdict(_rows(["memory_4", "memory_4"], before="memory_4"), NO_TRAINING)
    assert same["interval"]["against"] == "before" and same["learned"] is False


def test_evaluation_leaves_the_policy_unchanged(embedded_model, engine):
    from activemem_jax.activemem import evaluate as ev

    for scope in ("episode", "persistent"):
        # the threshold rule acts (tree_actions=False)
        policy = tiny_policy(embedded_model, engine, tree_scope=scope, tree_actions=False)
        tasks = make_recall_tasks("test", 2, 2, seed=3, n_questions=2)
        policy.rollout(RecallEnv("test"), tasks, seed=0, tree_rule=True)  # a state worth keeping
        before = jax.tree.map(np.asarray, (policy.memory_state, policy.params))
        r = ev.evaluate_recall(policy, tasks, seed=0)
        after = jax.tree.map(np.asarray, (policy.memory_state, policy.params))
        assert jax.tree.all(jax.tree.map(np.array_equal, before, after)), scope

        assert 0.0 <= r["format_failure"] <= 1.0 and r["baselines"]["ceiling"] == 1.0


def test_a_stream_evaluation_carries_memory_across_episodes_and_puts_the_policy_back(embedded_model, engine):
    from activemem_jax.activemem import evaluate as ev
    from activemem_jax.envs.dossier import make_dossier_tasks

    policy = tiny_policy(embedded_model, engine, tree_scope="persistent", tree_actions=False)
    tasks = make_dossier_tasks("test", seed=3, streams=2, episodes=2, questions=2, corrections=0, reminders=0,
                               decoys=1)
    before = jax.tree.map(np.asarray, (policy.memory_state, policy.params))
    r = ev.evaluate_streams(policy, tasks)
    after = jax.tree.map(np.asarray, (policy.memory_state, policy.params))
    assert jax.tree.all(jax.tree.map(np.array_equal, before, after))
    assert r["tasks"] == 4 and 0.0 <= r["accuracy"] <= 1.0 and r["baselines"]["store_all"] <= 1.0
    # the threshold rule stores facts and decoys alike: inserts in both episodes, a tree that holds them
    assert r["inserts"] > 0 and r["tree_size"] > 0 and sum(r["depth_histogram"].values()) == r["tree_size"]
    assert r["actions"]["decoy"]["noop"] < 1.0  # the rule does not skip a decoy
    assert set(r["actions"]) == {"fact", "decoy", "question"}
    # questions by what their stream showed before them, counted by hand from the tasks
    want, first = {"all": 0, "earlier episode": 0, "same episode": 0, "after a decoy": 0}, {}
    for t in sorted(tasks, key=lambda t: (t["episode"], t["stream"])):
        for turn in t["turns"]:
            key = (t["stream"], turn["name"], turn["attr"])
            if turn["kind"] != "question":
                first.setdefault(key, []).append((t["episode"], turn["kind"]))
                continue
            shown = first.get(key, [])
            want["all"] += 1
            want["earlier episode" if shown and shown[0][0] < t["episode"] else "same episode"] += 1
            want["after a decoy"] += any(kind == "decoy" for _, kind in shown)
    q = r["questions"]
    assert {k: v["n"] for k, v in q.items()} == {k: n for k, n in want.items() if n}
    assert np.isclose(q["all"]["accuracy"], r["accuracy"])  # every episode asks the same number of questions
    assert 0.0 <= q["all"]["path"] <= 1.0
    leaves = r["leaves"]  # every question once, by where its path ended
    assert sum(v["n"] for v in leaves.values()) == want["all"] and set(leaves) <= set(ev.LEAF_ORIGINS)
    assert np.isclose(sum(v["share"] for v in leaves.values()), 1.0)
    assert np.isclose(sum(v["n"] * v["accuracy"] for v in leaves.values()) / want["all"], r["accuracy"])
    # the table's row: accuracy, accuracy after a correction ("-": none asked), the path share
    row = report.format_stream_table({"x": r}).splitlines()[2]
    assert row.startswith(f"| x | {r['accuracy']:.3f} | - | {q['all']['path']:.2f} |"), row


def test_leaf_origin_names_where_a_question_path_ended():
    """By hand on one episode: facts at turns 0-2 (Kalo door, Kalo safe, Bemi door), a
    correction of Kalo's door at 3, the question about Kalo's door at 4."""
    import types

    from activemem_jax.activemem.evaluate import LEAF_ORIGINS, leaf_origin

    turns = [dict(kind="fact", name="Kalo", attr="door"), dict(kind="fact", name="Kalo", attr="safe"),
             dict(kind="fact", name="Bemi", attr="door"), dict(kind="correction", name="Kalo", attr="door"),
             dict(kind="question", name="Kalo", attr="door")]

    def step(path, writers):  # a path of max_depth 3, -1 past its end
        return types.SimpleNamespace(path=np.array(path + [-1] * (3 - len(path))),
                                     writer_turn=np.array(writers + [-1] * (3 - len(writers))))

    want = {(3,): LEAF_ORIGINS[0],   # the correction: the newest write of Kalo's door
            (0,): LEAF_ORIGINS[4],   # the fact the correction replaced: an older write
            (-1,): LEAF_ORIGINS[1],  # a node from an earlier episode's tree
            (1,): LEAF_ORIGINS[3],   # Kalo's safe
            (2,): LEAF_ORIGINS[4]}   # Bemi's door
    for (writer,), origin in want.items():
        assert leaf_origin(turns, 4, step([5, 7], [1, writer])) == origin, writer  # the leaf's writer counts
    assert leaf_origin(turns, 4, step([], [])) == LEAF_ORIGINS[2]
    assert leaf_origin(turns, 4, types.SimpleNamespace(path=None, writer_turn=None)) == LEAF_ORIGINS[2]


def test_more_streams_than_the_policy_keeps_trees_for_score_as_their_batches_alone(embedded_model, engine):
    """tree_scope='stream' with 2 stream slots and 3 streams: evaluate_streams replays them
    in batches of 2 (each from the policy's state), so the whole evaluation adds up the
    evaluations of streams {0, 1} and {2} alone, and the policy is put back."""
    from activemem_jax.activemem import evaluate as ev
    from activemem_jax.envs.dossier import make_dossier_tasks

    policy = tiny_policy(embedded_model, engine, tree_scope="stream", stream_slots=2, tree_actions=False)
    tasks = make_dossier_tasks("test", seed=3, streams=3, episodes=2, questions=2, corrections=0, reminders=0,
                               decoys=1)
    before = jax.tree.map(np.asarray, (policy.memory_state, policy.params))
    whole = ev.evaluate_streams(policy, tasks)
    after = jax.tree.map(np.asarray, (policy.memory_state, policy.params))
    assert jax.tree.all(jax.tree.map(np.array_equal, before, after))
    first = ev.evaluate_streams(policy, [t for t in tasks if t["stream"] in (0, 1)])
    second = ev.evaluate_streams(policy, [t for t in tasks if t["stream"] == 2])
    assert whole["tasks"] == 6 == first["tasks"] + second["tasks"]
    assert np.isclose(whole["accuracy"], (2 * first["accuracy"] + second["accuracy"]) / 3)
    for k in ("inserts", "updates", "tree_size"):
        assert whole[k] == first[k] + second[k], k
    assert whole["inserts"] > 0
    for e in range(2):  # nodes per tree by episode: the mean over the 3 streams' trees
        want = (2 * first["per_episode"][e]["nodes"] + second["per_episode"][e]["nodes"]) / 3
        assert np.isclose(whole["per_episode"][e]["nodes"], want)


def test_forced_writes_replace_the_heads_choice_on_the_named_kinds_only(embedded_model, engine):
    """evaluate_streams(forced_writes=...): the named observation kinds write what a
    perfect memory writes (noop for a question or a decoy, insert for a fact), the others
    keep the head's choice; an unknown kind is refused."""
    from activemem_jax.activemem import evaluate as ev
    from activemem_jax.envs.dossier import make_dossier_tasks

    policy = tiny_policy(embedded_model, engine, tree_scope="stream", stream_slots=2, max_ops=16)
    policy.params["tree"]["bias"][...] = jnp.asarray([0.0, 5.0, 10.0], jnp.float32)  # update, else insert
    tasks = make_dossier_tasks("test", seed=3, streams=2, episodes=2, questions=2, corrections=1, reminders=0,
                               decoys=1)
    plain = ev.evaluate_streams(policy, tasks)
    head = plain["actions"]
    questions = ev.evaluate_streams(policy, tasks, forced_writes=("question",))
    every = ev.evaluate_streams(policy, tasks, forced_writes=("fact", "decoy", "correction", "question"))
    assert questions["forced_writes"] == ["question"] and "forced_writes" not in plain
    assert questions["actions"]["question"]["noop"] == 1.0 and head["question"]["noop"] == 0.0
    for kind in ("fact", "decoy", "correction"):  # not forced: the head's own choices, as without forcing
        assert questions["actions"][kind] == head[kind], kind
    assert every["actions"]["decoy"]["noop"] == every["actions"]["question"]["noop"] == 1.0
    assert every["actions"]["fact"]["insert"] == 1.0
    assert every["actions"] != head  # the head alone does not write as the environment does
    with pytest.raises(ValueError, match="forced_writes"):
        ev.evaluate_streams(policy, tasks, forced_writes=("rumour",))
