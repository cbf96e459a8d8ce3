"""Retrieval over a local corpus: BM25 (bm25s), dense (faiss + sentence-transformers),
and a client for Search-R1-style retrieval servers.

Every retriever returns, per query, a list of {"docid", "title", "text", "score"}.
Documents are {"docid", "title", "text"} (JSONL on disk).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Optional, Sequence

Doc = dict


def load_corpus(path: str, bad_rows: str = "strict") -> list[Doc]:
    """A JSONL corpus of {"docid", "title", "text"} (also accepts "id"/"contents" rows as
    in Search-R1's wiki-18, where contents is '"Title"\\ntext'). bad_rows: see `iter_corpus`."""
    return [doc for _, doc in iter_corpus(path, bad_rows)]


def iter_corpus(path: str, bad_rows: str = "strict"):
    """(line number, normalized document) of each row of a JSONL corpus, read lazily.
    bad_rows "strict": a line that is not a JSON object, or a row with no text, stops the
    read naming the file and the line; "skip": such lines are dropped, with one warning
    line per reason at the end (count, first rows; activemem_jax/data/bad_rows.py)."""
    from activemem_jax.data.bad_rows import RowSieve

    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: corpus not found; write one with "
                                "`python -m activemem_jax.data.synthetic_world --out DIR`")
    sieve, kept = RowSieve(path, bad_rows), 0
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                sieve.bad(line_no, "not JSON", f"{path}:{line_no}: not JSON ({e})")
                continue
            if not isinstance(row, dict):
                sieve.bad(line_no, "not a JSON object", f"{path}:{line_no}: a corpus row must be a JSON object")
                continue
            try:
                doc = normalize_doc(row, f"{path}:{line_no}")
            except ValueError as e:
                sieve.bad(line_no, "no text", str(e))
                continue
            kept += 1
            yield line_no, doc
    sieve.finish(kept)


def normalize_doc(row: dict, where: str = "document") -> Doc:
    if "contents" in row and "text" not in row:
        title, _, text = row["contents"].partition("\n")
        return {"docid": str(row.get("id", row.get("docid"))), "title": title.strip('"'),
                "text": text}
    if "text" not in row:
        raise ValueError(f"{where}: a document needs 'text' (or Search-R1's 'contents')")
    return {"docid": str(row.get("docid", row.get("id"))), "title": row.get("title", ""),
            "text": row["text"]}


def format_docs(docs: Sequence[Doc]) -> str:
    """MEM1 / Search-R1 layout: 'Doc i(Title: ...) text', one per line."""
    return "\n".join(f"Doc {i}(Title: {d['title']}) {d['text']}" for i, d in enumerate(docs, 1))


