"""Prefill benchmark: our jitted forward vs transformers' PyTorch forward, same weights.

Both load the embedded SmolLM2-135M-Instruct GGUF (f32). For 512-token prompts at batch
1 and 8 it times a full forward (logits at every position, transformers' default) and a
last-token-logits forward (what generation needs), prints tokens/s and the ratio
ours / transformers, and writes JSON.

    python launch/bench_forward.py [--seq 512] [--batches 1,8] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # launch/, configs/

import argparse
import statistics
import time

from launch.bench_report import peak_rss_gib, write_json


def _time(fn, repeats: int) -> tuple[float, float]:
    """(first call seconds, median of `repeats` later calls)."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times)


def bench_ours(tokens_by_batch, repeats):
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from activemem_jax import build, sharding

    t0 = time.perf_counter()
    model = build.model(build.config(model={"path": "embedded", "dtype": "float32", "remat": False}),
                        sharding.make_mesh(devices=jax.devices()[:1]))
    load_s = time.perf_counter() - t0

    def run(state, tokens, last_only):
        m = nnx.merge(model.graphdef, state)
        logits, hidden, _ = m(tokens, return_logits=not last_only)
        return m.lm_logits(hidden[:, -1]) if last_only else logits

    fns = {mode: jax.jit(lambda s, t, _m=mode: run(s, t, _m == "last")) for mode in ("all", "last")}
    out = {}
    for batch, tokens in tokens_by_batch.items():
        dev_tokens = jnp.asarray(tokens)
        for mode, fn in fns.items():
            first, steady = _time(lambda: fn(model.state, dev_tokens).block_until_ready(), repeats)
            out[(batch, mode)] = dict(seconds=steady, compile_s=first - steady)
    return out, load_s


def bench_transformers(tokens_by_batch, repeats):
    import torch
    from transformers import AutoModelForCausalLM

    from activemem_jax.models import embedded_gguf_path

    torch.set_num_threads(os.cpu_count() or 1)
    path = embedded_gguf_path()
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                 dtype=torch.float32).eval()
    load_s = time.perf_counter() - t0
    out = {}
    for batch, tokens in tokens_by_batch.items():
        ids = torch.tensor(tokens, dtype=torch.long)
        for mode in ("all", "last"):
            kwargs = {"logits_to_keep": 1} if mode == "last" else {}

            def call():
                with torch.inference_mode():
                    model(input_ids=ids, use_cache=False, **kwargs)

            first, steady = _time(call, repeats)
            out[(batch, mode)] = dict(seconds=steady, compile_s=0.0)
    return out, load_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="bench_results/forward.json")
    args = ap.parse_args()

    import numpy as np

    rng = np.random.default_rng(0)
    batches = [int(b) for b in args.batches.split(",")]
    tokens_by_batch = {b: rng.integers(3, 49152, (b, args.seq)).astype(np.int32) for b in batches}

    ours, ours_load = bench_ours(tokens_by_batch, args.repeats)
    rss_ours = peak_rss_gib()
    ref, ref_load = bench_transformers(tokens_by_batch, args.repeats)
    rss_all = peak_rss_gib()

    rows = []
    print(f"prefill of {args.seq} tokens, embedded SmolLM2-135M f32, {os.cpu_count()} CPU threads")
    print(f"{'batch':>5} {'logits':>6} {'ours tok/s':>11} {'hf tok/s':>9} {'ratio':>6} {'compile s':>9}")
    for b in batches:
        for mode in ("all", "last"):
            n = b * args.seq
            o, r = ours[(b, mode)], ref[(b, mode)]
            row = dict(batch=b, logits=mode, seq=args.seq, ours_tok_s=n / o["seconds"],
                       transformers_tok_s=n / r["seconds"], ratio=r["seconds"] / o["seconds"],
                       ours_compile_s=o["compile_s"])
            rows.append(row)
            print(f"{b:>5} {mode:>6} {row['ours_tok_s']:>11.0f} {row['transformers_tok_s']:>9.0f} "
                  f"{row['ratio']:>6.2f} {row['ours_compile_s']:>9.1f}")
    print(f"load: ours {ours_load:.1f}s, transformers {ref_load:.1f}s; peak RSS after ours "
          f"{rss_ours:.2f} GiB, after both {rss_all:.2f} GiB")
    result = dict(rows=rows, ours_load_s=ours_load, transformers_load_s=ref_load,
                  peak_rss_gib_ours=rss_ours, peak_rss_gib_total=rss_all)
    write_json(args.out, result)


if __name__ == "__main__":
    main()
