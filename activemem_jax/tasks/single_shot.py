"""Single-shot tasks: gsm8k and math (the math environment; `delimiter` set: delimiter
steps, envs/segmented.py) and first_token (a one-token reward probe)."""

from __future__ import annotations

from activemem_jax.tasks._registry import TaskSet, register
from activemem_jax.tasks.qa import _path


def _math_env(d):
    from activemem_jax.envs import MathEnv
    from activemem_jax.envs.segmented import SegmentedEnv

    delimiter = d.delimiter
    return lambda max_turns=None: (SegmentedEnv(MathEnv(), delimiter, max_turns or d.max_turns) if delimiter
                                   else MathEnv())


@register("gsm8k", "math")
def math(d, model=None) -> TaskSet:
    from activemem_jax.data.loaders import load_gsm8k, load_math

    rows = (load_gsm8k if d.name == "gsm8k" else load_math)(_path(d, "path", f"the {d.name} data"),
                                                            bad_rows=d.bad_rows)
    rows = rows[: d.n_tasks] if d.n_tasks else rows
    tasks = [{**r, "questions": [r["question"]], "answers": [[r["answer"]]]} for r in rows]
    return TaskSet(tasks, _math_env(d))


@register("first_token")
def first_token(d, model=None) -> TaskSet:
    from activemem_jax.envs import FirstTokenEnv

    if model is None:
        raise ValueError("first_token needs the model (its tokenizer and vocabulary): "
                         "build_section(section, model)")
    vocab = model.config.vocab_size
    tasks = [{"id": f"ft-{i}", "prompt": p} for i, p in enumerate(d.prompts)]
    if d.target_words:  # reward: the response starts with one of these words
        tok = model.tokenizer
        targets = {tok(v, add_special_tokens=False)["input_ids"][0] for w in d.target_words for v in (w, " " + w)}
        predicate = targets.__contains__
    else:  # reward: the first token's id is in the lowest `fraction` of the vocabulary
        predicate = lambda t: t < vocab * d.fraction  # noqa: E731
    return TaskSet(tasks, lambda: FirstTokenEnv(model.tokenizer, predicate), score=None,
                   group=lambda t: 1)
