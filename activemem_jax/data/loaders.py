"""Loaders for the papers' datasets from local files, and grain / TFDS pipelines.

Nothing is downloaded: a missing file raises FileNotFoundError saying what to put where.
Every loader returns plain dicts: QA {"id", "question", "answers": [...]}, math
{"id", "question", "answer"}, GAIA {"id", "question", "level", "answer", "file_path"}.
Each takes `bad_rows`: "strict" (the default) stops at the first bad row, naming the file,
the row and what is wrong; "skip" drops bad rows and logs one line per reason
(`data/bad_rows.py`, docs/data_loading.md).
"""

from __future__ import annotations

import base64
import glob
import hashlib
import json
import os
from typing import Iterator, Optional, Sequence

from activemem_jax.data.bad_rows import RowSieve
from activemem_jax.metrics import last_boxed

FLASHRAG_DATASETS = ("nq", "hotpotqa", "triviaqa", "popqa", "2wikimultihopqa", "musique", "bamboogle")


def _need(path: str, what: str) -> str:
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: {what} not found. Put the file there (datasets are "
                                "never downloaded at run time).")
    return path


def read_jsonl(path: str, what: str = "JSONL file") -> list[dict]:
    """The rows of a JSONL file; a line that is not JSON names the file and the line."""
    return [row for _, row in numbered_rows(path, what, RowSieve(path))]


def numbered_rows(path: str, what: str, sieve: RowSieve) -> Iterator[tuple[int, dict]]:
    """(line number, row) of each JSON object in a JSONL file, read lazily (so bad rows
    reach the sieve in file order); a line that is not one is bad under `sieve`'s policy
    (strict: an error naming the file and the line)."""
    with open(_need(path, what)) as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                sieve.bad(line_no, "not JSON", f"{path}:{line_no}: not JSON ({e})")
                continue
            if not isinstance(row, dict):
                sieve.bad(line_no, "not a JSON object", f"{path}:{line_no}: not a JSON object "
                                                        f"(a {type(row).__name__})")
                continue
            yield line_no, row


class _Missing(Exception):
    """A row lacks a field (already reported to the sieve under skip)."""


def _field(row: dict, key: str, path: str, line, sieve: RowSieve):
    """row[key]; a missing key is bad under the sieve's policy (strict: a KeyError naming
    the file, the row and the fields it has)."""
    if key not in row:
        sieve.bad(line, f"no {key!r} field", f"{path}: row {line} has no {key!r} field (has {sorted(row)})", KeyError)
        raise _Missing(key)
    return row[key]


def load_flashrag(path: str, bad_rows: str = "strict") -> list[dict]:
    """FlashRAG JSONL (id, question, golden_answers): NQ, HotpotQA, TriviaQA, PopQA, 2Wiki,
    Musique, Bamboogle. Put e.g. `<data>/hotpotqa/dev.jsonl` from FlashRAG's release.
    Ids are unique; bad_rows (`data.bad_rows`): "strict" stops at the first bad row,
    "skip" drops bad rows and merges exact duplicates (data/bad_rows.py)."""
    sieve = RowSieve(path, bad_rows)
    for k, (i, row) in enumerate(numbered_rows(path, "FlashRAG JSONL split", sieve)):
        try:
            answers = _field(row, "golden_answers", path, i, sieve)
            question = _field(row, "question", path, i, sieve)
        except _Missing:
            continue
        answers = [answers] if isinstance(answers, str) else list(answers or [])
        if not [a for a in answers if isinstance(a, str) and a.strip()]:
            sieve.bad(i, "no non-empty golden answer",
                      f"{path}: row {i} has no non-empty golden answer (golden_answers={answers!r})")
            continue
        if not isinstance(question, str) or not question.strip():
            sieve.bad(i, "empty question", f"{path}: row {i} has an empty question ({question!r})")
            continue
        rid = str(row.get("id", k))  # no id: the row's position
        sieve.keep(i, {"id": rid, "question": question, "answers": [str(a) for a in answers]})
    return sieve.finish()