class BM25Retriever:
    """BM25 (Lucene variant) over title + text with English stopwords and stemming."""

    def __init__(self, documents: Sequence[Doc], k1: float = 1.5, b: float = 0.75,
                 stem: bool = True, _index=None):
        import bm25s

        self.documents = [normalize_doc(d) for d in documents]
        self.k1, self.b, self.stem = k1, b, stem
        self._stemmer = self._make_stemmer(stem)
        if _index is None:
            _index = bm25s.BM25(k1=k1, b=b)
            _index.index(self._tokenize([f"{d['title']} {d['text']}" for d in self.documents]),
                         show_progress=False)
        self._index = _index

    @staticmethod
    def _make_stemmer(stem: bool):
        if not stem:
            return None
        import Stemmer

        return Stemmer.Stemmer("english").stemWords

    def _tokenize(self, texts: list[str]):
        import bm25s

        return bm25s.tokenize(texts, stopwords="en", stemmer=self._stemmer, show_progress=False)

    def search(self, query: str, k: int = 3) -> list[Doc]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Doc]]:
        import bm25s

        k = min(k, len(self.documents))
        if not queries:
            return []
        tokens = bm25s.tokenize(list(queries), stopwords="en", stemmer=self._stemmer,
                                return_ids=False, show_progress=False)
        ids, scores = self._index.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        return [[{**self.documents[int(i)], "score": float(s)} for i, s in zip(row_i, row_s)]
                for row_i, row_s in zip(ids, scores)]

    def save(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self._index.save(directory, show_progress=False)
        with open(os.path.join(directory, "docs.jsonl"), "w") as f:
            for d in self.documents:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
        with open(os.path.join(directory, "retriever.json"), "w") as f:
            json.dump({"kind": "bm25", "k1": self.k1, "b": self.b, "stem": self.stem}, f)

    @classmethod
    def load(cls, directory: str) -> "BM25Retriever":
        import bm25s

        meta_path = os.path.join(directory, "retriever.json")
        if not os.path.exists(meta_path):
            raise FileNotFoundError(f"{directory}: no retriever.json; build the index with "
                                    "BM25Retriever(docs).save(directory)")
        with open(meta_path) as f:
            meta = json.load(f)
        index = bm25s.BM25.load(directory, show_progress=False, verbosity=0)
        return cls(load_corpus(os.path.join(directory, "docs.jsonl")), meta["k1"], meta["b"],
                   meta["stem"], _index=index)


class DenseRetriever:
    """Inner-product search (faiss) over normalized sentence-transformers embeddings.

    `model_dir` is a local sentence-transformers model directory (nothing is downloaded).
    Needs the `dense` extra: faiss-cpu and sentence-transformers.
    """

    def __init__(self, documents: Sequence[Doc], model_dir: str, batch_size: int = 64,
                 _index=None):
        self.documents = [normalize_doc(d) for d in documents]
        self.model_dir = model_dir
        self._model = _load_encoder(model_dir)
        if _index is None:
            import faiss

            vecs = self._encode([f"{d['title']}. {d['text']}" for d in self.documents], batch_size)
            _index = faiss.IndexFlatIP(vecs.shape[1])
            _index.add(vecs)
        self._index = _index

    def _encode(self, texts, batch_size=64):
        import numpy as np

        return np.asarray(self._model.encode(list(texts), batch_size=batch_size,
                                             normalize_embeddings=True, show_progress_bar=False),
                          dtype="float32")

    def search(self, query: str, k: int = 3) -> list[Doc]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Doc]]:
        if not queries:
            return []
        scores, ids = self._index.search(self._encode(queries), min(k, len(self.documents)))
        return [[{**self.documents[int(i)], "score": float(s)} for i, s in zip(ri, rs) if i >= 0]
                for ri, rs in zip(ids, scores)]

    def save(self, directory: str) -> None:
        import faiss

        os.makedirs(directory, exist_ok=True)
        faiss.write_index(self._index, os.path.join(directory, "faiss.index"))
        with open(os.path.join(directory, "docs.jsonl"), "w") as f:
            for d in self.documents:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
        with open(os.path.join(directory, "retriever.json"), "w") as f:
            json.dump({"kind": "dense", "model_dir": os.path.abspath(self.model_dir)}, f)

    @classmethod
    def load(cls, directory: str, model_dir: Optional[str] = None) -> "DenseRetriever":
        import faiss

        with open(os.path.join(directory, "retriever.json")) as f:
            meta = json.load(f)
        index = faiss.read_index(os.path.join(directory, "faiss.index"))
        return cls(load_corpus(os.path.join(directory, "docs.jsonl")),
                   model_dir or meta["model_dir"], _index=index)


def _load_encoder(model_dir: str):
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"{model_dir}: not a local sentence-transformers model directory "
                                "(models are never downloaded at run time)")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise ImportError("DenseRetriever needs the dense extra: pip install 'activemem-jax[dense]'") from e
    return SentenceTransformer(model_dir, device="cpu", local_files_only=True)


class ClosedBook:
    """No retrieval: every search finds nothing (closed-book runs of the QA tasks)."""

    documents: list = []

    def search(self, query: str, k: int = 3) -> list[Doc]:
        return []

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Doc]]:
        return [[] for _ in queries]


class RemoteRetriever:
    """Client of a Search-R1-style retrieval server (`POST {url}/retrieve`), e.g. the E5 +
    wiki-18 servers used by Search-R1 and MEM1, or `activemem_jax.data.retrieval_server`."""

    def __init__(self, url: str, timeout: float = 30.0):
        self.url = url.rstrip("/")
        if not self.url.endswith("/retrieve"):
            self.url += "/retrieve"
        self.timeout = timeout

    def search(self, query: str, k: int = 3) -> list[Doc]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Doc]]:
        body = json.dumps({"queries": list(queries), "topk": k, "return_scores": True}).encode()
        req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                payload = json.loads(resp.read())
        except urllib.error.URLError as e:
            raise ConnectionError(f"retrieval server {self.url} unreachable ({e}); is it running?") from e
        out = []
        for hits in payload["result"]:
            row = []
            for hit in hits:
                doc = hit.get("document", hit) if isinstance(hit, dict) else hit
                row.append({**normalize_doc(doc), "score": float(hit.get("score", 0.0))})
            out.append(row)
        return out


def to_search_r1(doc: Doc) -> dict:
    """A document as Search-R1's servers return it (id, contents, plus title/text)."""
    return {"id": doc["docid"], "contents": f"\"{doc['title']}\"\n{doc['text']}",
            "title": doc["title"], "text": doc["text"]}

