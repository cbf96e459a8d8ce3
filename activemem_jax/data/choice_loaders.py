"""Loaders for datasets with a closed answer set, from local files: GPQA and AQuA-RAT
(multiple choice, a letter per option) and FEVER (three labels).

    load_gpqa("gpqa_diamond.csv", seed=0)   # {"id", "question", "options", "gold", "explanation"}
    load_aqua("aqua/test.json")             # {"id", "question", "options", "gold", "rationale"}
    load_fever("fever/shared_task_dev.jsonl")  # {"id", "claim", "label", "evidence"}

Options are texts without their letters; option k has letter "ABCDE..."[k], and `gold` is
the correct option's letter.

- GPQA: the published CSV (`gpqa_main.csv`, `gpqa_diamond.csv`, `gpqa_extended.csv`; of
  its many columns only Question, Correct Answer, Incorrect Answer 1-3, Explanation and
  Record ID are read), or JSONL rows with those keys. The four answers are shuffled per
  row by `random.Random(f"{seed}:{record id}")` (`shuffle_options`): the same seed gives
  the same order on any machine, another seed another order, and `gold` follows the
  correct answer. A CSV row number is the record's position after the header, from 1
  (a record may span several lines: GPQA's texts hold newlines).
- AQuA-RAT: the published JSONL ({"question", "options": ["A)21", "B)21.5", ...],
  "rationale", "correct": "B"}; an option is "LETTER)text", a space after the parenthesis
  or not). The options keep their published order: the rationales name letters.
- FEVER: the published JSONL ({"id", "verifiable", "label", "claim", "evidence"}), labels
  spelled exactly SUPPORTS, REFUTES, NOT ENOUGH INFO. `evidence` becomes the gold evidence
  sets: one per annotation, each a sorted list of distinct [page, sentence] pairs (NOT
  ENOUGH INFO's [[[id, null, null, null]]]: no set).

Errors follow data/loaders.py: bad_rows "strict" stops at the first bad row naming the file,
the row and what is wrong (a gold letter outside the options, a missing field, an unknown
label); "skip" drops such rows with one warning line per reason. A GPQA CSV whose header
lacks a required column is an error naming the column under either policy.
"""

from __future__ import annotations

import csv
import random
import re
import string
from typing import Iterator

from activemem_jax.data.bad_rows import RowSieve
from activemem_jax.data.loaders import _Missing, _field, _need, numbered_rows

LETTERS = string.ascii_uppercase
GPQA_COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
FEVER_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
_AQUA_OPTION = re.compile(r"\s*([A-Za-z])\s*\)\s?(.*)", re.S)


def shuffle_options(correct: str, incorrect: list, seed: int, rid: str) -> tuple[list, str]:
    """(options, gold letter): the correct answer and the incorrect ones in the order
    `random.Random(f"{seed}:{rid}")` deals them (string seeds hash the same everywhere)."""
    options = [correct, *incorrect]
    order = list(range(len(options)))
    random.Random(f"{seed}:{rid}").shuffle(order)
    return [options[k] for k in order], LETTERS[order.index(0)]


def _csv_rows(path: str) -> Iterator[tuple[int, dict]]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in GPQA_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise KeyError(f"{path}: no {missing[0]!r} column (GPQA's CSV has {', '.join(GPQA_COLUMNS)}; "
                           f"this header has {reader.fieldnames})")
        yield from enumerate(reader, 1)


def _text(row: dict, key: str, path: str, row_no, sieve: RowSieve) -> str:
    """row[key] as a non-empty stripped string; missing or empty is bad under the sieve."""
    value = _field(row, key, path, row_no, sieve)
    if not isinstance(value, str) or not value.strip():
        sieve.bad(row_no, f"empty {key!r}", f"{path}: row {row_no} has an empty {key!r} ({value!r})")
        raise _Missing(key)
    return value.strip()


def load_gpqa(path: str, seed: int = 0, bad_rows: str = "strict") -> list[dict]:
    """GPQA's CSV (or JSONL with the same keys): the four answers shuffled by `seed` and the
    record id (module doc). Ids (Record ID, else the row number) are unique."""
    _need(path, "GPQA file (gpqa_main.csv, gpqa_diamond.csv or gpqa_extended.csv)")
    sieve = RowSieve(path, bad_rows)
    rows = numbered_rows(path, "GPQA JSONL", sieve) if path.endswith(".jsonl") else _csv_rows(path)
    for row_no, row in rows:
        try:
            question = _text(row, "Question", path, row_no, sieve)
            correct = _text(row, "Correct Answer", path, row_no, sieve)
            incorrect = [_text(row, f"Incorrect Answer {k}", path, row_no, sieve) for k in (1, 2, 3)]
        except _Missing:
            continue
        rid = str(row.get("Record ID") or row_no)
        options, gold = shuffle_options(correct, incorrect, seed, rid)
        explanation = row.get("Explanation")
        sieve.keep(row_no, {"id": rid, "question": question, "options": options, "gold": gold,
                            "explanation": explanation.strip() if isinstance(explanation, str) else ""})
    return sieve.finish()


