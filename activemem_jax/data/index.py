"""A BM25 index over a corpus too large for memory as Python objects (Search-R1's
Wikipedia dump: about 21M passages), built by streaming, and served with Search-R1's API.

    python -m activemem_jax.data.index build --corpus wiki-18.jsonl --out indexes/wiki18 [--chunk 100000] \
        [--dense /models/all-MiniLM-L6-v2]
    python -m activemem_jax.data.index serve --index indexes/wiki18 --port 8001 [--mode dense]
    python -m activemem_jax.data.index info --index indexes/wiki18

`build` reads the JSONL corpus once, in chunks: rows are {"docid", "title", "text"} or
Search-R1's {"id", "contents": '"Title"\\ntext'}. Each chunk is tokenized exactly as
`BM25Retriever` tokenizes (bm25s, English stopwords, Snowball stemmer) and reduced to
(document, token, count) postings in numpy arrays; the documents go to `docs.jsonl` in
the index directory with a byte-offset table, so a search reads only the documents it
returns. Memory holds the postings (one per distinct token of a passage: 10 bytes each
while streaming, about 22 at the final scoring) and the vocabulary, never the corpus text. The scores are bm25s's own Lucene
BM25 (idf = ln(1 + (N - df + 0.5) / (df + 0.5)), tf / (tf + k1 (1 - b + b dl / avgdl))),
saved in bm25s's format: `IndexRetriever` loads the index with bm25s and ranks exactly as
an in-memory `BM25Retriever` over the same documents does (tested).

Data problems stop the build with the file and line: a line that is not JSON, a row
without text, a docid seen before. Rows without a title are counted and reported. An
index records how it tokenizes; loading it with another stemming setting is refused.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Optional, Sequence

import numpy as np

from activemem_jax.data.retrieval import iter_corpus

FORMAT = "activemem-bm25-stream/1"


def _tokenize(texts: Sequence[str], stem: bool) -> list[list[str]]:
    import bm25s

    stemmer = None
    if stem:
        import Stemmer

        stemmer = Stemmer.Stemmer("english").stemWords
    return bm25s.tokenize(list(texts), stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)


def build(corpus: str, out: str, chunk: int = 100_000, stem: bool = True, k1: float = 1.5, b: float = 0.75,
          progress: bool = True, dense: str = "", dense_batch: int = 64, bad_rows: str = "strict") -> dict:
    """Stream `corpus` into a BM25 index in `out` (and, with `dense` = a local
    sentence-transformers directory, a faiss inner-product index of the normalized
    embeddings beside it, chunk by chunk). bad_rows: `retrieval.iter_corpus`'s policy
    (a repeated docid stays an error either way). Returns the build's statistics."""
    import bm25s
    from rich.progress import BarColumn, Progress, TextColumn

    encoder = faiss_index = None
    if dense:
        import faiss

        from activemem_jax.data.retrieval import _load_encoder

        encoder = _load_encoder(dense)

    os.makedirs(out, exist_ok=True)
    t0 = time.perf_counter()
    vocab: dict[str, int] = {}
    docs_p, toks_p, tfs_p, lengths, offsets = [], [], [], [], []
    seen: dict[str, int] = {}
    untitled = 0
    n = 0
    size = os.path.getsize(corpus) if os.path.exists(corpus) else 0

    def flush(batch: list[dict]):
        nonlocal n, faiss_index
        if encoder is not None:
            vecs = np.asarray(encoder.encode([f"{d['title']}. {d['text']}" for d in batch], batch_size=dense_batch,
                                             normalize_embeddings=True, show_progress_bar=False), np.float32)
            if faiss_index is None:
                faiss_index = faiss.IndexFlatIP(vecs.shape[1])
            faiss_index.add(vecs)
        for d_tokens in _tokenize([f"{d['title']} {d['text']}" for d in batch], stem):
            ids = np.fromiter((vocab.setdefault(t, len(vocab)) for t in (d_tokens or [""])), np.int64)
            uniq, counts = np.unique(ids, return_counts=True)
            docs_p.append(np.full(len(uniq), n, np.int32))
            toks_p.append(uniq.astype(np.int32))
            tfs_p.append(counts.astype(np.uint16 if counts.max() < 65535 else np.float32))
            lengths.append(len(ids))
            n += 1

    with open(os.path.join(out, "docs.jsonl"), "wb") as store, \
            Progress(TextColumn("indexing"), BarColumn(), TextColumn("{task.completed:,.0f} documents"),
                     disable=not progress, transient=True) as bar:
        task = bar.add_task("index", total=None)
        batch: list[dict] = []
        for line_no, doc in iter_corpus(corpus, bad_rows):
            if doc["docid"] in seen:
                raise ValueError(f"{corpus}:{line_no}: docid {doc['docid']!r} was already used at line "
                                 f"{seen[doc['docid']]}; docids must be unique")
            seen[doc["docid"]] = line_no
            untitled += not doc["title"]
            offsets.append(store.tell())
            store.write((json.dumps(doc, ensure_ascii=False) + "\n").encode("utf-8"))
            batch.append(doc)
            if len(batch) >= chunk:
                flush(batch)
                bar.update(task, completed=n)
                batch = []
        if batch:
            flush(batch)
        offsets.append(store.tell())
    if n == 0:
        raise ValueError(f"{corpus}: no documents")
    # the postings, scored in place (about 22 bytes per posting at the peak)
    doc_idx = np.concatenate(docs_p)
    del docs_p
    tok_idx = np.concatenate(toks_p)
    del toks_p
    scores = np.concatenate(tfs_p).astype(np.float32)  # tf, then the score
    del tfs_p
    dl = np.asarray(lengths, np.float32)
    counts = np.bincount(tok_idx, minlength=len(vocab))
    df = counts.astype(np.float64)
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)
    norm = dl[doc_idx]
    norm *= k1 * b / dl.mean()
    norm += k1 * (1 - b)
    norm += scores
    scores /= norm  # tf / (tf + k1 (1 - b + b dl / avgdl))
    del norm
    scores *= idf[tok_idx]
    # CSC: by token (column), then document; the postings are already in document order
    order = np.argsort(tok_idx, kind="stable")
    del tok_idx
    indptr = np.zeros(len(vocab) + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    index = bm25s.BM25(k1=k1, b=b, method="lucene")
    index.scores = {"data": scores[order], "indices": doc_idx[order], "indptr": indptr, "num_docs": n}
    del order, doc_idx
    index.vocab_dict = vocab
    index.nonoccurrence_array = None  # Lucene BM25 scores absent tokens 0
    index.save(out, show_progress=False)
    np.save(os.path.join(out, "offsets.npy"), np.asarray(offsets, np.int64))
    if faiss_index is not None:
        faiss.write_index(faiss_index, os.path.join(out, "faiss.index"))
    stats = {"format": FORMAT, "kind": "bm25-stream", "k1": k1, "b": b, "stem": stem, "stopwords": "en",
             "bm25s": bm25s.__version__, "documents": n, "vocabulary": len(vocab), "postings": int(indptr[-1]),
             "untitled": untitled, "corpus": os.path.abspath(corpus), "corpus_bytes": size,
             "dense": {"model_dir": os.path.abspath(dense), "dim": faiss_index.d} if faiss_index is not None else None,
             "build_s": round(time.perf_counter() - t0, 2)}
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(stats, f, indent=1)
    return stats


class DocStore:
    """The index's documents, read from disk by position."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, "docs.jsonl")
        self.offsets = np.load(os.path.join(directory, "offsets.npy"), mmap_mode="r")
        self._file = open(self.path, "rb")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> dict:
        start, end = int(self.offsets[i]), int(self.offsets[i + 1])
        self._file.seek(start)
        return json.loads(self._file.read(end - start))


class IndexRetriever:
    """search / batch_search over an index `build` wrote (the BM25Retriever interface).
    mode "bm25", or "dense" for an index built with `dense` (its encoder from the model
    directory recorded at build time, or `model_dir`)."""

    def __init__(self, directory: str, stem: Optional[bool] = None, mode: str = "bm25",
                 model_dir: Optional[str] = None):
        import bm25s

        meta_path = os.path.join(directory, "index.json")
        if not os.path.exists(meta_path):
            raise FileNotFoundError(f"{directory}: no index.json; build the index with "
                                    f"`python -m activemem_jax.data.index build --corpus FILE --out {directory}`")
        with open(meta_path) as f:
            self.meta = json.load(f)
        if self.meta.get("format") != FORMAT:
            raise ValueError(f"{directory}: index format {self.meta.get('format')!r}, this code reads {FORMAT!r}; "
                             "rebuild it")
        if stem is not None and stem != self.meta["stem"]:
            raise ValueError(f"{directory}: the index was built with stem={self.meta['stem']}; queries tokenized "
                             f"with stem={stem} would not match its vocabulary. Load it with its own setting or "
                             "rebuild it")
        built, here = self.meta.get("bm25s", "?").split(".")[:2], bm25s.__version__.split(".")[:2]
        if built != here:
            raise ValueError(f"{directory}: built with bm25s {self.meta.get('bm25s')}, loaded with {bm25s.__version__}; "
                             "its tokenizer may split words differently. Rebuild the index, or install the "
                             "version it was built with")
        if mode not in ("bm25", "dense"):
            raise ValueError(f"mode={mode!r}: bm25 or dense")
        self.stem, self.mode = self.meta["stem"], mode
        self._index = bm25s.BM25.load(directory, show_progress=False, verbosity=0)
        if mode == "dense":
            if not self.meta.get("dense"):
                raise ValueError(f"{directory}: built without a dense index; rebuild with --dense MODEL_DIR")
            import faiss

            from activemem_jax.data.retrieval import _load_encoder

            self._encoder = _load_encoder(model_dir or self.meta["dense"]["model_dir"])
            self._faiss = faiss.read_index(os.path.join(directory, "faiss.index"))
        self.documents = DocStore(directory)
        if len(self.documents) != self.meta["documents"]:
            raise ValueError(f"{directory}: docs.jsonl has {len(self.documents)} documents, the index "
                             f"{self.meta['documents']}; the index directory is incomplete, rebuild it")

    def search(self, query: str, k: int = 3) -> list[dict]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[dict]]:
        if not queries:
            return []
        k = min(k, len(self.documents))
        if self.mode == "dense":
            vecs = np.asarray(self._encoder.encode(list(queries), normalize_embeddings=True,
                                                   show_progress_bar=False), np.float32)
            scores, ids = self._faiss.search(vecs, k)
            return [[{**self.documents[int(i)], "score": float(s)} for i, s in zip(ri, rs) if i >= 0]
                    for ri, rs in zip(ids, scores)]
        tokens = _tokenize(queries, self.stem)
        ids, scores = self._index.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        return [[{**self.documents[int(i)], "score": float(s)} for i, s in zip(row_i, row_s)]
                for row_i, row_s in zip(ids, scores)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="stream a JSONL corpus into a BM25 index")
    b.add_argument("--corpus", required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--chunk", type=int, default=100_000, help="documents tokenized at a time")
    b.add_argument("--no-stem", action="store_true")
    b.add_argument("--bad-rows", default="strict", choices=("strict", "skip"),
                   help="skip: drop corpus lines that are not JSON objects or have no text (one line per reason)")
    b.add_argument("--dense", default="", help="also a faiss index, with this local sentence-transformers directory")
    s = sub.add_parser("serve", help="serve an index with Search-R1's /retrieve API")
    s.add_argument("--index", required=True)
    s.add_argument("--mode", default="bm25", choices=("bm25", "dense"))
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8001)
    i = sub.add_parser("info", help="what an index holds")
    i.add_argument("--index", required=True)
    args = ap.parse_args(argv)
    if args.command == "build":
        print(json.dumps(build(args.corpus, args.out, args.chunk, stem=not args.no_stem, dense=args.dense,
                                    bad_rows=args.bad_rows), indent=1))
    elif args.command == "info":
        print(json.dumps(IndexRetriever(args.index).meta, indent=1))
    else:
        import uvicorn

        from activemem_jax.data.retrieval_server import make_app

        retriever = IndexRetriever(args.index, mode=args.mode)
        print(f"serving {len(retriever.documents):,} documents on http://{args.host}:{args.port}/retrieve", flush=True)
        uvicorn.run(make_app(retriever), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
