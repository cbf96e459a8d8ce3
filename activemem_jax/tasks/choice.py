"""Closed-answer tasks: gpqa and aqua (multiple choice, one turn, envs/choice.py) and fever
(claim verification with retrieval, three labels, envs/fever.py)."""

from __future__ import annotations

from activemem_jax.tasks._registry import TaskSet, register
from activemem_jax.tasks.qa import _path, qa_retriever


@register("gpqa", "aqua")
def multiple_choice(d, model=None) -> TaskSet:
    """data.path: GPQA's CSV (or JSONL), or AQuA-RAT's JSONL; GPQA's options shuffled by
    data.choice_seed and the record id. A task: {id, question, questions, options, gold,
    answers [[gold]], rationale (AQuA) / explanation (GPQA)}."""
    from activemem_jax.data.choice_loaders import load_aqua, load_gpqa
    from activemem_jax.envs.choice import ChoiceEnv, choice_baselines, choice_score

    path = _path(d, "path", f"the {d.name} data")
    rows = (load_gpqa(path, seed=d.choice_seed, bad_rows=d.bad_rows) if d.name == "gpqa"
            else load_aqua(path, bad_rows=d.bad_rows))
    rows = rows[: d.n_tasks] if d.n_tasks else rows
    tasks = [{**r, "questions": [r["question"]], "answers": [[r["gold"]]]} for r in rows]
    return TaskSet(tasks, lambda max_turns=None: ChoiceEnv(), score=choice_score, baselines=choice_baselines)


@register("fever")
def fever(d, model=None) -> TaskSet:
    """data.path: FEVER's JSONL; search as the QA tasks search (qa_retriever: index, corpus,
    retrieval_url, else closed-book). A task: {id, claim, question, questions, label,
    answers [[label]], evidence (gold sets of [page, sentence])}."""
    from activemem_jax.data.choice_loaders import load_fever
    from activemem_jax.envs.fever import FeverEnv, fever_baselines, parse_label

    rows = load_fever(_path(d, "path", "the FEVER data"), bad_rows=d.bad_rows)
    rows = rows[: d.n_tasks] if d.n_tasks else rows
    tasks = [{**r, "question": r["claim"], "questions": [r["claim"]], "answers": [[r["label"]]]} for r in rows]
    retriever = qa_retriever(d)
    make_env = lambda max_turns=None: FeverEnv(retriever, max_turns=max_turns or d.max_turns,  # noqa: E731
                                               topk=d.retrieval_topk, format_reward=d.format_reward)
    return TaskSet(tasks, make_env, retriever, score=lambda task, answer: float(parse_label(answer) == task["label"]),
                   baselines=fever_baselines)
