"""ALFWorld's text games from the files its users download (`data.name="alfworld"`,
`data.path` the folder that holds `json_2.1.1/`, or that folder itself).

    tasks = make_alfworld_tasks("/data/alfworld", "train", n_tasks=64, task_types=("pick_and_place_simple",))

The layout is ALFWorld's: json_2.1.1/<split>/<task dir>/<trial dir>/ with `game.tw-pddl`
(a JSON file: the PDDL domain and problem and the text grammar, with a `solvable` flag) and
`traj_data.json` (its `task_type`) side by side. The splits map to ALFWorld's folders (train:
train, dev: valid_seen, test: valid_unseen, the paper's in- and out-of-distribution sets;
`data.alfworld.split_dir` names another). As ALFWorld itself does, a game whose folder path
holds "movable" or "Sliced", or whose file says it is not solvable, is left out; the task
types are taken in turn so a short list covers each. A game file that is not JSON, or lacks
one of its three parts, stops the load naming the file.

Games are played through textworld's PDDL engine (its `PddlEnv`, which needs the
fast-downward planner: `bash launch/install.sh alfworld`), with ALFWorld's object ids
("Mug_bar__minus_01_dot_62_...") shown as a type and a number ("mug 1"): the planner's plan
is SFT's expert, and the reward is 1 when the game is won. Played by
envs/text_games.TextGameEnv (which opens the files: envs/text_games._open_pddl).
"""

from __future__ import annotations

import collections
import itertools
import json
import os
from typing import Sequence

from activemem_jax.envs.text_games import read_game

SPLIT_DIRS = {"train": "train", "dev": "valid_seen", "test": "valid_unseen"}
TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")


def split_folder(root: str, split: str, split_dir: str = "") -> str:
    if not split_dir and split not in SPLIT_DIRS:
        raise ValueError(f"data.split={split!r}: ALFWorld's splits here are {tuple(SPLIT_DIRS)} "
                         "(or name a folder with data.alfworld.split_dir)")
    base = os.path.join(root, "json_2.1.1") if os.path.isdir(os.path.join(root, "json_2.1.1")) else root
    folder = os.path.join(base, split_dir or SPLIT_DIRS[split])
    if not os.path.isdir(folder):
        have = sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d))) if os.path.isdir(base) else []
        raise FileNotFoundError(f"data.path={root!r}: no ALFWorld split folder {folder} (folders there: {have}); "
                                "data.path is the folder holding json_2.1.1/ from ALFWorld's download")
    return folder


def _task_type(trial_dir: str) -> str:
    path = os.path.join(trial_dir, "traj_data.json")
    try:
        with open(path, encoding="utf-8") as f:
            kind = json.load(f).get("task_type", "")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as e:
        raise ValueError(f"{path}: not a readable traj_data.json ({type(e).__name__}: {e})") from None
    return kind or os.path.basename(os.path.dirname(trial_dir)).split("-")[0]


def make_alfworld_tasks(root: str, split: str, n_tasks: int, task_types: Sequence[str] = (),
                        split_dir: str = "") -> list[dict]:
    """Up to n_tasks games of `split` under `root`, the task types taken in turn."""
    bad = [t for t in task_types if t not in TASK_TYPES]
    if bad:
        raise ValueError(f"data.alfworld.task_types: no ALFWorld task type {bad[0]!r}; the types are {', '.join(TASK_TYPES)}")
    folder = split_folder(root, split, split_dir)
    by_type: dict = collections.defaultdict(list)
    for here, dirs, files in sorted(os.walk(folder)):
        dirs.sort()
        if "game.tw-pddl" not in files or "traj_data.json" not in files or "movable" in here or "Sliced" in here:
            continue
        path = os.path.join(here, "game.tw-pddl")
        if read_game(path).get("solvable", True) is False:
            continue
        kind = _task_type(here)
        if not task_types or kind in task_types:
            by_type[kind].append(path)
    games = [p for row in itertools.zip_longest(*(by_type[k] for k in sorted(by_type))) for p in row if p]
    if not games:
        raise ValueError(f"{folder}: no playable ALFWorld game (game.tw-pddl beside traj_data.json)"
                         + (f" of types {list(task_types)}" if task_types else ""))
    return [{"id": "alfworld-" + os.path.relpath(os.path.dirname(p), folder).replace(os.sep, "/"), "game": p,
             "kind": "tw-pddl", "split": split, "task_type": t, "answers": [["won"]]}
            for p, t in ((p, _task_type(os.path.dirname(p))) for p in games[:n_tasks])]


__all__ = ["SPLIT_DIRS", "TASK_TYPES", "make_alfworld_tasks", "split_folder"]
