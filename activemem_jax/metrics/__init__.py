"""Scorers and trajectory metrics (no JAX at import; `compile_clock` reads JAX's compile events).

- `exact_match`, `f1`: SQuAD normalization (lowercase, strip punctuation and articles,
  collapse whitespace); max over gold aliases.
- `multi_objective_score`: MEM1's reward: answers split on ";", 0 if their count differs
  from the number of questions, else the sum of per-question EM.
- `gaia_score`: GAIA's official rules (numbers compared after dropping `$ % ,`; lists
  split on `,`/`;` compared element by element; strings compared without whitespace,
  lowercased, punctuation removed).
- `last_boxed`: the content of a text's last \\boxed{...} (MATH's answer mark).
- `peak_tokens`, `dependency_length`, `pass_at_k`: docs/design.md#metrics.
- `widesearch`: WideSearch's Item-F1, Row-F1 and success rate of an agent's table
  (`score_table`; deterministic, no LLM judge: the module says what it approximates).
- `intervals`: Student's t over trained seeds, and a two-level bootstrap over seeds and
  test units for a trained-versus-rule margin (command 1's LEARNED verdict).
"""

from __future__ import annotations

import collections
import math
import re
import string
from typing import Iterable, Optional, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    text = str(text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(golds) -> list[str]:
    return [golds] if isinstance(golds, str) else [str(g) for g in golds]


def exact_match(prediction: str, golds) -> float:
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in _golds(golds)))


def f1(prediction: str, golds) -> float:
    def one(gold: str) -> float:
        p, g = normalize_answer(prediction).split(), normalize_answer(gold).split()
        common = sum((collections.Counter(p) & collections.Counter(g)).values())
        if not p or not g:
            return float(p == g)
        if common == 0:
            return 0.0
        precision, recall = common / len(p), common / len(g)
        return 2 * precision * recall / (precision + recall)

    return max(one(g) for g in _golds(golds))


def split_answers(answer: str) -> list[str]:
    return [a.strip() for a in str(answer).split(";")]


def multi_objective_score(answer: str, golds_per_question: Sequence) -> float:
    """MEM1: sum of per-question EM; 0 when the answer count differs from the questions'."""
    answers = split_answers(answer)
    if len(answers) != len(golds_per_question):
        return 0.0
    return float(sum(exact_match(a, g) for a, g in zip(answers, golds_per_question)))


# ----------------------------------------------------------------------------- GAIA
def _gaia_number(text: str) -> float:
    cleaned = str(text)
    for ch in "$%,":
        cleaned = cleaned.replace(ch, "")
    try:
        return float(cleaned)
    except ValueError:
        return math.inf  # never equals a finite gold number


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except (TypeError, ValueError):
        return False


def _gaia_string(text: str, drop_punctuation: bool = True) -> str:
    squashed = re.sub(r"\s", "", str(text)).lower()
    if drop_punctuation:
        squashed = "".join(ch for ch in squashed if ch not in _PUNCT)
    return squashed


def gaia_score(prediction, gold: str) -> bool:
    """GAIA's question scorer."""
    prediction = "None" if prediction is None else str(prediction)
    gold = str(gold)
    if _is_number(gold):
        return _gaia_number(prediction) == float(gold)
    if "," in gold or ";" in gold:
        gold_items = re.split(r"[,;]", gold)
        pred_items = re.split(r"[,;]", prediction)
        if len(gold_items) != len(pred_items):
            return False
        return all(
            _gaia_number(p) == float(g) if _is_number(g)
            else _gaia_string(p, drop_punctuation=False) == _gaia_string(g, drop_punctuation=False)
            for p, g in zip(pred_items, gold_items))
    return _gaia_string(prediction) == _gaia_string(gold)


# ----------------------------------------------------------------------------- trajectories
def peak_tokens(sequence_lengths: Iterable[int]) -> int:
    """Peak token usage: the longest single sequence (prompt + completion, system prompt
    excluded by the caller) among the trajectory's model calls."""
    return max((int(n) for n in sequence_lengths), default=0)


def dependency_length(segments: Iterable[tuple[int, int]]) -> float:
    """MEM1's dependency length: for each generated segment of l tokens after c context
    tokens add (c + l / 2) * l (each generated token attends to everything before it)."""
    return float(sum((c + l / 2.0) * l for c, l in segments))


def pass_at_k(n_correct: int, n_trials: int, k: int = 1) -> float:
    """Unbiased pass@k from n trials with c correct (k = 1: the success rate)."""
    if not 0 <= n_correct <= n_trials or not 1 <= k <= n_trials:
        raise ValueError(f"need 0 <= correct ({n_correct}) <= trials ({n_trials}) and 1 <= k ({k}) <= trials")
    if n_trials - n_correct < k:
        return 1.0
    return 1.0 - math.prod((n_trials - n_correct - i) / (n_trials - i) for i in range(k))


def mean_pass_at_k(results: Sequence[Sequence[bool]], k: int = 1) -> float:
    """Mean pass@k over tasks, each a list of per-trial successes."""
    if not results:
        return 0.0
    return sum(pass_at_k(sum(map(bool, r)), len(r), k) for r in results) / len(results)


def last_boxed(text: str) -> Optional[str]:
    """Content of the last \\boxed{...} (braces balanced), or None."""
    start = text.rfind("\\boxed")
    if start < 0:
        return None
    i = text.find("{", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j]
    return None
