"""The memory probes: recall (envs/recall.py: facts one per turn, then questions) and
dossier (envs/dossier.py: streams of entities with corrections, reminders and decoys)."""

from __future__ import annotations

from activemem_jax.tasks._registry import TaskSet, register


def recall_codes(d) -> tuple:
    """The recall task's closed answer set: data.codes, or envs.recall.CODES when empty
    (d: a data section, checked against `schema.Data`)."""
    from activemem_jax.envs.recall import CODES
    from activemem_jax.schema import Data, section

    codes = d.codes if isinstance(d, Data) else section(Data, d, "data", check=False).codes
    return tuple(codes or CODES)


@register("recall")
def recall(d, model=None) -> TaskSet:
    from activemem_jax.envs.recall import RecallEnv, make_recall_tasks

    n_q = d.n_questions or d.n_facts
    if d.max_turns < d.n_facts + n_q:
        raise ValueError(f"data.n_facts={d.n_facts} and data.n_questions={n_q} need data.max_turns >= "
                         f"{d.n_facts + n_q} (a turn per fact and per question); it is {d.max_turns}")
    codes = recall_codes(d)
    tasks = make_recall_tasks(d.split, d.n_tasks, d.n_facts, seed=d.seed, n_questions=n_q, codes=codes)
    return TaskSet(tasks, lambda: RecallEnv(d.split, codes=codes, max_turns=d.max_turns))


@register("dossier")
def dossier(d, model=None) -> TaskSet:
    from activemem_jax.envs.dossier import DossierEnv, make_dossier_tasks, turns_per_episode

    sizes = d.dossier.to_dict() if "dossier" in d else {}
    turns = turns_per_episode(sizes)
    if d.max_turns < turns:
        raise ValueError(f"data.dossier needs {turns} turns per episode (facts, corrections, reminders, decoys, "
                         f"questions); data.max_turns is {d.max_turns}: raise it or shrink data.dossier")
    codes = recall_codes(d)
    tasks = make_dossier_tasks(d.split, seed=d.seed, codes=codes, **sizes)
    return TaskSet(tasks, lambda: DossierEnv(d.split, codes=codes, max_turns=d.max_turns,
                                             name_syllables=sizes.get("name_syllables", 2)))