def load_gsm8k(path: str, bad_rows: str = "strict") -> list[dict]:
    """GSM8K JSONL (question, answer with the final answer after '####')."""
    sieve = RowSieve(path, bad_rows)
    for k, (i, row) in enumerate(numbered_rows(path, "GSM8K JSONL (e.g. test.jsonl)", sieve)):
        try:
            solution = _field(row, "answer", path, i, sieve)
            question = _field(row, "question", path, i, sieve)
        except _Missing:
            continue
        if not isinstance(solution, str) or "####" not in solution:
            sieve.bad(i, "no '####' final answer", f"{path}: row {i} answer has no '####' final answer")
            continue
        final = solution.split("####")[-1].strip().replace(",", "")
        sieve.keep(i, {"id": str(row.get("id", k)), "question": question, "answer": final,
                       "solution": solution}, unique_ids=False)
    return sieve.finish()


def load_math(path: str, bad_rows: str = "strict") -> list[dict]:
    """MATH: a directory of per-problem JSON files (the original release, searched
    recursively), a JSON list, or JSONL; fields problem, solution (with \\boxed{}), level, type."""
    _need(path, "MATH data (directory of JSON files, JSON list or JSONL)")
    sieve = RowSieve(path, bad_rows)
    if os.path.isdir(path):
        rows = []
        for f in sorted(glob.glob(os.path.join(path, "**", "*.json"), recursive=True)):
            name = os.path.relpath(f, path)
            try:
                with open(f) as fh:
                    rows.append((name, {**json.load(fh), "id": name}))
            except (ValueError, TypeError) as e:  # not JSON, or not an object
                sieve.bad(name, "not a JSON object", f"{path}: row {name} is not a JSON object ({e})")
    elif path.endswith(".jsonl"):
        rows = numbered_rows(path, "MATH JSONL", sieve)
    else:
        with open(path) as fh:
            rows = list(enumerate(json.load(fh), 1))
    for i, (row_no, row) in enumerate(rows):
        if not isinstance(row, dict):
            sieve.bad(row_no, "not a JSON object", f"{path}: row {row_no} is not a JSON object ({row!r:.80})")
            continue
        try:
            problem = _field(row, "problem", path, row_no, sieve)
            answer = row.get("answer") or last_boxed(_field(row, "solution", path, row_no, sieve))
        except _Missing:
            continue
        if answer is None:
            sieve.bad(row_no, "no \\boxed{} answer",
                      f"{path}: row {row_no} (problem {row.get('id', i)}) has no \\boxed{{}} answer")
            continue
        sieve.keep(row_no, {"id": str(row.get("id", row.get("unique_id", i))), "question": problem,
                            "answer": answer, "level": row.get("level"), "type": row.get("type"),
                            "solution": row.get("solution") or ""},
                   unique_ids=False)
    return sieve.finish()


def load_gaia(directory: str, split_file: Optional[str] = None, bad_rows: str = "strict") -> list[dict]:
    """GAIA: `metadata.jsonl` (or `metadata.parquet`) with task_id, Question, Level,
    Final answer, file_name; attachments sit beside it."""
    candidates = [split_file] if split_file else ["metadata.jsonl", "metadata.parquet"]
    path = next((os.path.join(directory, c) for c in candidates
                 if os.path.exists(os.path.join(directory, c))), None)
    if path is None:
        raise FileNotFoundError(f"{directory}: no metadata.jsonl or metadata.parquet. Put GAIA's "
                                "split folder there (e.g. 2023/validation/ with its attachments).")
    sieve = RowSieve(path, bad_rows)
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        rows = list(enumerate(pq.read_table(path).to_pylist(), 1))
    else:
        rows = numbered_rows(path, "GAIA metadata", sieve)
    for i, row in rows:
        try:
            tid, question = _field(row, "task_id", path, i, sieve), _field(row, "Question", path, i, sieve)
        except _Missing:
            continue
        name = row.get("file_name") or ""
        sieve.keep(i, {"id": tid, "question": question, "level": row.get("Level"), "answer": row.get("Final answer"),
                       "file_path": os.path.join(directory, name) if name else None}, unique_ids=False)
    return sieve.finish()


