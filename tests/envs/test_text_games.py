"""Text games through the textworld engine (envs/text_games.py): TextWorld's generated games
(envs/textworld_games.py) made from seeds, once, with disjoint splits; ALFWorld's game files
(envs/alfworld.py) found in ALFWorld's own layout (tests/envs/alfworld_layout.py writes a
small kitchen in it) and played through textworld's PDDL engine; the expert winning, hostile
replies answered, the rules that need no learning, and both families registered."""

import json
import os

import pytest

pytest.importorskip("textworld", reason="pip install textworld==1.7.0 (bash launch/install.sh installs it)")

from activemem_jax.envs.alfworld import make_alfworld_tasks  # noqa: E402
from activemem_jax.envs.text_games import (TextGameEnv, clean_command, demangled_names,  # noqa: E402
                                           text_game_baselines)
from activemem_jax.envs.textworld_games import make_textworld_tasks  # noqa: E402
from tests.envs.alfworld_layout import write_games  # noqa: E402

ARGS = "--rewards dense --goal detailed"
try:
    import fast_downward

    PLANNER = fast_downward is not None
except ImportError:
    PLANNER = False
needs_planner = pytest.mark.skipif(not PLANNER, reason="ALFWorld's games need the fast-downward planner, an optional "
                                   "install (bash launch/install.sh alfworld: it compiles for about 1.5 min)")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("textworld"))


@pytest.fixture(scope="module")
def games(cache):
    return make_textworld_tasks("tw-simple", ARGS, "train", 2, cache)


def play(env, tasks, turns=30):
    env.reset(tasks)
    infos = []
    for turn in range(turns):
        if all(env.done):
            break
        _, _, _, infos = env.step([env.expert(i, turn) for i in range(len(tasks))])
    return infos


def test_games_come_from_seeds_once_with_disjoint_splits(games, cache, tmp_path):
    assert [t["id"] for t in games] == ["textworld-tw-simple-train-0", "textworld-tw-simple-train-1"]
    mtimes = [os.path.getmtime(t["game"]) for t in games]
    again = make_textworld_tasks("tw-simple", ARGS, "train", 2, cache)
    assert [t["game"] for t in again] == [t["game"] for t in games]
    assert [os.path.getmtime(t["game"]) for t in again] == mtimes  # cached, not made again
    test = make_textworld_tasks("tw-simple", ARGS, "test", 1, cache)
    assert test[0]["seed"] == 200_000 and test[0]["game"] not in {t["game"] for t in games}
    fresh = make_textworld_tasks("tw-simple", ARGS, "train", 1, str(tmp_path))  # another machine: the same game

    def walkthrough(task):
        with open(os.path.splitext(task["game"])[0] + ".json") as f:
            return json.load(f)["metadata"]["walkthrough"]

    assert walkthrough(fresh[0]) == walkthrough(games[0]) != walkthrough(games[1])


def test_the_expert_wins_every_game(games):
    env = TextGameEnv(max_turns=30)
    obs = env.reset(games)
    assert obs[0].startswith("Goal: ") and "Admissible commands: " in obs[0] and "Turns left: 30." in obs[0]
    assert "$$$$" not in obs[0]  # the title banner is not shown
    total = [0.0, 0.0]
    env.reset(games)
    for turn in range(30):
        if all(env.done):
            break
        _, rewards, dones, infos = env.step([env.expert(i, turn) for i in range(2)])
        total = [a + b for a, b in zip(total, rewards)]
    assert [i["reward"] for i in infos] == [1.0, 1.0] and all(i["won"] for i in infos) and all(dones)
    assert total == pytest.approx([1.0, 1.0]) and 0 < min(env.turn) < 30  # dense: a share of the score per step


def test_hostile_replies_are_answered_and_use_a_turn(games):
    assert clean_command("\n  Open Chest   Drawer\nand more") == "open chest drawer"
    assert clean_command("x" * 5000 + "\x00\xff") == "x" * 190
    env = TextGameEnv(max_turns=4)
    env.reset(games[:1])
    # a NUL byte reaching the interpreter kills the process (measured): it never gets there
    obs, rewards, dones, _ = env.step(["\x00\x01\xfe" * 1000])
    assert rewards == [0.0] and dones == [False] and "Turns left: 3." in obs[0]
    for reply in ("quit", "restart", "save"):
        obs, rewards, dones, _ = env.step([reply])
        assert "interpreter's own command" in obs[0] or dones == [True], (reply, obs)
    assert dones == [True] and env.score == [0.0] and env.turn == [4]  # the step limit ends it
    env.reset(games[:1])
    obs, *_ = env.step(["x" * 10_000])
    assert "Turns left: 3." in obs[0]


def test_a_bad_challenge_argument_or_split_is_named(cache):
    with pytest.raises(ValueError, match=r"data.textworld.challenge='tw-zork': the challenges are tw-coin_collector"):
        make_textworld_tasks("tw-zork", ARGS, "train", 1, cache)
    with pytest.raises(ValueError, match=r"data.textworld.args for tw-simple: .*--rewards"):
        make_textworld_tasks("tw-simple", "--goal detailed", "train", 1, cache)
    with pytest.raises(ValueError, match=r"data.split='val': TextWorld's splits here are \('train', 'dev', 'test'\)"):
        make_textworld_tasks("tw-simple", ARGS, "val", 1, cache)


