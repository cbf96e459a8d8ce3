"""The dossier streams: their baselines by hand, their structure, scoring and bad input."""

import pytest

from activemem_jax.activemem import PolicyConfig
from activemem_jax.envs.dossier import (DossierEnv, check_sizes, dossier_baselines, make_dossier_tasks,
                                        turns_per_episode)
from activemem_jax.envs.recall import name_pool


def turn(kind, name, attr, code="", answer=""):
    write = {"fact": "insert", "correction": "update", "reminder": "update"}.get(kind, "none")
    return {"kind": kind, "name": name, "attr": attr, "code": code, "answer": answer, "write": write,
            "text": f"{kind} {name} {attr} {code}"}


# A stream of two episodes, codes (a, b, c, d): chance 1/4.
EP0 = [turn("fact", "X", "door", "a"), turn("fact", "X", "safe", "b"),
       turn("decoy", "X", "door", "c"),            # wrong, after the fact
       turn("correction", "X", "safe", "d"),       # safe is d from here on
       turn("question", "X", "door", answer="a"), turn("question", "X", "safe", answer="d")]
EP1 = [turn("fact", "Y", "door", "b"),
       turn("reminder", "X", "door", "a"),
       turn("question", "X", "safe", answer="d"), turn("question", "Y", "door", answer="b")]
HAND = [{"id": "s0-e0", "stream": 0, "episode": 0, "turns": EP0},
        {"id": "s0-e1", "stream": 0, "episode": 1, "turns": EP1}]


def test_the_baselines_equal_a_hand_computation():
    b = dossier_baselines(HAND, codes=("a", "b", "c", "d"), memory_sizes=(1, 2))
    q = 0.25
    # answers over both episodes: a, d, d, b -> "d" twice is the best constant
    assert b["best_constant_code"] == "d"
    assert b["best_constant"] == pytest.approx((0.5 + 0.5) / 2)
    # newest code shown: d (the correction) in ep0: door wrong, safe right; a (the reminder) in ep1: both wrong
    assert b["last_code"] == pytest.approx((0.5 + 0.0) / 2)
    # store everything, newest mention wins: door=c (wrong), safe=d; ep1 safe=d, Y door=b
    assert b["store_all"] == pytest.approx((0.5 + 1.0) / 2)
    # first fact only: door=a, safe=b (wrong); ep1 safe=b (wrong), Y door=b
    assert b["no_corrections"] == pytest.approx((0.5 + 0.5) / 2)
    # emptied per episode: ep0 both right; ep1 X safe unknown (chance), Y door right
    assert b["episode_only"] == pytest.approx((1.0 + (q + 1.0) / 2) / 2)
    # the k most recently written attributes (writes: X door 1, X safe 2, [safe 3], Y door 4, X door 5)
    # k=1, ep0: door (written 1) is not the newest (safe, 3): chance; safe right -> (q + 1) / 2
    #      ep1: at X safe the newest is X door (5): chance; at Y door the newest is X door: chance
    assert b["memory_1"] == pytest.approx(((q + 1.0) / 2 + q) / 2)
    # k=2, ep0: both held; ep1: newest two are X door (5) and Y door (4): X safe chance, Y door right
    assert b["memory_2"] == pytest.approx((1.0 + (q + 1.0) / 2) / 2)
    assert b["chance"] == q and b["ceiling"] == 1.0


