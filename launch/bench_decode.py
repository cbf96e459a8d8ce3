"""Decode benchmark: our engine vs transformers' `generate` on the embedded model (f32),
same prompts, same machine, one run.

Reports batch-1 decode tok/s and time to first token, aggregate tok/s with 16
concurrent requests (transformers: one batch of 16), the prefix-cache speedup of a
repeated 1,000-token prefix, and peak RSS. Compiles are warmed up before timing.

    python launch/bench_decode.py [--new-tokens 64] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import time

from activemem_jax.bench_report import peak_rss_gib, write_json


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--concurrent", type=int, default=16)
    ap.add_argument("--out", default="bench_results/decode.json")
    args = ap.parse_args()
    n_new, conc = args.new_tokens, args.concurrent

    import jax
    import torch
    from transformers import AutoModelForCausalLM

    from activemem_jax import sharding
    from activemem_jax.engine import Engine, SamplingParams
    from activemem_jax.models import embedded_gguf_path, load_pretrained

    model = load_pretrained("embedded", mesh=sharding.make_mesh(devices=jax.devices()[:1]))
    tok = model.tokenizer
    question = [{"role": "user", "content": "Write a short story about a lighthouse keeper who finds a map."}]
    prompt = model.encode_chat(question)
    prompts = [model.encode_chat([{"role": "user", "content": f"Tell me fact number {i} about the ocean."}])
               for i in range(conc)]
    greedy = SamplingParams(temperature=0, max_tokens=n_new, ignore_eos=True)
    res = {"prompt_tokens": len(prompt), "new_tokens": n_new, "concurrent": conc}

    # ---------------------------------------------------------------- ours, batch 1
    with Engine(model, max_slots=1, max_len=2048) as eng:
        for _ in range(2):  # the first pass compiles every shape the second one times
            t0 = time.perf_counter()
            handle = eng.submit(prompt, greedy)
            first = None
            for delta in handle:
                if first is None and delta.token_ids:
                    first = time.perf_counter() - t0
            total = time.perf_counter() - t0
            eng.generate([[7] + prompt], SamplingParams(temperature=0, max_tokens=1))  # no reuse
        res["ours_ttft_s"] = first
        res["ours_b1_tok_s"] = (n_new - 1) / (total - first)
        # prefix cache: a 1,000-token prefix, cold vs reused (second pass timed)
        one = SamplingParams(temperature=0, max_tokens=1)
        for first_token, word in ((100, "alpha"), (101, "omega")):  # distinct first token: no reuse
            filler = " ".join(f"{word}{i}" for i in range(600))
            long_a = [first_token] + tok(f"Background: {filler}\nQuestion: what comes first?")["input_ids"][:999]
            t0 = time.perf_counter()
            eng.generate([long_a], one)
            res["prefix_cold_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            hot = eng.generate([long_a[:-1] + [long_a[-1] + 1]], one)[0]
            res["prefix_reused_s"] = time.perf_counter() - t0
        res["prefix_cached_tokens"] = hot.cached_tokens
        res["prefix_speedup"] = res["prefix_cold_s"] / res["prefix_reused_s"]
    # ---------------------------------------------------------------- ours, concurrent
    with Engine(model, max_slots=conc, max_len=1024) as eng:
        eng.generate(prompts, greedy)  # compile + warm
        t0 = time.perf_counter()
        outs = eng.generate([p + [13] for p in prompts], greedy)
        dt = time.perf_counter() - t0
        res["ours_concurrent_tok_s"] = sum(o.completion_tokens for o in outs) / dt
    res["rss_gib_ours"] = peak_rss_gib()

    # ---------------------------------------------------------------- transformers
    torch.set_num_threads(os.cpu_count() or 1)
    path = embedded_gguf_path()
    hf = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                              dtype=torch.float32).eval()

    def hf_generate(batch, new):
        width = max(len(p) for p in batch)
        ids = torch.tensor([[2] * (width - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        with torch.inference_mode():
            return hf.generate(ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                               do_sample=False, pad_token_id=2)

    hf_generate([prompt], 2)
    t0 = time.perf_counter()
    hf_generate([prompt], 1)
    res["hf_ttft_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    hf_generate([prompt], n_new)
    res["hf_b1_tok_s"] = (n_new - 1) / (time.perf_counter() - t0 - res["hf_ttft_s"])
    t0 = time.perf_counter()
    hf_generate(prompts, n_new)
    res["hf_batch_tok_s"] = conc * n_new / (time.perf_counter() - t0)
    res["rss_gib_total"] = peak_rss_gib()

    res["ratio_b1"] = res["ours_b1_tok_s"] / res["hf_b1_tok_s"]
    res["ratio_concurrent"] = res["ours_concurrent_tok_s"] / res["hf_batch_tok_s"]
    print(f"embedded SmolLM2-135M f32, {os.cpu_count()} CPU threads, prompt {len(prompt)} tokens, "
          f"{n_new} new tokens")
    print(f"{'':28} {'ours':>10} {'transformers':>13} {'ratio':>6}")
    print(f"{'batch-1 decode tok/s':28} {res['ours_b1_tok_s']:>10.1f} {res['hf_b1_tok_s']:>13.1f} "
          f"{res['ratio_b1']:>6.2f}")
    print(f"{'time to first token s':28} {res['ours_ttft_s']:>10.3f} {res['hf_ttft_s']:>13.3f}")
    print(f"{f'{conc} concurrent tok/s':28} {res['ours_concurrent_tok_s']:>10.1f} {res['hf_batch_tok_s']:>13.1f} "
          f"{res['ratio_concurrent']:>6.2f}")
    print(f"prefix reuse ({res['prefix_cached_tokens']} of 1000 tokens cached): cold "
          f"{res['prefix_cold_s']:.3f}s, reused {res['prefix_reused_s']:.3f}s, "
          f"speedup {res['prefix_speedup']:.1f}x")
    print(f"peak RSS: after ours {res['rss_gib_ours']:.2f} GiB, after both {res['rss_gib_total']:.2f} GiB")
    write_json(args.out, res)


if __name__ == "__main__":
    main()