# ----------------------------------------------------------------------------- BrowseComp-Plus
def _keystream(password: str, length: int) -> bytes:
    digest = hashlib.sha256(password.encode()).digest()
    return (digest * (length // len(digest) + 1))[:length]


def encrypt_browsecomp(plaintext: str, password: str) -> str:
    data = plaintext.encode()
    return base64.b64encode(bytes(a ^ b for a, b in zip(data, _keystream(password, len(data))))).decode()


def decrypt_browsecomp(ciphertext_b64: str, password: str) -> str:
    """Undo the release's encryption: base64, then XOR with SHA-256(canary) repeated."""
    data = base64.b64decode(ciphertext_b64)
    plain = bytes(a ^ b for a, b in zip(data, _keystream(password, len(data))))
    try:
        return plain.decode()
    except UnicodeDecodeError as e:
        raise ValueError("decryption gave invalid UTF-8: wrong canary string?") from e


def read_qrels(path: str) -> dict[str, dict[str, int]]:
    """TREC qrels: `qid 0 docid relevance` per line."""
    qrels: dict[str, dict[str, int]] = {}
    with open(_need(path, "TREC qrels file")) as f:
        for line_no, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise ValueError(f"{path}:{line_no}: expected 'qid 0 docid relevance'")
            qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
    return qrels


def load_browsecomp_plus(queries_path: str, corpus_path: Optional[str] = None,
                         qrels_path: Optional[str] = None, canary: Optional[str] = None,
                         bad_rows: str = "strict") -> dict:
    """Decrypted queries (query_id, query, answer, gold_docs, evidence_docs); with `canary`,
    encrypted query/answer fields are decrypted here. Corpus rows: docid, text. bad_rows
    applies to the queries file (a wrong canary fails every row: an error either way)."""
    sieve = RowSieve(queries_path, bad_rows)
    for i, row in numbered_rows(queries_path, "BrowseComp-Plus queries JSONL", sieve):
        try:
            qid = _field(row, "query_id", queries_path, i, sieve)
            q, a = _field(row, "query", queries_path, i, sieve), _field(row, "answer", queries_path, i, sieve)
        except _Missing:
            continue
        if canary is not None:
            try:
                q, a = decrypt_browsecomp(q, canary), decrypt_browsecomp(a, canary)
            except (ValueError, TypeError) as e:
                sieve.bad(i, "cannot be decrypted", f"{queries_path}: row {i} (query_id {qid!r}) cannot be "
                                                     f"decrypted ({e})")
                continue
        sieve.keep(i, {"id": str(qid), "question": q, "answers": [a],
                       "gold_docs": row.get("gold_docs", []),
                       "evidence_docs": row.get("evidence_docs", []),
                       "difficulty": row.get("difficulty")}, unique_ids=False)  # a level, where the file has one
    queries = sieve.finish()
    out = {"queries": queries}
    if corpus_path:
        from activemem_jax.data.retrieval import load_corpus

        out["corpus"] = load_corpus(corpus_path, bad_rows)
    if qrels_path:
        out["qrels"] = read_qrels(qrels_path)
    return out


# ----------------------------------------------------------------------------- pipelines
def grain_dataset(records: Sequence[dict], batch_size: int, seed: int = 0, shuffle: bool = True,
                  process_index: int = 0, process_count: int = 1, drop_remainder: bool = False):
    """A grain MapDataset over records: shuffled with `seed`, this process's shard
    (records i with i % process_count == process_index), batched into lists of dicts."""
    import grain

    if not 0 <= process_index < process_count:
        raise ValueError(f"process_index={process_index} not in [0, {process_count})")
    ds = grain.MapDataset.source(list(records))
    if shuffle:
        ds = ds.shuffle(seed=seed)
    ds = ds[process_index::process_count]
    return ds.batch(batch_size, drop_remainder=drop_remainder, batch_fn=list)


def grain_iterator(records: Sequence[dict], batch_size: int, **kwargs) -> Iterator:
    """A checkpointable iterator (`get_state` / `set_state`) over `grain_dataset` batches."""
    return iter(grain_dataset(records, batch_size, **kwargs).to_iter_dataset())


def load_tfds(name: str, split: str, data_dir: str):
    """A TFDS dataset prepared under `data_dir` (array_record format), read without
    TensorFlow through `tfds.data_source`."""
    if not os.path.isdir(os.path.join(data_dir, name)):
        raise FileNotFoundError(f"{data_dir}/{name}: no prepared TFDS dataset; prepare it on a "
                                "machine with internet and copy the folder here")
    import tensorflow_datasets as tfds

    return tfds.data_source(name, split=split, data_dir=data_dir, download=False)
