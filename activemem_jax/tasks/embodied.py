"""Embodied text worlds: scienceworld (envs/scienceworld.py: the simulator's tasks and its own
train / dev / test variations; `data.scienceworld` names the tasks, [] for all 30, and the
simplifications, "easy" by default; `data.max_turns` the step limit)."""

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
