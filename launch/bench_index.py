"""Corpus index benchmark: the streaming BM25 build (`activemem_jax.data.index`) against
bm25s's in-memory build (`BM25Retriever` over the loaded corpus), same generated
passages, same machine, one run; each build in a fresh process so peak RSS is its own.

Reports build time, peak RSS, index size on disk and queries/s (1,000 queries of 3-6
words, top-3, one thread) at each size, and the streaming build extrapolated linearly to
Search-R1's 21M-passage Wikipedia dump.

    python launch/bench_index.py [--sizes 100000,1000000] [--peer-max 1000000] [--out bench_results/index.json]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # launch/, configs/

import argparse
import json
import random
import subprocess
import tempfile

from launch.bench_report import write_json

WIKI_PASSAGES = 21_015_324  # Search-R1's wiki-18 (100-word passages)
CHILD = r"""
import json, resource, sys, time
kind, corpus, out, queries = sys.argv[1:5]
qs = [line.strip() for line in open(queries)]
t0 = time.perf_counter()
if kind == "stream":
    from activemem_jax.data.index import IndexRetriever, build
    build(corpus, out, progress=False)
    built = time.perf_counter() - t0
    r = IndexRetriever(out)
else:
    from activemem_jax.data.retrieval import BM25Retriever, load_corpus
    r = BM25Retriever(load_corpus(corpus))
    built = time.perf_counter() - t0
    r.save(out)
r.batch_search(qs[:10], 3)
t1 = time.perf_counter()
r.batch_search(qs, 3)
qps = len(qs) / (time.perf_counter() - t1)
print(json.dumps({"build_s": built, "qps": qps, "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""


def words(n: int, rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "zen", "dor", "bel", "qua", "fi", "gar", "hul"]
    out = set()
    while len(out) < n:
        out.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(out)


def generate(path: str, n: int, vocab: list[str], seed: int = 0) -> None:
    """n passages of ~100 Zipf-distributed words, with a title, in Search-R1's layout."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.2, size=(n, 100)) - 1, len(vocab) - 1)
    with open(path, "w") as f:
        for i in range(n):
            text = " ".join(vocab[j] for j in ranks[i])
            f.write(json.dumps({"id": str(i), "contents": f'"{vocab[ranks[i, 0]]} {i}"\n{text}'}) + "\n")


def run(kind: str, corpus: str, queries: str) -> dict:
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run([sys.executable, "-c", CHILD, kind, corpus, os.path.join(out, "ix"), queries],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            return {"error": proc.stderr[-1500:]}
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        ix = os.path.join(out, "ix")
        res["disk_gib"] = sum(os.path.getsize(os.path.join(ix, f)) for f in os.listdir(ix)) / 2**30
        return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--peer-max", type=int, default=1_000_000, help="largest size the in-memory peer builds")
    ap.add_argument("--out", default="bench_results/index.json")
    args = ap.parse_args(argv)
    rng = random.Random(0)
    vocab = words(50_000, rng)
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        queries = os.path.join(tmp, "queries.txt")
        with open(queries, "w") as f:
            for _ in range(1000):
                f.write(" ".join(rng.choice(vocab[:5000]) for _ in range(rng.randint(3, 6))) + "\n")
        for n in (int(x) for x in args.sizes.split(",")):
            corpus = os.path.join(tmp, f"corpus-{n}.jsonl")
            generate(corpus, n, vocab)
            row = {"corpus_gib": os.path.getsize(corpus) / 2**30, "stream": run("stream", corpus, queries)}
            if n <= args.peer_max:
                row["in_memory"] = run("memory", corpus, queries)
            res[n] = row
            os.remove(corpus)
            s, m = row["stream"], row.get("in_memory", {})
            print(f"{n:>9,} passages ({row['corpus_gib']:.2f} GiB): streaming build {s.get('build_s', 0):.1f} s, "
                  f"peak {s.get('peak_rss_gib', 0):.2f} GiB, {s.get('qps', 0):.0f} q/s, index {s.get('disk_gib', 0):.2f} GiB"
                  + (f" | in-memory bm25s {m.get('build_s', 0):.1f} s, peak {m.get('peak_rss_gib', 0):.2f} GiB, "
                     f"{m.get('qps', 0):.0f} q/s" if m and "error" not in m else
                     (f" | in-memory: {m['error'][-200:]}" if m else "")))
    sizes = sorted(res)
    hi = sizes[-1]
    lo = sizes[-2] if len(sizes) > 1 else 0

    def extrapolate(key):  # a line through the two largest sizes (a fixed cost plus a per-passage one)
        y_hi = res[hi]["stream"][key]
        y_lo = res[lo]["stream"][key] if lo else 0.0
        return y_hi + (y_hi - y_lo) / (hi - lo) * (WIKI_PASSAGES - hi)

    res["extrapolated_21m"] = {"build_min": extrapolate("build_s") / 60, "peak_rss_gib": extrapolate("peak_rss_gib"),
                               "disk_gib": extrapolate("disk_gib"), "from": [lo, hi]}
    e = res["extrapolated_21m"]
    print(f"extrapolated to {WIKI_PASSAGES:,} passages along the line through {lo:,} and {hi:,}: build "
          f"{e['build_min']:.0f} min, peak RSS {e['peak_rss_gib']:.0f} GiB, index {e['disk_gib']:.0f} GiB on disk")
    write_json(args.out, {str(k): v for k, v in res.items()})


if __name__ == "__main__":
    main()
