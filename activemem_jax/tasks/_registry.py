"""The registry: a task family is one builder, registered by name, that turns a config
section into a `TaskSet`."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Hashable, Optional, Sequence

BUILDERS: dict[str, Callable] = {}


def register(*names: str):
    """`@register("name", ...)` on a builder `(section, model) -> TaskSet`."""
    def add(fn):
        for name in names:
            BUILDERS[name] = fn
        return fn
    return add


def answer_score(task: dict, answer: str) -> float:
    """A final answer against `task["answers"]` (one gold list per question): exact match
    for one question, the fraction of questions answered for N (MEM1's composition)."""
    from activemem_jax import metrics

    n = len(task["answers"])
    return metrics.multi_objective_score(answer, task["answers"]) / n if n > 1 else \
        metrics.exact_match(answer, task["answers"][0])


def n_objectives(task: dict) -> int:
    """The default grouping: the number of questions a task asks (results are reported per N)."""
    return len(task["answers"])


@dataclasses.dataclass(frozen=True)
class TaskSet:
    """What a task family gives, for either paper.

    tasks: the task dicts ({id, question, questions?, answers, files?, level?, ...}).
    make_env: ActiveMem's environment factory, `make_env()` or `make_env(max_turns)`;
        None where ActiveMem cannot run a family (gaia, browsecomp_plus without a search
        backend).
    search: the search backend (a retriever with `search(query, k)`), or None
        (closed-book, or files only).
    documents: the corpus the agents' search tools may open (web_parse); () when none.
    score: `score(task, answer) -> float in [0, 1]`, a final answer's score (HyMem's
        Pass@1; ActiveMem's environments compute their own reward); None: no text scorer.
    group: `group(task) -> key`, how results are grouped (N objectives by default; a
        difficulty level for the agent benchmarks).
    source: what the tasks were drawn from, where a family has one object for it (the
        synthetic world: the benchmarks' oracle clients read its facts); None elsewhere.
    baselines: `baselines(tasks) -> {rule: mean score, ..., "units": {rule: {task id:
        score}}}`, the rules that need no learning scored on those very tasks as the
        environment scores them (code: an empty body and the canonical solution;
        ScienceWorld: a random valid action and the gold sequence); None: the family has
        none here (recall and dossier have their own, envs/recall.py and envs/dossier.py).

    A TaskSet unpacks as (tasks, make_env, search), the tuple builders returned before.
    """

    tasks: list
    make_env: Optional[Callable] = None
    search: Any = None
    documents: Sequence = ()
    score: Optional[Callable[[dict, str], float]] = answer_score
    group: Callable[[dict], Hashable] = n_objectives
    source: Any = None
    baselines: Optional[Callable[[list], dict]] = None

    def __iter__(self):
        return iter((self.tasks, self.make_env, self.search))

    def by_group(self) -> dict:
        """{group key: tasks}, keys in first-seen order."""
        out: dict = {}
        for t in self.tasks:
            out.setdefault(self.group(t), []).append(t)
        return out


def build_tasks(cfg, model=None) -> TaskSet:
    """The training tasks of cfg.data (a family with an ActiveMem environment)."""
    return require_env(build_section(cfg.data, model, "data"), cfg.data.name, "data")


def require_env(ts: TaskSet, name: str, where: str = "data") -> TaskSet:
    """ts, if ActiveMem can run it (it has an environment factory)."""
    if ts.make_env is None:
        raise ValueError(f"{where}.name={name!r} is an agent benchmark with no ActiveMem environment: its "
                         f"search agent needs a search backend ({where}.corpus for browsecomp_plus, or "
                         f"{where}.retrieval_url); or evaluate agents on it with `python -m launch.eval_agents`, "
                         "or pick another task "
                         "(activemem_jax/tasks/: synthetic, multi_objective_qa, single_qa, recall, ...)")
    return ts


def build_section(d, model=None, where: str = "data") -> TaskSet:
    """The TaskSet of any config section with a `name` (a run's, an evaluation's or the
    agent harness's `data`: `schema.Data`, its fields typed here, a missing one taking the
    schema's default; the ranges are checked where a run config loads); `model` only for
    the families that need it (first_token)."""
    import dataclasses

    import ml_collections

    from activemem_jax.schema import Data, section

    if not isinstance(d, Data):
        d = section(Data, d, where, check=False)
    if d.name not in BUILDERS:
        raise ValueError(f"{where}.name={d.name!r}: use one of {sorted(BUILDERS)}")
    from activemem_jax.data.bad_rows import check_policy

    check_policy(d.bad_rows, f"{where}.bad_rows")
    return BUILDERS[d.name](ml_collections.ConfigDict(dataclasses.asdict(d)), model)


def names() -> list[str]:
    return sorted(BUILDERS)