def load_aqua(path: str, bad_rows: str = "strict") -> list[dict]:
    """AQuA-RAT's JSONL (module doc); options in their published order. Ids: the row's
    position from 0 (the release has none)."""
    sieve = RowSieve(path, bad_rows)
    for k, (row_no, row) in enumerate(numbered_rows(path, "AQuA-RAT JSONL (e.g. test.json)", sieve)):
        try:
            question = _text(row, "question", path, row_no, sieve)
            raw = _field(row, "options", path, row_no, sieve)
            correct = _field(row, "correct", path, row_no, sieve)
        except _Missing:
            continue
        parsed = [_AQUA_OPTION.fullmatch(o) if isinstance(o, str) else None for o in raw] \
            if isinstance(raw, list) else []
        if not parsed or any(m is None or m.group(1).upper() != LETTERS[j] for j, m in enumerate(parsed)):
            sieve.bad(row_no, "options not lettered A), B), ...",
                      f"{path}: row {row_no} has options {raw!r}; expected a list like ['A)21', 'B)21.5', ...] "
                      "lettered A, B, C, ... in order")
            continue
        letters = LETTERS[: len(parsed)]
        gold = correct.strip().upper() if isinstance(correct, str) else correct
        if gold not in tuple(letters):
            sieve.bad(row_no, "gold letter outside the options",
                      f"{path}: row {row_no} has correct={correct!r}, not one of its options' letters "
                      f"{', '.join(letters)}")
            continue
        rationale = row.get("rationale")
        sieve.keep(row_no, {"id": str(row.get("id", k)), "question": question,
                            "options": [m.group(2).strip() for m in parsed], "gold": gold,
                            "rationale": rationale.strip() if isinstance(rationale, str) else ""},
                   unique_ids=False)
    return sieve.finish()


def fever_evidence_sets(evidence) -> list[list[list]]:
    """FEVER's `evidence` (annotation sets of [annotation id, evidence id, page, sentence])
    as the gold sets: each a sorted list of distinct [page, sentence]; items without a page
    (NOT ENOUGH INFO's) are left out, and so is a set left empty; repeated sets once."""
    sets, seen = [], set()
    for annotation in evidence or ():
        pairs = sorted({(str(item[2]), item[3]) for item in annotation or ()
                        if isinstance(item, (list, tuple)) and len(item) >= 4 and item[2] is not None},
                       key=lambda p: (p[0], -1 if p[1] is None else p[1]))
        key = tuple(pairs)
        if pairs and key not in seen:
            seen.add(key)
            sets.append([list(p) for p in pairs])
    return sets


def load_fever(path: str, bad_rows: str = "strict") -> list[dict]:
    """FEVER's JSONL (module doc): {"id", "claim", "label", "evidence": gold sets}. A label
    other than the three published spellings is a bad row; a SUPPORTS / REFUTES row without
    evidence keeps evidence [] (its FEVER score is not computed). Ids are unique."""
    sieve = RowSieve(path, bad_rows)
    for k, (row_no, row) in enumerate(numbered_rows(path, "FEVER JSONL (e.g. shared_task_dev.jsonl)", sieve)):
        try:
            claim = _text(row, "claim", path, row_no, sieve)
            label = _field(row, "label", path, row_no, sieve)
        except _Missing:
            continue
        if label not in FEVER_LABELS:
            sieve.bad(row_no, "unknown label", f"{path}: row {row_no} has label {label!r}; FEVER's labels are "
                                               f"{', '.join(FEVER_LABELS)}")
            continue
        evidence = row.get("evidence")
        if evidence is not None and not isinstance(evidence, list):
            sieve.bad(row_no, "evidence not a list",
                      f"{path}: row {row_no} has evidence {evidence!r:.80}; expected lists of "
                      "[annotation id, evidence id, page, sentence]")
            continue
        sieve.keep(row_no, {"id": str(row.get("id", k)), "claim": claim, "label": label,
                            "evidence": fever_evidence_sets(evidence) if label != "NOT ENOUGH INFO" else []})
    return sieve.finish()


__all__ = ["FEVER_LABELS", "GPQA_COLUMNS", "LETTERS", "fever_evidence_sets", "load_aqua", "load_fever",
           "load_gpqa", "shuffle_options"]
