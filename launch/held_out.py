"""The held-out evaluation of a registered task family, as launch.train scores it before
and after training and launch.continual / launch.generalize (through launch.stage_runs)
score each trained controller on each dataset (no flags here, so the launchers import it).

    ts = held_out_set(run, model)                            # the held-out TaskSet of a checked run config
    rows = evaluate_held_out(model, engine, ts, run, base)   # evaluate.evaluate's rows ("em", ...)
"""

from __future__ import annotations

import dataclasses


def held_out_set(run, model):
    """The held-out TaskSet of a checked run config's registered task: the eval section's
    split, sizes and seed + 1 (the synthetic world stays the training one: world_seed),
    eval.qa_files / eval.path, else the training files; no format reward, so em is the
    answers' score. model: the backbone (first_token reads its tokenizer)."""
    from activemem_jax.tasks import build_section

    e, d = run.eval, run.data
    held = dataclasses.replace(d, n_objectives=tuple(e.n_objectives), n_tasks=e.n_tasks, seed=d.seed + 1,
                               world_seed=d.seed if d.world_seed < 0 else d.world_seed, split=e.split,
                               format_reward=0.0, qa_files=e.qa_files or d.qa_files, path=e.path or d.path)
    return build_section(held, model, "data")


def evaluate_held_out(model, engine, ts, run, base, restore=None) -> list:
    """`evaluate.evaluate`'s rows of the policy `base` (a PolicyConfig; `restore(policy)`
    loads trained params, None: the untrained controller of run.seed) on the held-out
    TaskSet `ts`, each task's turns from the eval section."""
    from activemem_jax.activemem import evaluate as ev

    e = run.eval
    turns = lambda n: min(e.max_turns_cap, e.turns_per_objective * n + e.extra_turns)  # noqa: E731
    return ev.evaluate(model, engine, ts.search, base, ["activemem"], ts.by_group(), turns, seed=run.seed,
                       restore=restore, make_env=ts.make_env)


__all__ = ["evaluate_held_out", "held_out_set"]
