"""Decode benchmark: our engine vs transformers' `generate` on the embedded model, same
prompts, same machine, one run.

Our engine runs three times: float32 weights; bfloat16 weights with float32 activations
(`load_pretrained(..., dtype="bfloat16", activation_dtype="float32")`); and int8 weights
with W8A8 matmuls (`quant="int8"`, see `models/quant.py`). transformers runs in float32
and in bfloat16. With llama-cpp-python installed, llama.cpp runs the same GGUF file too.

Reports batch-1 decode tok/s and time to first token, aggregate tok/s with 16
concurrent requests (transformers: one batch of 16), the prefix-cache speedup of a
repeated 1,000-token prefix, the host time per token spent detokenizing a 1,024-token
response (incremental vs re-decoding it all, as the engine once did), and peak RSS. Compiles are warmed up before timing.

    python launch/bench_decode.py [--new-tokens 64] [--concurrent 16] [--out FILE]
    python launch/bench_decode.py --detokenize-only   # host cost per token of detokenizing, old vs new
    python launch/bench_decode.py --constrained-only  # 16 slots, half under a JSON schema vs none

A paper-size model on a lent GPU or a TPU VM: the config's engine prefill and decode steps
(every slot, attending to its whole KV bucket) at its slots, length, mesh and rules,
random weights, timed; decode tokens/s against the HBM roofline (each step reads every
weight and every slot's K/V rows):

    python launch/bench_decode.py --config configs/activemem_qwen3_8b.py [--set engine.max_slots=32]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # launch/, configs/

import argparse
import time

import numpy as np

from launch.bench_report import peak_rss_gib, write_json

MODES = {"f32": dict(dtype="float32"), "bf16w": dict(dtype="bfloat16", activation_dtype="float32"),
         "int8": dict(quant="int8")}


def engine(model, max_slots: int, max_len: int):
    """An engine of this size on `model`, built as every run builds one (activemem_jax.build)."""
    from activemem_jax import build

    return build.engine(build.config(engine={"max_slots": max_slots, "max_len": max_len}), model)


def bench_ours(model, prompt, prompts, n_new: int) -> dict:
    from activemem_jax.engine import SamplingParams

    tok, conc = model.tokenizer, len(prompts)
    greedy = SamplingParams(temperature=0, max_tokens=n_new, ignore_eos=True)
    res = {}
    with engine(model, max_slots=1, max_len=2048) as eng:
        for _ in range(2):  # the first pass compiles every shape the second one times
            t0 = time.perf_counter()
            handle = eng.submit(prompt, greedy)
            first = None
            for delta in handle:
                if first is None and delta.token_ids:
                    first = time.perf_counter() - t0
            total = time.perf_counter() - t0
            eng.generate([[7] + prompt], SamplingParams(temperature=0, max_tokens=1))  # no reuse
        res["ttft_s"] = first
        res["b1_tok_s"] = (n_new - 1) / (total - first)
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
    with engine(model, max_slots=conc, max_len=1024) as eng:
        for n in (1, 4, conc, conc):  # compile every prefill row bucket an admission may use
            eng.clear_prefix_cache()
            eng.generate(prompts[:n], greedy)
        eng.clear_prefix_cache()  # timed with every prompt prefilled afresh, no reuse
        calls = eng.stats["prefill_calls"]
        t0 = time.perf_counter()
        outs = eng.generate(prompts, greedy)
        dt = time.perf_counter() - t0
        res["concurrent_tok_s"] = sum(o.completion_tokens for o in outs) / dt
        res["concurrent_prefill_calls"] = eng.stats["prefill_calls"] - calls
    return res


def bench_detokenize(model, prompt, n_new: int = 1024) -> dict:
    """Host time per token spent turning tokens into text, on a real `n_new`-token response:
    the engine's incremental TextStream against re-decoding the whole response on every
    token (what the engine did before), each replayed on the same ids, and the engine's
    own measured share of a decode step."""
    from activemem_jax.engine import SamplingParams
    from activemem_jax.engine.detokenize import TextStream

    tok = model.tokenizer
    params = SamplingParams(temperature=0.8, seed=0, max_tokens=n_new, ignore_eos=True, stop=("\n\n\n\n",))
    with engine(model, max_slots=1, max_len=2048) as eng:
        eng.generate([prompt], SamplingParams(temperature=0.8, max_tokens=4, ignore_eos=True))  # compile
        spent = eng.stats["detokenize_s"]
        t0 = time.perf_counter()
        out = eng.generate([prompt], params)[0]
        wall = time.perf_counter() - t0
        engine_s = eng.stats["detokenize_s"] - spent
    ids = out.token_ids
    per_token = []
    for k in range(1, len(ids) + 1):  # before: decode(all so far) + stop search, every token
        t0 = time.perf_counter()
        text = tok.decode(ids[:k], skip_special_tokens=True)
        text.find("\n\n\n\n")
        per_token.append(time.perf_counter() - t0)
    stream, new = TextStream(tok, params.stop), []
    for t in ids:
        t0 = time.perf_counter()
        stream.push(t)
        new.append(time.perf_counter() - t0)
    tail = slice(-64, None)
    res = {"tokens": len(ids), "decode_step_ms": 1e3 * wall / len(ids),
           "engine_detokenize_us_per_token": 1e6 * engine_s / len(ids),
           "full_redecode_us_mean": 1e6 * float(np.mean(per_token)),
           "full_redecode_us_last64": 1e6 * float(np.mean(per_token[tail])),
           "incremental_us_mean": 1e6 * float(np.mean(new)),
           "incremental_us_last64": 1e6 * float(np.mean(new[tail]))}
    res["last64_ratio"] = res["full_redecode_us_last64"] / res["incremental_us_last64"]
    return res


# what the constrained half of `bench_constrained` decodes under: an array of at least 32
# objects (hundreds of tokens), so with ignore_eos every constrained request runs its full
# n_new tokens as the others do (a greedy model would close an array that may be empty)
BENCH_SCHEMA = {"type": "array", "minItems": 32, "items": {"type": "object", "properties": {
    "fact": {"type": "string", "minLength": 8}, "number": {"type": "integer"}, "sure": {"type": "boolean"}},
    "required": ["fact", "number", "sure"], "additionalProperties": False}}


def bench_constrained(model, prompts, n_new: int, repeats: int = 3) -> dict:
    """Decode cost of constrained decoding (engine/constraints.py): the same `len(prompts)`
    concurrent greedy requests (EOS ignored, every one runs n_new tokens) with no
    constraint, and with every other request under a JSON schema (a mask per step from
    llguidance on the host, applied inside the jitted step), in one engine, alternated
    `repeats` times; best of each. Reports tok/s, ms per decode step and their ratio."""
    from activemem_jax.engine import SamplingParams
    from activemem_jax.engine.constraints import Constraint

    free = SamplingParams(temperature=0, max_tokens=n_new, ignore_eos=True)
    json_ = SamplingParams(temperature=0, max_tokens=n_new, ignore_eos=True,
                           constraint=Constraint.json_schema(BENCH_SCHEMA))
    mixes = {"none": [free] * len(prompts),
             "half": [json_ if i % 2 else free for i in range(len(prompts))]}
    best = {k: {"s": float("inf")} for k in mixes}
    with engine(model, max_slots=len(prompts), max_len=1024) as eng:
        for k in range(repeats + 1):  # the first round compiles (masked and unmasked variants)
            for name, params in mixes.items():
                eng.clear_prefix_cache()
                steps = eng.stats["steps"]
                t0 = time.perf_counter()
                with eng.batch():
                    handles = [eng.submit(p, q) for p, q in zip(prompts, params)]
                outs = [h.result() for h in handles]
                dt = time.perf_counter() - t0
                tokens = sum(o.completion_tokens for o in outs)
                if k and dt < best[name]["s"]:
                    best[name] = {"s": dt, "tokens": tokens, "tok_s": tokens / dt,
                                  "step_ms": 1e3 * dt / max(eng.stats["steps"] - steps, 1),
                                  "finish": sorted({o.finish_reason for o in outs})}
    best["ratio"] = best["half"]["s"] / best["none"]["s"]
    return best


def print_constrained(c: dict, conc: int):
    print(f"constrained decoding, {conc} concurrent greedy requests, {c['none']['tokens']} tokens: none "
          f"{c['none']['tok_s']:.1f} tok/s ({c['none']['step_ms']:.1f} ms/step); half under a JSON schema "
          f"{c['half']['tok_s']:.1f} tok/s ({c['half']['step_ms']:.1f} ms/step, {c['half']['tokens']} tokens, "
          f"finish {c['half']['finish']}); time ratio half/none {c['ratio']:.3f}")


def print_detokenize(d: dict):
    print(f"detokenization at a {d['tokens']}-token response: re-decoding everything "
          f"{d['full_redecode_us_mean']:.0f} us/token on average, {d['full_redecode_us_last64']:.0f} us over the "
          f"last 64; incremental {d['incremental_us_mean']:.1f} / {d['incremental_us_last64']:.1f} us "
          f"({d['last64_ratio']:.0f}x less at the end); in the engine {d['engine_detokenize_us_per_token']:.1f} "
          f"us per {d['decode_step_ms']:.1f} ms decode step")


def bench_hf(dtype, prompt, prompts, n_new: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from activemem_jax.models import embedded_gguf_path

    path = embedded_gguf_path()
    hf = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                              dtype=torch.float32).eval().to(dtype)

    def run(batch, new):
        width = max(len(p) for p in batch)
        ids = torch.tensor([[2] * (width - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        with torch.inference_mode():
            return hf.generate(ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                               do_sample=False, pad_token_id=2)

    res = {}
    run([prompt], 2)
    run(prompts, 2)
    t0 = time.perf_counter()
    run([prompt], 1)
    res["ttft_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    run([prompt], n_new)
    res["b1_tok_s"] = (n_new - 1) / (time.perf_counter() - t0 - res["ttft_s"])
    t0 = time.perf_counter()
    run(prompts, n_new)
    res["concurrent_tok_s"] = len(prompts) * n_new / (time.perf_counter() - t0)
    return res


def bench_llamacpp(prompt, prompts, n_new: int) -> dict | None:
    """llama.cpp on the same GGUF file (its own Q4_1 kernels), when llama-cpp-python is
    installed. Its Python API decodes one sequence at a time, so "concurrent" is the 16
    prompts one after another."""
    try:
        from llama_cpp import Llama
    except ImportError as e:
        print(f"llama.cpp: skipped ({e}); pip install llama-cpp-python (see the issue for this CPU's build flags)")
        return None
    from activemem_jax.models import embedded_gguf_path

    llm = Llama(model_path=embedded_gguf_path(), n_ctx=1024, n_threads=os.cpu_count(), verbose=False)

    def run(ids, n):  # greedy, EOS ignored, no prefix reuse (reset first)
        llm.reset()
        t0, first = time.perf_counter(), None
        for i, _ in enumerate(llm.generate(ids, top_k=1, temp=0.0, reset=True)):
            if first is None:
                first = time.perf_counter() - t0
            if i + 1 == n:
                break
        return first, time.perf_counter() - t0

    run(prompt, 4)  # warm-up
    first, total = run(prompt, n_new)
    t0 = time.perf_counter()
    for p in prompts:
        run(p, n_new)
    return {"ttft_s": first, "b1_tok_s": (n_new - 1) / (total - first),
            "concurrent_tok_s": len(prompts) * n_new / (time.perf_counter() - t0)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--concurrent", type=int, default=16)
    ap.add_argument("--out", default="bench_results/decode.json")
    ap.add_argument("--detokenize-only", action="store_true",
                    help="only the host cost of detokenizing a 1,024-token response (f32 engine)")
    ap.add_argument("--constrained-only", action="store_true",
                    help="only the cost of constrained decoding: --concurrent requests, half under a JSON "
                         "schema, against none (f32 engine)")
    ap.add_argument("--peak-tflops", type=float, default=0.0,
                    help="with --config: the device's dense bf16 peak, for MFU (known kinds are looked up)")
    from activemem_jax.config_files import parse_args
    from activemem_jax.tooling.measure import add_config_args, run_config

    add_config_args(ap)
    args = parse_args(ap)  # --config.a.b=v as well as --set a.b=v
    if args.config:
        write_json(args.out, run_config(args.config, args.set, ("prefill", "decode"), args.length, args.calls,
                                        args.peak_tflops, args.hbm_gbps))
        return
    n_new, conc = args.new_tokens, args.concurrent

    import jax
    import torch

    from activemem_jax import build, sharding

    mesh = sharding.make_mesh(devices=jax.devices()[:1])
    def load(**kw):
        return build.model(build.config(model={"path": "embedded", "dtype": "float32", "remat": False, **kw}), mesh)
    question = [{"role": "user", "content": "Write a short story about a lighthouse keeper who finds a map."}]
    if args.detokenize_only:
        model = load()
        res = {"detokenize": bench_detokenize(model, model.encode_chat(question))}
        print_detokenize(res["detokenize"])
        write_json(args.out, res)
        return
    if args.constrained_only:
        model = load()
        prompts = [model.encode_chat([{"role": "user", "content": f"List facts about the ocean, number {i}."}])
                   for i in range(conc)]
        res = {"constrained": bench_constrained(model, prompts, n_new)}
        print_constrained(res["constrained"], conc)
        write_json(args.out, res)
        return
    res = {"new_tokens": n_new, "concurrent": conc}
    logits = {}
    for name, kw in MODES.items():
        model = load(**kw)
        prompt = model.encode_chat(question)
        prompts = [model.encode_chat([{"role": "user", "content": f"Tell me fact number {i} about the ocean."}])
                   for i in range(conc)]
        res[f"ours_{name}"] = bench_ours(model, prompt, prompts, n_new)
        if name == "f32":
            res["detokenize"] = bench_detokenize(model, prompt)
            res["constrained"] = bench_constrained(model, prompts, n_new)
        logits[name] = model.logits(prompt)  # next-token distributions over the prompt
        del model
    res["prompt_tokens"] = len(prompt)
    ref_lp = jax.nn.log_softmax(logits["f32"], axis=-1)
    for name in MODES:  # what each precision costs: KL(f32 || mode) and top-1 agreement, per position
        lp = jax.nn.log_softmax(logits[name], axis=-1)
        res[f"ours_{name}"]["kl_vs_f32"] = float((np.exp(ref_lp) * (ref_lp - lp)).sum(-1).mean())
        res[f"ours_{name}"]["top1_vs_f32"] = float((lp.argmax(-1) == ref_lp.argmax(-1)).mean())
    res["rss_gib_ours"] = peak_rss_gib()
    torch.set_num_threads(os.cpu_count() or 1)
    for name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        res[f"hf_{name}"] = bench_hf(dtype, prompt, prompts, n_new)
    res["rss_gib_total"] = peak_rss_gib()
    llamacpp = bench_llamacpp(prompt, prompts, n_new)

    ref = res["hf_f32"]
    print(f"embedded SmolLM2-135M, {os.cpu_count()} CPU threads, prompt {len(prompt)} tokens, "
          f"{n_new} new tokens; ratios against transformers f32 (and bf16)")
    cols = [f"ours_{m}" for m in MODES] + ["hf_f32", "hf_bf16"]
    print(f"{'':24}" + "".join(f"{c:>12}" for c in cols) + f"{'best ratio':>16}")
    for key, label, fmt in (("b1_tok_s", "batch-1 decode tok/s", ".1f"), ("ttft_s", "time to first token s", ".3f"),
                            ("concurrent_tok_s", f"{conc} concurrent tok/s", ".1f")):
        vals = [res[c][key] for c in cols]
        ours = max(vals[:len(MODES)]) if key != "ttft_s" else min(vals[:len(MODES)])
        ratio = (f"{ours / ref[key]:.2f} ({ours / res['hf_bf16'][key]:.2f})" if key != "ttft_s"
                 else f"{ref[key] / ours:.2f} ({res['hf_bf16'][key] / ours:.2f})")
        print(f"{label:24}" + "".join(f"{v:>12{fmt}}" for v in vals) + f"{ratio:>16}")
    for name in MODES:
        r = res[f"ours_{name}"]
        print(f"ours {name}: prefix reuse ({r['prefix_cached_tokens']} of 1000 tokens cached) cold "
              f"{r['prefix_cold_s']:.3f}s, reused {r['prefix_reused_s']:.3f}s, speedup {r['prefix_speedup']:.1f}x; "
              f"{conc} concurrent requests prefilled in {r['concurrent_prefill_calls']} calls; "
              f"logits vs f32 over the prompt: KL {r['kl_vs_f32']:.4f}, top-1 agreement {r['top1_vs_f32']:.2f}")
    if llamacpp is not None:
        res["llamacpp_q4_1"] = llamacpp
        best_b1 = max(res[f"ours_{m}"]["b1_tok_s"] for m in MODES)
        print(f"llama.cpp (llama-cpp-python, the GGUF's own Q4_1): batch-1 {llamacpp['b1_tok_s']:.1f} tok/s "
              f"(ours best / llama.cpp = {best_b1 / llamacpp['b1_tok_s']:.2f}), time to first token "
              f"{llamacpp['ttft_s']:.3f} s, {conc} prompts one after another {llamacpp['concurrent_tok_s']:.1f} tok/s")
    print_detokenize(res["detokenize"])
    print_constrained(res["constrained"], conc)
    print(f"peak RSS: after ours {res['rss_gib_ours']:.2f} GiB, after all {res['rss_gib_total']:.2f} GiB")
    write_json(args.out, res)


if __name__ == "__main__":
    main()
