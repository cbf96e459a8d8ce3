"""BM25 benchmark: bm25s (ours) vs rank-bm25 on the same corpus and queries, same run.

Corpora of 10k and 100k synthetic-world documents; queries are entity names and
questions. Both libraries get the same tokens (bm25s' tokenizer: English stopwords,
Snowball stemming). Prints index build time and queries/s, writes JSON.

    python launch/bench_retrieval.py [--sizes 10000,100000] [--out FILE]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # launch/, configs/

import argparse
import time

import numpy as np

from launch.bench_report import write_json


def corpus_of(n_docs: int):
    from activemem_jax.data import synthetic_world

    docs, seed = [], 0
    while len(docs) < n_docs:
        world = synthetic_world.generate(seed=seed, n_entities=min(10_000, n_docs),
                                         questions_per_entity=0)
        docs += [{**d, "docid": f"{seed}-{d['docid']}"} for d in world.documents]
        seed += 1
    return docs[:n_docs]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--peer-queries", type=int, default=50, help="rank-bm25 is slow: fewer queries")
    ap.add_argument("--out", default="bench_results/retrieval.json")
    args = ap.parse_args()

    import bm25s
    from rank_bm25 import BM25Okapi

    from activemem_jax.data.retrieval import BM25Retriever

    rng = np.random.default_rng(0)
    rows = []
    print(f"{'docs':>7} {'bm25s build s':>13} {'rank_bm25 build s':>17} {'bm25s q/s':>10} "
          f"{'rank_bm25 q/s':>13} {'ratio':>6} {'top1 agree':>10}")
    for n in (int(x) for x in args.sizes.split(",")):
        docs = corpus_of(n)
        picks = rng.choice(n, args.queries)
        queries = [docs[i]["title"] if j % 2 else docs[i]["text"].split(". ")[2] for j, i in enumerate(picks)]

        t0 = time.perf_counter()
        ours = BM25Retriever(docs)
        ours_build = time.perf_counter() - t0
        t0 = time.perf_counter()
        ours_hits = ours.batch_search(queries, k=3)
        ours_qps = len(queries) / (time.perf_counter() - t0)

        tokens = bm25s.tokenize([f"{d['title']} {d['text']}" for d in docs], stopwords="en",
                                stemmer=ours._stemmer, return_ids=False, show_progress=False)
        t0 = time.perf_counter()
        peer = BM25Okapi(tokens, k1=1.5, b=0.75)
        peer_build = time.perf_counter() - t0
        q_tokens = bm25s.tokenize(queries[: args.peer_queries], stopwords="en", stemmer=ours._stemmer,
                                  return_ids=False, show_progress=False)
        t0 = time.perf_counter()
        peer_top = [int(np.argsort(-peer.get_scores(q))[0]) for q in q_tokens]
        peer_qps = len(q_tokens) / (time.perf_counter() - t0)
        index = {d["docid"]: i for i, d in enumerate(docs)}
        agree = float(np.mean([index[h[0]["docid"]] == p for h, p in zip(ours_hits, peer_top)]))
        row = dict(docs=n, bm25s_build_s=ours_build, rank_bm25_build_s=peer_build,
                   bm25s_qps=ours_qps, rank_bm25_qps=peer_qps, ratio=ours_qps / peer_qps,
                   top1_agreement=agree)
        rows.append(row)
        print(f"{n:>7} {ours_build:>13.2f} {peer_build:>17.2f} {ours_qps:>10.0f} {peer_qps:>13.1f} "
              f"{row['ratio']:>6.0f} {agree:>10.2f}")
    write_json(args.out, {"rows": rows})


if __name__ == "__main__":
    main()
