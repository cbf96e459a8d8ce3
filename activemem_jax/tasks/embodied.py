"""Embodied text worlds (`data.max_turns` the step limit of each):

- scienceworld (envs/scienceworld.py): the simulator's tasks and its own train / dev / test
  variations; `data.scienceworld` names the tasks, [] for all 30, and the simplifications.
- textworld (envs/textworld_games.py): TextWorld's generated games, `data.textworld` the
  challenge and its tw-make arguments, disjoint seed ranges per split, cached under
  `data.path` (default ~/.cache/activemem-jax/textworld).
- alfworld (envs/alfworld.py): ALFWorld's downloaded game files under `data.path`,
  `data.alfworld` the task types ([]: all six) and, optionally, the split's folder.

The two text-game families play through envs/text_games.TextGameEnv; their rules that need
no learning are a random admissible command and the game's own plan (the ceiling)."""

from __future__ import annotations

from activemem_jax.tasks._registry import TaskSet, register


@register("scienceworld")
def scienceworld(d, model=None) -> TaskSet:
    from activemem_jax.envs.scienceworld import SciWorldEnv, Simulators, make_sciworld_tasks, sciworld_baselines

    Simulators.check_java()
    sw = dict(d.scienceworld)
    tasks = make_sciworld_tasks(tuple(sw.get("tasks", ())), d.split, d.n_tasks, sw.get("simplification", "easy"))
    return TaskSet(tasks, lambda max_turns=None: SciWorldEnv(max_turns or d.max_turns), score=None,
                   baselines=lambda ts: sciworld_baselines(ts, d.max_turns, seed=d.seed))


@register("textworld")
def textworld(d, model=None) -> TaskSet:
    from activemem_jax.envs.text_games import TextGameEnv, text_game_baselines
    from activemem_jax.envs.textworld_games import make_textworld_tasks
    from activemem_jax.schema import TEXTWORLD

    tw = {**TEXTWORLD, **dict(d.textworld)}
    tasks = make_textworld_tasks(tw["challenge"], tw["args"], d.split, d.n_tasks, d.path)
    return TaskSet(tasks, lambda max_turns=None: TextGameEnv(max_turns or d.max_turns), score=None,
                   baselines=lambda ts: text_game_baselines(ts, d.max_turns, seed=d.seed))


@register("alfworld")
def alfworld(d, model=None) -> TaskSet:
    from activemem_jax.envs.alfworld import make_alfworld_tasks
    from activemem_jax.envs.text_games import TextGameEnv, check_planner, text_game_baselines

    if not d.path:
        raise ValueError("data.path: the folder holding ALFWorld's json_2.1.1/ (its downloaded game files)")
    check_planner()
    alf = dict(d.alfworld)
    tasks = make_alfworld_tasks(d.path, d.split, d.n_tasks, tuple(alf.get("task_types", ())), alf.get("split_dir", ""))
    return TaskSet(tasks, lambda max_turns=None: TextGameEnv(max_turns or d.max_turns), score=None,
                   baselines=lambda ts: text_game_baselines(ts, d.max_turns, seed=d.seed))