def test_streams_are_deterministic_disjoint_and_consistent():
    a = make_dossier_tasks("train", seed=3, streams=6, episodes=3)
    assert a == make_dossier_tasks("train", seed=3, streams=6, episodes=3)
    assert a != make_dossier_tasks("train", seed=4, streams=6, episodes=3)
    test = make_dossier_tasks("test", seed=3, streams=6, episodes=3)
    train_names = {t["name"] for task in a for t in task["turns"]}
    assert train_names <= set(name_pool("train"))
    assert not train_names & {t["name"] for task in test for t in task["turns"]}
    assert len(a) == 18 and len(a[0]["turns"]) == turns_per_episode({"episodes": 3})
    # the larger pool (3-syllable names, 3,420 a split): names from its own training half only
    big = make_dossier_tasks("train", seed=3, streams=6, episodes=3, name_syllables=3)
    big_names = {t["name"] for task in big for t in task["turns"]}
    assert big_names <= set(name_pool("train", 3)) and not big_names & set(name_pool("test", 3))
    assert not big_names & set(name_pool("train")) and len(name_pool("train", 3)) == 3420
    for stream in range(6):
        value, born = {}, {}
        for task in [t for t in a if t["stream"] == stream]:
            ep = task["episode"]
            for t in task["turns"]:
                key = (t["name"], t["attr"])
                if t["kind"] == "fact":
                    born.setdefault(t["name"], ep)
                    value[key] = t["code"]
                elif t["kind"] == "correction":
                    assert t["code"] != value[key]
                    value[key] = t["code"]
                elif t["kind"] == "reminder":
                    assert t["code"] == value[key]
                elif t["kind"] == "decoy":
                    assert born[t["name"]] == ep and t["code"] != value[key]
            for t in task["turns"]:
                if t["kind"] == "question":  # the current value, never stale, never a decoy's
                    assert t["answer"] == value[(t["name"], t["attr"])]
                    assert ep - born[t["name"]] < 2
            decoys = {(t["name"], t["attr"]): t["code"] for t in task["turns"] if t["kind"] == "decoy"}
            assert all(decoys[k] != value[k] for k in decoys)  # wrong at question time too
            if ep:  # carry 0.5 of 4: two questions about the episode before
                assert sum(born[t["name"]] < ep for t in task["turns"] if t["kind"] == "question") == 2


def test_the_env_scores_questions_only_and_reports_each_kind():
    tasks = make_dossier_tasks("test", seed=1, streams=2, episodes=1)
    env = DossierEnv("test")
    obs = env.reset(tasks)
    assert obs == [t["turns"][0]["text"] for t in tasks]
    kinds = []
    for k in range(len(tasks[0]["turns"])):
        texts = [env.expert(0, k), "wrong"]
        reads = env.reads_response(0)
        obs, rewards, dones, infos = env.step(texts)
        assert reads == infos[0]["scored"]
        kinds.append(infos[0]["kind"])
        assert infos[0]["scored"] == (infos[0]["kind"] == "question")
    assert dones == [True, True]
    assert infos[0]["reward"] == 1.0 and infos[1]["reward"] == 0.0
    assert infos[1]["per_question_in_set"] == [0.0] * 4
    assert kinds == [t["kind"] for t in tasks[0]["turns"]]
    assert {"fact", "correction", "reminder", "decoy", "question"} <= set(kinds)


@pytest.mark.parametrize("sizes, field", [
    ({"episodes": 0}, "data.dossier.episodes"),
    ({"carry": 0.5, "horizon": 1}, "data.dossier.carry"),
    ({"decoys": 9}, "data.dossier.decoys"),
    ({"attributes": 5}, "data.dossier.attributes"),
    ({"questions": 99}, "data.dossier.questions"),
    ({"distractors": 2}, "unknown field"),
    ({"name_syllables": 4}, "data.dossier.name_syllables"),
])
def test_sizes_that_cannot_be_satisfied_name_the_field(sizes, field):
    with pytest.raises(ValueError, match=field):
        check_sizes(sizes)


def test_a_depth_one_tree_too_small_for_the_stream_is_refused():
    tasks = make_dossier_tasks("train", seed=0, streams=1, episodes=2)
    env = DossierEnv()
    with pytest.raises(ValueError, match="policy.max_depth=1"):
        env.check_policy(PolicyConfig(max_depth=1, max_children=4, capacity=64), tasks)  # 8 in play
    env.check_policy(PolicyConfig(max_depth=1, max_children=8, capacity=64), tasks)
    env.check_policy(PolicyConfig(max_depth=2, max_children=4, capacity=64), tasks)


def test_the_task_registry_builds_dossier_streams_from_a_config():
    from activemem_jax.tasks import build_tasks
    from configs.activemem_base import base_config

    cfg = base_config()
    cfg.data.update(name="dossier", split="test", seed=2, max_turns=8)
    with pytest.raises(ValueError, match="data.max_turns is 8"):
        build_tasks(cfg, None)
    cfg.data.max_turns = 12
    cfg.data.dossier.update(streams=3, episodes=2)
    tasks, make_env, search = build_tasks(cfg, None)
    assert tasks == make_dossier_tasks("test", seed=2, streams=3, episodes=2) and search is None
    assert make_env().reset(tasks[:1]) == [tasks[0]["turns"][0]["text"]]
