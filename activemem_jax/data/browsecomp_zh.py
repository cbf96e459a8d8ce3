"""BrowseComp-ZH as released: `browsecomp-zh-encrypted.xlsx` (or the same table as CSV).

    tasks = load_browsecomp_zh("data/browsecomp-zh-encrypted.xlsx")
    # [{"id": "1", "question": ..., "answers": [...], "topic": ...}, ...]

The release's table has a header row with the columns Topic, Question, Answer and canary
(others are ignored). Each row's Topic, Question and Answer are encrypted as BrowseComp's
are (`loaders.decrypt_browsecomp`: base64, then XOR with the SHA-256 of the password
repeated), the password being that row's own canary cell. `encrypted=False` reads a table
the release's decryption script already decrypted (it keeps the canary column).

Rows are numbered from 1 after the header (the sheet's row number minus 1); a row's
number is its id. A row without a question, an answer or (encrypted) a canary, or one
that does not decrypt to UTF-8, is bad under `bad_rows` (`data/bad_rows.py`: strict stops
naming the file and the row; skip drops it, counted per reason). The topic may be empty.
A header without one of the columns stops the load naming it.
"""

from __future__ import annotations

import csv
import os
from typing import Iterator

from activemem_jax.data.bad_rows import RowSieve
from activemem_jax.data.loaders import decrypt_browsecomp

COLUMNS = ("Topic", "Question", "Answer", "canary")


def _table(path: str) -> Iterator[list]:
    """The rows of the first sheet of an XLSX file, or of a CSV file, header first."""
    if os.path.splitext(path)[1].lower() in (".xlsx", ".xlsm"):
        import openpyxl

        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
        try:
            yield from book.worksheets[0].iter_rows(values_only=True)
        finally:
            book.close()
    else:
        with open(path, newline="", encoding="utf-8-sig") as f:
            yield from csv.reader(f)


def load_browsecomp_zh(path: str, encrypted: bool = True, bad_rows: str = "strict") -> list[dict]:
    """{"id", "question", "answers": [answer], "topic"} per row (module docstring)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: BrowseComp-ZH table not found. Put the release's data/browsecomp-zh-"
                                "encrypted.xlsx there (datasets are never downloaded at run time).")
    sieve = RowSieve(path, bad_rows)
    rows = _table(path)
    header = [str(c).strip() if c is not None else "" for c in next(rows, [])]
    needed = COLUMNS if encrypted else COLUMNS[:3]
    missing = [c for c in needed if c not in header]
    if missing:
        raise KeyError(f"{path}: the header has no column {missing} (has {header}); BrowseComp-ZH's table has "
                       f"the columns {list(needed)}")
    at = {c: header.index(c) for c in needed}
    for i, row in enumerate(rows, 1):
        if not any(v not in (None, "") for v in row):
            continue
        cell = {c: ("" if j >= len(row) or row[j] is None else str(row[j]).strip()) for c, j in at.items()}
        empty = [c for c in needed if c != "Topic" and not cell[c]]
        if empty:
            sieve.bad(i, f"no {empty[0]}", f"{path}: row {i} has no {' and no '.join(empty)}")
            continue
        if encrypted:
            try:
                cell.update({c: decrypt_browsecomp(cell[c], cell["canary"]) for c in COLUMNS[:3] if cell[c]})
            except ValueError as e:
                sieve.bad(i, "cannot be decrypted", f"{path}: row {i} cannot be decrypted with its canary ({e})")
                continue
        sieve.keep(i, {"id": str(i), "question": cell["Question"], "answers": [cell["Answer"]],
                       "topic": cell["Topic"]}, unique_ids=False)  # ids are row numbers
    return sieve.finish()


__all__ = ["COLUMNS", "load_browsecomp_zh"]