def test_the_textworld_family_and_its_rules_that_need_no_learning(games, cache):
    from activemem_jax.tasks import build_section

    ts = build_section({"name": "textworld", "n_tasks": 2, "max_turns": 12, "path": cache,
                        "textworld": {"challenge": "tw-simple", "args": ARGS}})
    assert [t["game"] for t in ts.tasks] == [t["game"] for t in games] and ts.make_env().max_turns == 12
    rules = ts.baselines(ts.tasks)
    assert rules["expert"] == 1.0 and 0.0 <= rules["random"] < 1.0
    assert all(isinstance(v, float) for k, v in rules.items() if k != "units")  # what launch.train prints
    assert set(rules["units"]["random"]) == {t["id"] for t in games}


# ALFWorld: the layout (no planner needed) ...

def test_alfworld_games_are_found_in_its_layout(tmp_path):
    root = write_games(tmp_path)
    tasks = make_alfworld_tasks(root, "train", 10)
    # the Sliced folder and the game its file calls unsolvable are left out, as ALFWorld does
    assert [t["id"] for t in tasks] == ["alfworld-pick_and_place_simple-Apple-None-Cabinet-1/trial_T2019_0001",
                                        "alfworld-pick_and_place_simple-Mug-None-CounterTop-1/trial_T2019_0000"]
    assert {t["task_type"] for t in tasks} == {"pick_and_place_simple"} and tasks[0]["kind"] == "tw-pddl"
    dev = make_alfworld_tasks(os.path.join(root, "json_2.1.1"), "dev", 10)  # data.path may be json_2.1.1 itself
    assert [t["id"] for t in dev] == ["alfworld-pick_and_place_simple-Apple-None-CounterTop-2/trial_T2019_0004"]
    assert demangled_names(["Mug_bar__minus_01_dot_62", "Apple_bar__plus_00", "apple_bar__minus_02", "agent1"]) == \
        {"Apple_bar__plus_00": "apple 1", "Mug_bar__minus_01_dot_62": "mug 1", "agent1": "agent1",
         "apple_bar__minus_02": "apple 2"}


def test_alfworld_bad_files_and_names_are_named(tmp_path):
    root = write_games(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no ALFWorld split folder .*valid_unseen \(folders there: "
                                                r"\['train', 'valid_seen'\]\)"):
        make_alfworld_tasks(root, "test", 1)
    with pytest.raises(ValueError, match=r"no ALFWorld task type 'pick_apple'; the types are pick_and_place_simple"):
        make_alfworld_tasks(root, "train", 1, task_types=("pick_apple",))
    with pytest.raises(ValueError, match=r"no playable ALFWorld game .* of types \['look_at_obj_in_light'\]"):
        make_alfworld_tasks(root, "train", 1, task_types=("look_at_obj_in_light",))
    game = make_alfworld_tasks(root, "train", 1)[0]["game"]
    with open(game, "w") as f:
        f.write('{"pddl_domain": "(define')  # a download cut short
    with pytest.raises(ValueError, match=rf"{game}: not a readable ALFWorld game file \(JSONDecodeError"):
        make_alfworld_tasks(root, "train", 1)
    with open(game, "w") as f:
        json.dump({"pddl_domain": "", "grammar": ""}, f)
    with pytest.raises(ValueError, match=rf"{game}: an ALFWorld game file needs .* missing \['pddl_problem'\]"):
        make_alfworld_tasks(root, "train", 1)


# ... and play, through textworld's PDDL engine (the planner is an optional install)

@needs_planner
def test_alfworld_games_are_won_by_the_planners_plan(tmp_path):
    from activemem_jax.tasks import build_section

    root = write_games(tmp_path)
    ts = build_section({"name": "alfworld", "path": root, "n_tasks": 2, "max_turns": 10})
    env = ts.make_env()
    obs = env.reset(ts.tasks)
    assert obs[0].startswith("Goal: put an apple in the cabinet.") and "go to cabinet 1, go to countertop 1" in obs[0]
    assert "_bar_" not in obs[0]  # ALFWorld's ids are shown as a type and a number
    infos = play(env, ts.tasks, turns=10)
    assert [i["reward"] for i in infos] == [1.0, 1.0] and all(i["won"] for i in infos) and env.turn == [5, 5]
    env.reset(ts.tasks[:1])
    obs, rewards, dones, _ = env.step(["take apple 1 from countertop 1"])  # not admissible where it stands
    assert "Nothing happens." in obs[0] and rewards == [0.0] and dones == [False]
    rules = text_game_baselines(ts.tasks, max_turns=10)
    assert rules["expert"] == 1.0 and 0.0 <= rules["random"] <= 1.0
    dev = build_section({"name": "alfworld", "path": root, "split": "dev", "n_tasks": 1, "max_turns": 10})
    env.reset(dev.tasks)  # the apple starts in the closed cabinet here: no game is won before it is played
    _, _, dones, infos = env.step(["go to countertop 1"])
    assert dones == [False] and not infos[0]["won"] and len(play(env, dev.tasks, turns=10)) == 1
    assert env.score == [1.0] and env.turn == [5]


def test_alfworld_without_a_path_says_what_to_give():
    from activemem_jax.tasks import build_section

    with pytest.raises(ValueError, match=r"data.path: the folder holding ALFWorld's json_2.1.1/"):
        build_section({"name": "alfworld", "n_tasks": 1})
