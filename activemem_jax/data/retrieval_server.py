"""A retrieval HTTP server speaking Search-R1's API, over a local BM25 or dense index.

    POST /retrieve {"queries": [...], "topk": 3, "return_scores": true}
      -> {"result": [[{"document": {"id", "contents", "title", "text"}, "score": s}, ...]]}

    python -m activemem_jax.data.retrieval_server --corpus data/world/corpus.jsonl --port 8001
"""

from __future__ import annotations

import argparse
from typing import Optional

from fastapi import FastAPI
from pydantic import BaseModel, Field

from activemem_jax.data.retrieval import BM25Retriever, DenseRetriever, load_corpus, to_search_r1

MAX_QUERIES, MAX_TOPK = 1024, 100


class RetrieveRequest(BaseModel):
    queries: list[str] = Field(..., max_length=MAX_QUERIES)
    topk: Optional[int] = Field(3, ge=1, le=MAX_TOPK)
    return_scores: bool = False


def make_app(retriever) -> FastAPI:
    app = FastAPI(title="activemem-jax retrieval")

    @app.post("/retrieve")
    def retrieve(req: RetrieveRequest):
        hits = retriever.batch_search(req.queries, req.topk or 3)
        if req.return_scores:
            return {"result": [[{"document": to_search_r1(d), "score": d["score"]} for d in row]
                               for row in hits]}
        return {"result": [[to_search_r1(d) for d in row] for row in hits]}

    @app.get("/health")
    def health():
        return {"status": "ok", "documents": len(retriever.documents)}

    return app


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", help="JSONL corpus; a BM25 index is built in memory")
    src.add_argument("--index", help="a directory saved by BM25Retriever/DenseRetriever.save")
    ap.add_argument("--bad-rows", default="strict", choices=("strict", "skip"),
                    help="with --corpus: drop bad corpus lines (one line per reason) instead of stopping")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8001)
    args = ap.parse_args(argv)
    if args.corpus:
        retriever = BM25Retriever(load_corpus(args.corpus, args.bad_rows))
    else:
        import json
        import os

        with open(os.path.join(args.index, "retriever.json")) as f:
            kind = json.load(f)["kind"]
        retriever = (BM25Retriever if kind == "bm25" else DenseRetriever).load(args.index)
    import uvicorn

    uvicorn.run(make_app(retriever), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
