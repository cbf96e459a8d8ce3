"""What a loader does with the bad rows of a real data file: the `bad_rows` policy.

    sieve = RowSieve(path, policy)          # "strict" (the default) or "skip"
    sieve.bad(row, "no non-empty golden answer", "row 7 has no non-empty golden answer ...")
    sieve.keep(row, {"id": ..., ...})        # ids checked for duplicates when unique_ids
    records = sieve.finish()                 # skip: one log line per reason

strict: the first bad row stops the load with the loader's error, which names the file,
the row and what is wrong. skip: a bad row is dropped and counted under its reason; when
the file is read, one warning line per reason gives the count and the first three rows.

Duplicate ids (loaders that promise unique ids): a row with an earlier row's id and the
same content (the same record after loading) is an exact duplicate; skip merges it into
the first (counted, like a dropped row), strict refuses it as before. A row with an
earlier row's id and different content is a conflict and stops the load under both
policies: which of the two is right is not for a loader to guess.

A row number is the row's line in a JSONL file, its position (from 1) in a JSON list or
a Parquet table, or its file name in a directory of per-item files. A file whose every
row is bad is an error under skip too (there is nothing to run on). docs/data_loading.md
says why.
"""

from __future__ import annotations

import logging
from typing import Union

log = logging.getLogger(__name__)

POLICIES = ("strict", "skip")
MERGED = "exact duplicate of an earlier row (same id and content; merged)"
SHOWN = 3  # rows named per reason in the summary
HINT = "config data.bad_rows, or the loader's bad_rows argument"

Row = Union[int, str]


def check_policy(policy, field: str = "bad_rows") -> str:
    """`policy` if it is one of POLICIES, else a ValueError naming `field`."""
    if policy not in POLICIES:
        raise ValueError(f"{field}={policy!r}: use 'strict' (stop at the first bad row, the default) or "
                         "'skip' (drop bad rows, merge exact duplicates, one summary line per reason)")
    return policy


class RowSieve:
    """The rows of one file under a bad-rows policy."""

    def __init__(self, path: str, policy: str = "strict"):
        self.path, self.policy = path, check_policy(policy)
        self.kept: list[dict] = []
        self.dropped: dict[str, list[Row]] = {}  # reason -> rows, in file order
        self._first: dict[str, tuple[Row, dict]] = {}  # id -> (its first row, its record)

    def bad(self, row: Row, reason: str, message: str, error: type = ValueError) -> None:
        """Row `row` is bad. strict: raise `error(message)` (the message names the file,
        the row and what is wrong; the policy's hint is added); skip: count it under
        `reason`, a short phrase the summary prints."""
        if self.policy == "strict":
            raise error(f"{message}. Fix or drop the row, or set bad_rows='skip' ({HINT}) to drop such rows")
        self.dropped.setdefault(reason, []).append(row)

    def keep(self, row: Row, record: dict, unique_ids: bool = True) -> None:
        """Keep `record` (it has an "id"); with unique_ids, a repeated id is merged (an
        exact duplicate, under skip), refused (strict) or a conflict (always an error)."""
        rid = record["id"]
        if unique_ids and rid in self._first:
            first_row, first = self._first[rid]
            if first != record:
                raise ValueError(
                    f"{self.path}: row {row} repeats id {rid!r} of row {first_row} with different content "
                    f"(row {first_row}: {_brief(first)}; row {row}: {_brief(record)}); ids must be unique. "
                    "Fix one of the two rows (bad_rows='skip' merges only identical rows)")
            if self.policy == "strict":
                raise ValueError(f"{self.path}: row {row} repeats id {rid!r} of row {first_row}; ids must be "
                                 f"unique. The two rows are identical: set bad_rows='skip' ({HINT}) to merge them")
            self.dropped.setdefault(MERGED, []).append(row)
            return
        if unique_ids:
            self._first[rid] = (row, record)
        self.kept.append(record)

    def summary(self) -> list[str]:
        """One line per reason: the count and the first rows."""
        lines = []
        for reason, rows in self.dropped.items():
            shown = ", ".join(str(r) for r in rows[:SHOWN]) + (f" and {len(rows) - SHOWN} more"
                                                                 if len(rows) > SHOWN else "")
            verb = "merged" if reason == MERGED else "skipped"
            lines.append(f"{self.path}: {verb} {len(rows)} row{'s' if len(rows) != 1 else ''} "
                         f"({reason}): row{'s' if len(rows) != 1 else ''} {shown}")
        return lines

    def finish(self, kept: int = -1) -> list[dict]:
        """The kept records; skip logs the summary (one warning line per reason), and a
        file with nothing left is an error. kept: the rows a streaming reader yielded
        itself (it keeps none here); -1: the records kept here."""
        lines = self.summary()
        if self.dropped and not (self.kept if kept < 0 else kept):
            raise ValueError(f"{self.path}: every row is bad, nothing to load: " + "; ".join(lines))
        for line in lines:
            log.warning("%s", line)
        return self.kept


def _brief(record: dict) -> str:
    text = repr({k: v for k, v in record.items() if k != "id"})
    return text if len(text) <= 160 else text[:157] + "..."


__all__ = ["MERGED", "POLICIES", "RowSieve", "check_policy"]
