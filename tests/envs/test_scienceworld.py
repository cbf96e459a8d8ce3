"""ScienceWorld as an ActiveMem environment (activemem_jax/envs/scienceworld.py) on the real
simulator: tasks from its own variation splits, the gold sequence reaching the full score,
hostile replies answered, a JVM that dies restarted with its episode ended, the rules that
need no learning scored on the same episodes, and the family registered."""

import os
import shutil
import signal

import pytest

pytest.importorskip("scienceworld", reason="pip install scienceworld==1.2.3 (bash launch/install.sh installs it)")
if shutil.which("java") is None:
    pytest.skip("ScienceWorld's simulator needs Java 8+ (apt-get install default-jre-headless)", allow_module_level=True)

from activemem_jax.envs.scienceworld import (POOL, SciWorldEnv, clean_action, make_sciworld_tasks,  # noqa: E402
                                             sciworld_baselines)

TASK = "find-living-thing"


@pytest.fixture(scope="module")
def tasks():
    yield make_sciworld_tasks((TASK,), "train", n_tasks=2)
    POOL.close()  # the module's JVMs end with it


def test_tasks_come_from_the_simulators_splits(tasks):
    assert [t["id"] for t in tasks] == [f"sciworld-{TASK}-0", f"sciworld-{TASK}-1"]
    test = make_sciworld_tasks((TASK,), "test", n_tasks=100)
    assert len(test) == 75 and not {t["variation"] for t in test} & {t["variation"] for t in tasks}
    with pytest.raises(ValueError, match=r"no ScienceWorld task 'boiling'; the tasks are: boil, "):
        make_sciworld_tasks(("boiling",), "train", 1)
    with pytest.raises(ValueError, match=r"data.split='val': ScienceWorld's splits are"):
        make_sciworld_tasks((TASK,), "val", 1)


def test_the_gold_sequence_completes_the_task(tasks):
    env = SciWorldEnv(max_turns=30)
    obs = env.reset(tasks)
    start = list(env.score)  # the task's score before any action (0.08 here)
    assert obs[0].startswith("Task: Your task is to find a(n) living thing") and "Actions (OBJ" in obs[0]
    total = [0.0, 0.0]
    for turn in range(30):
        if all(env.done):
            break
        _, rewards, dones, infos = env.step([env.expert(i, turn) for i in range(2)])
        total = [a + b for a, b in zip(total, rewards)]
    assert [info["reward"] for info in infos] == [1.0, 1.0] and all(dones)
    assert total == pytest.approx([1.0 - s for s in start]) and start[0] > 0  # step rewards: the changes


def test_hostile_replies_are_answered_and_use_a_turn(tasks):
    assert clean_action("\n  go to kitchen\nand more") == "go to kitchen"
    assert clean_action("x" * 5000 + "\x00\xff") == "x" * 200
    env = SciWorldEnv(max_turns=2)
    env.reset(tasks[:1])
    obs, rewards, dones, infos = env.step(["\x00\x01\xfe" * 1000])
    assert "No known action matches" in obs[0] and rewards == [0.0] and dones == [False]
    assert infos[0]["reward"] == pytest.approx(0.08)  # the score it started with
    obs, rewards, dones, infos = env.step(["reset task"])
    assert dones == [True] and infos[0]["reward"] == pytest.approx(0.08)  # the step limit ends it


def test_a_simulator_that_dies_ends_its_episode_and_is_restarted(tasks):
    env = SciWorldEnv(max_turns=10)
    env.reset(tasks)
    old = env.sims[0]
    os.kill(old._gateway.java_process.pid, signal.SIGKILL)
    old._gateway.java_process.wait()
    obs, rewards, dones, infos = env.step([env.expert(0, 0), env.expert(1, 0)])
    assert dones[0] and infos[0]["reward"] == 0.0 and "simulator died" in infos[0]["simulator"]
    assert not dones[1] and "simulator" not in infos[1]  # the other episode goes on
    assert env.sims[0] is not old and POOL.sims[0] is env.sims[0]
    assert env.reset(tasks)[0].startswith("Task:")  # the restarted simulator serves the next batch


def test_the_rules_that_need_no_learning(tasks):
    rules = sciworld_baselines(tasks, max_turns=12, seed=0)
    assert rules["gold"] == 1.0 and 0.0 <= rules["random"] < 1.0
    assert set(rules["units"]["random"]) == {t["id"] for t in tasks}


def test_the_family_is_registered():
    from activemem_jax import schema
    from activemem_jax.tasks import build_section

    ts = build_section({"name": "scienceworld", "split": "dev", "n_tasks": 2, "max_turns": 12,
                        "scienceworld": {"tasks": [TASK], "simplification": "easy"}})
    assert [t["split"] for t in ts.tasks] == ["dev", "dev"] and ts.make_env().max_turns == 12
    assert ts.baselines(ts.tasks[:1])["gold"] == 1.0  # the rules launch.train prints, on the same episodes
    with pytest.raises(schema.ConfigError, match=r"^data.scienceworld="):
        schema.section(schema.Data, {"name": "scienceworld", "scienceworld": {"task": ["boil"]}}, "data")


def test_closing_the_pool_reaps_every_jvm():
    POOL.take(2)
    procs = [sim._gateway.java_process for sim in POOL.sims]
    POOL.close()
    assert POOL.sims == [] and all(p.poll() is not None for p in procs)  # exited and reaped
