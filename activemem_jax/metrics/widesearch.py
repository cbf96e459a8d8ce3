"""WideSearch's table scores: Item-F1, Row-F1 and the success rate, without an LLM judge.

    score = score_table(agent_output, gold_rows, evaluation)
    score.item_f1, score.row_f1, score.success

`evaluation` is a WideSearch task's own field: {"unique_columns": [...], "required": [...],
"eval_pipeline": {column: {"preprocess": [...], "metric": [...], "criterion": ...}}};
`gold_rows` the task's gold table (a list of row dicts, e.g. its CSV read with csv.DictReader).

This is our reading of the benchmark's published evaluator, with every rule we rely on
written out below. Not checked: the benchmark's own column-name normalisation (the rule
below is strip, lowercase, drop spaces), its data, and agreement with its published
scores on real outputs.

1. Tables. A str response is the agent's text: its table is the first ```markdown fenced
   block's table if there is one, else the first run of two or more consecutive lines
   holding "|" (a lone line with a "|" is prose). Separator lines (only "|-: ") are
   dropped; a header cell left empty drops its column; a short row is padded with "".
   Column names compare after stripping, lowercasing and removing spaces. A response whose
   columns are not exactly the required ones scores 0 (the published evaluator first asks
   an LLM to map the response's column names onto the required ones; we do not).
2. Cells are stripped strings ("" for a missing cell), then each column's preprocessing:
   `norm_str` lowercases, strips and removes spaces and "*"; `extract_number` keeps the
   first number (commas removed first; a trailing "%" kept), "NULL" if there is none;
   `norm_date` needs dateparser and is not applied (the column is listed in `approximated`).
   Key cells are then also put through `norm_str` (the published evaluator maps the
   response's keys onto the gold keys with an LLM; normalised equality stands in for it).
3. A row repeating an earlier row's key is dropped (the first kept), in both tables.
4. Rows match on equal keys. In a matched row each key cell is correct; each other
   required cell is correct when every metric of its column passes:
   `exact_match`: equal ignoring case, and two cells that both read as numbers compare as
   numbers ("3" equals "3.0": the published evaluator gets this from pandas' int-to-float
   column coercion); `number_near`: |response - gold| <= criterion * |gold|, a "%" value
   divided by 100, two non-numbers pass only when equal; `url_match`: the sets of hosts of
   the URLs in the two cells are equal (two cells without a URL pass); `in_match`: the
   response cell is a substring of the gold cell. `llm_judge` and `date_near` (an LLM,
   dateparser) become `exact_match`, stricter, and the column is listed in `approximated`.
   A column without a pipeline entry is `norm_str` then `exact_match`; an entry without
   metrics is `exact_match`. An unknown step, or number_near without a numeric
   criterion, is a ValueError naming the column.
5. Item precision = correct cells / (response rows x required columns), item recall =
   correct cells / (gold rows x required columns); row precision and recall count the
   matched rows whose every cell is correct, over response and gold rows. F1 = 2PR/(P+R),
   0 when P + R = 0. Success is 1 only when item precision and recall are both 1: every gold
   row present with every cell right, and no extra row.
"""

from __future__ import annotations

import dataclasses
import math
import re
import urllib.parse
from typing import Optional, Sequence, Union

PREPROCESS = ("norm_str", "extract_number", "norm_date")
METRICS = ("exact_match", "number_near", "url_match", "in_match", "llm_judge", "date_near")
APPROXIMATED = ("llm_judge", "date_near", "norm_date")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)%?")
_URL = re.compile(r"https?://[^\s|)\]>\"']+")
_FENCED = re.compile(r"```markdown(.*?)```", re.S)
_SEPARATOR = set("|-: ")


@dataclasses.dataclass(frozen=True)
class TableScore:
    success: float
    item_precision: float
    item_recall: float
    item_f1: float
    row_precision: float
    row_recall: float
    row_f1: float
    approximated: tuple[str, ...] = ()  # columns scored with exact_match in place of their metric
    note: str = ""  # why a response scored 0 without being compared


def norm_column(name) -> str:
    return str(name).strip().lower().replace(" ", "")


def norm_str(cell) -> str:
    return str(cell).lower().strip().replace(" ", "").replace("*", "")


def extract_number(cell) -> str:
    found = _NUMBER.search(str(cell).replace(",", ""))
    return found.group() if found else "NULL"


def parse_markdown_table(text: str) -> Optional[tuple[list[str], list[dict]]]:
    """(normalised column names, rows as dicts) of the table in `text` (module docstring,
    step 1), or None when it has none."""
    fenced = _FENCED.search(text)
    runs, run = [], []
    for line in (fenced.group(1) if fenced else text).splitlines() + [""]:
        if "|" in line:
            run.append(line.strip())
        elif run:
            runs.append(run)
            run = []
    block = next(([line for line in r if not set(line) <= _SEPARATOR] for r in runs if len(r) >= 2), [])
    if not block:
        return None
    split = [_cells(line) for line in block]
    header = [norm_column(c) for c in split[0]]
    rows = [{h: (cells[i] if i < len(cells) else "") for i, h in enumerate(header) if h} for cells in split[1:]]
    return [h for h in header if h], rows


def _cells(line: str) -> list[str]:
    cells = [c.strip() for c in line.split("|")]
    return cells[1 if line.startswith("|") else 0:len(cells) - 1 if line.endswith("|") else len(cells)]


