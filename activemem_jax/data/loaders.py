"""Loaders for the papers' datasets from local files, and grain / TFDS pipelines.

Nothing is downloaded: a missing file raises FileNotFoundError saying what to put where.
Every loader returns plain dicts: QA {"id", "question", "answers": [...]}, math
{"id", "question", "answer"}, GAIA {"id", "question", "level", "answer", "file_path"}.
"""

from __future__ import annotations

import base64
import glob
import hashlib
import json
import os
from typing import Iterator, Optional, Sequence

FLASHRAG_DATASETS = ("nq", "hotpotqa", "triviaqa", "popqa", "2wikimultihopqa", "musique", "bamboogle")


def _need(path: str, what: str) -> str:
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: {what} not found. Put the file there (datasets are "
                                "never downloaded at run time).")
    return path


def read_jsonl(path: str, what: str = "JSONL file") -> list[dict]:
    rows = []
    with open(_need(path, what)) as f:
        for line_no, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    raise ValueError(f"{path}:{line_no}: not JSON ({e})") from e
    return rows


def _field(row: dict, key: str, path: str, line: int):
    if key not in row:
        raise KeyError(f"{path}: row {line} has no {key!r} field (has {sorted(row)})")
    return row[key]


def load_flashrag(path: str) -> list[dict]:
    """FlashRAG JSONL (id, question, golden_answers): NQ, HotpotQA, TriviaQA, PopQA, 2Wiki,
    Musique, Bamboogle. Put e.g. `<data>/hotpotqa/dev.jsonl` from FlashRAG's release."""
    out, seen = [], {}
    for i, row in enumerate(read_jsonl(path, "FlashRAG JSONL split"), 1):
        answers = _field(row, "golden_answers", path, i)
        answers = [answers] if isinstance(answers, str) else list(answers or [])
        if not [a for a in answers if isinstance(a, str) and a.strip()]:
            raise ValueError(f"{path}: row {i} has no non-empty golden answer (golden_answers={answers!r}); "
                             "fix or drop the row")
        question = _field(row, "question", path, i)
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"{path}: row {i} has an empty question")
        rid = str(row.get("id", i - 1))
        if rid in seen:
            raise ValueError(f"{path}: row {i} repeats id {rid!r} of row {seen[rid]}; ids must be unique")
        seen[rid] = i
        out.append({"id": rid, "question": question, "answers": [str(a) for a in answers]})
    return out


def load_gsm8k(path: str) -> list[dict]:
    """GSM8K JSONL (question, answer with the final answer after '####')."""
    out = []
    for i, row in enumerate(read_jsonl(path, "GSM8K JSONL (e.g. test.jsonl)"), 1):
        solution = _field(row, "answer", path, i)
        if "####" not in solution:
            raise ValueError(f"{path}: row {i} answer has no '####' final answer")
        final = solution.split("####")[-1].strip().replace(",", "")
        out.append({"id": str(row.get("id", i - 1)), "question": _field(row, "question", path, i),
                    "answer": final, "solution": solution})
    return out


def load_math(path: str) -> list[dict]:
    """MATH: a directory of per-problem JSON files (the original release, searched
    recursively), a JSON list, or JSONL; fields problem, solution (with \\boxed{}), level, type."""
    from activemem_jax.envs.math_env import last_boxed

    _need(path, "MATH data (directory of JSON files, JSON list or JSONL)")
    if os.path.isdir(path):
        rows = []
        for f in sorted(glob.glob(os.path.join(path, "**", "*.json"), recursive=True)):
            with open(f) as fh:
                rows.append({**json.load(fh), "id": os.path.relpath(f, path)})
    elif path.endswith(".jsonl"):
        rows = read_jsonl(path)
    else:
        with open(path) as fh:
            rows = json.load(fh)
    out = []
    for i, row in enumerate(rows):
        answer = row.get("answer") or last_boxed(_field(row, "solution", path, i + 1))
        if answer is None:
            raise ValueError(f"{path}: problem {row.get('id', i)} has no \\boxed{{}} answer")
        out.append({"id": str(row.get("id", row.get("unique_id", i))), "question": row["problem"],
                    "answer": answer, "level": row.get("level"), "type": row.get("type")})
    return out


def load_gaia(directory: str, split_file: Optional[str] = None) -> list[dict]:
    """GAIA: `metadata.jsonl` (or `metadata.parquet`) with task_id, Question, Level,
    Final answer, file_name; attachments sit beside it."""
    candidates = [split_file] if split_file else ["metadata.jsonl", "metadata.parquet"]
    path = next((os.path.join(directory, c) for c in candidates
                 if os.path.exists(os.path.join(directory, c))), None)
    if path is None:
        raise FileNotFoundError(f"{directory}: no metadata.jsonl or metadata.parquet. Put GAIA's "
                                "split folder there (e.g. 2023/validation/ with its attachments).")
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    else:
        rows = read_jsonl(path)
    out = []
    for i, row in enumerate(rows, 1):
        name = row.get("file_name") or ""
        out.append({"id": _field(row, "task_id", path, i), "question": _field(row, "Question", path, i),
                    "level": row.get("Level"), "answer": row.get("Final answer"),
                    "file_path": os.path.join(directory, name) if name else None})
    return out


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
                         qrels_path: Optional[str] = None, canary: Optional[str] = None) -> dict:
    """Decrypted queries (query_id, query, answer, gold_docs, evidence_docs); with `canary`,
    encrypted query/answer fields are decrypted here. Corpus rows: docid, text."""
    queries = []
    for row in read_jsonl(queries_path, "BrowseComp-Plus queries JSONL"):
        q, a = row.get("query"), row.get("answer")
        if canary is not None:
            q, a = decrypt_browsecomp(q, canary), decrypt_browsecomp(a, canary)
        queries.append({"id": str(row.get("query_id")), "question": q, "answers": [a],
                        "gold_docs": row.get("gold_docs", []),
                        "evidence_docs": row.get("evidence_docs", []),
                        "difficulty": row.get("difficulty")})  # a level, where the file has one
    out = {"queries": queries}
    if corpus_path:
        from activemem_jax.data.retrieval import load_corpus

        out["corpus"] = load_corpus(corpus_path)
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