def _float(text: str) -> Optional[float]:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _number(text: str) -> Optional[float]:
    """number_near's reading: a "%" value divided by 100."""
    if text.endswith("%"):
        value = _float(text[:-1])
        return None if value is None else value / 100
    return _float(text)


def _hosts(cell: str) -> set[str]:
    return {urllib.parse.urlsplit(u).netloc or u for u in _URL.findall(cell)}


def _passes(metric: str, response: str, gold: str, criterion) -> bool:
    if metric == "number_near":
        r, g = _number(response), _number(gold)
        if r is None or g is None:
            return r is None and g is None and response == gold
        return abs(r - g) <= abs(g) * float(criterion)
    if metric == "url_match":
        return _hosts(response) == _hosts(gold)
    if metric == "in_match":
        return response in gold
    r, g = _float(response), _float(gold)
    return r == g if r is not None and g is not None else response.lower() == gold.lower()


def _steps(pipeline: dict, col: str) -> tuple[list[str], list[str], object]:
    """(preprocess steps, metrics, criterion) of a column; no entry: norm_str, exact_match."""
    spec = pipeline.get(col)
    if spec is None:
        return ["norm_str"], ["exact_match"], None
    return list(spec.get("preprocess") or []), list(spec.get("metric") or ["exact_match"]), spec.get("criterion")


def _check(pipeline: dict) -> None:
    for col in pipeline:
        preprocess, metrics, criterion = _steps(pipeline, col)
        unknown = [s for s in preprocess if s not in PREPROCESS] + [m for m in metrics if m not in METRICS]
        if unknown:
            raise ValueError(f"eval_pipeline[{col!r}]: unknown step(s) {unknown} (preprocess: "
                             f"{', '.join(PREPROCESS)}; metric: {', '.join(METRICS)})")
        if "number_near" in metrics and not isinstance(criterion, (int, float)):
            raise ValueError(f"eval_pipeline[{col!r}]: number_near needs a numeric criterion (the relative "
                             f"tolerance, e.g. 0.1), got {criterion!r}")


def _prepare(rows: Sequence[dict], required: list[str], keys: list[str], pipeline: dict) -> dict[tuple, dict]:
    """Rows by key after preprocessing (steps 2 and 3)."""
    out = {}
    for row in rows:
        cells = {}
        for col in required:
            value = row.get(col)
            cell = "" if value is None else str(value).strip()
            for step in _steps(pipeline, col)[0]:
                if step == "norm_str":
                    cell = norm_str(cell)
                elif step == "extract_number":
                    cell = extract_number(cell)
            cells[col] = cell
        out.setdefault(tuple(norm_str(cells[k]) for k in keys), cells)
    return out


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def score_table(response: Union[str, Sequence[dict]], gold: Sequence[dict], evaluation: dict) -> TableScore:
    """The scores of `response` (the agent's text, or row dicts) against `gold` under a
    WideSearch task's `evaluation` (module docstring)."""
    keys = [norm_column(c) for c in evaluation["unique_columns"]]
    gold = [{norm_column(k): v for k, v in row.items()} for row in gold]
    required = [norm_column(c) for c in evaluation.get("required") or (gold[0] if gold else keys)]
    pipeline = {norm_column(c): spec for c, spec in (evaluation.get("eval_pipeline") or {}).items()}
    missing = [c for c in keys if c not in required] + [c for c in required if any(c not in r for r in gold)]
    if missing:
        raise ValueError(f"columns {missing}: every key column must be required, and every required column "
                         "must be in each gold row")
    _check(pipeline)
    approximated = tuple(c for c in required if {*_steps(pipeline, c)[0], *_steps(pipeline, c)[1]} & {*APPROXIMATED})
    zero = dict(success=0.0, item_precision=0.0, item_recall=0.0, item_f1=0.0, row_precision=0.0,
                row_recall=0.0, row_f1=0.0, approximated=approximated)
    if isinstance(response, str):
        table = parse_markdown_table(response)
        if table is None:
            return TableScore(**zero, note="no markdown table in the response")
        columns, rows = table
    else:
        rows = [{norm_column(k): v for k, v in row.items()} for row in response]
        columns = list(dict.fromkeys(c for row in rows for c in row))
    if set(columns) != set(required):
        return TableScore(**zero, note=f"response columns {sorted(columns)} are not the required {sorted(required)}")
    pred, truth = _prepare(rows, required, keys, pipeline), _prepare(gold, required, keys, pipeline)
    correct_cells = correct_rows = 0
    for key in pred.keys() & truth.keys():
        right = len(keys) + sum(all(_passes(m, pred[key][c], truth[key][c], _steps(pipeline, c)[2])
                                    for m in _steps(pipeline, c)[1]) for c in required if c not in keys)
        correct_cells += right
        correct_rows += right == len(required)
    n_pred, n_gold = len(pred) * len(required), len(truth) * len(required)
    ip, ir = (correct_cells / n_pred if n_pred else 0.0), (correct_cells / n_gold if n_gold else 0.0)
    rp, rr = (correct_rows / len(pred) if pred else 0.0), (correct_rows / len(truth) if truth else 0.0)
    return TableScore(success=float(ip == ir == 1.0), item_precision=ip, item_recall=ir, item_f1=_f1(ip, ir),
                      row_precision=rp, row_recall=rr, row_f1=_f1(rp, rr), approximated=approximated)


__all__ = ["TableScore", "extract_number", "norm_column", "norm_str", "parse_markdown_table", "score_table"]
