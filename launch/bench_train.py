"""GRPO train-step throughput: our trainer vs TRL's GRPOTrainer, same model (the embedded
SmolLM2-135M, f32, CPU), same prompts, group size, batch and completion length, one run.

Ours trains the controller through the frozen backbone (rollout on the engine, reference
log-probs, one jitted update); TRL trains the full model with its own generate. Both
process the same sequences per step; tokens/s counts prompt + completion tokens.

    pip install trl   # the peer (CPU torch)
    python launch/bench_train.py [--steps 3] [--group 8] [--prompts 2] [--new-tokens 32] [--weights bf16w]
        [--peak-tflops P]

Also prints the update step's FLOPs (XLA's cost analysis of the compiled step), its
achieved FLOP/s and, on a GPU or TPU of a known kind (or with --peak-tflops), its MFU.

A paper-size model on a lent GPU or a TPU VM: the config's own GRPO update step (per
micro-batch, remat as configured) and old / reference log-prob pass at its mini-batch,
mesh and rules, random weights, timed, with MFU against the device's bf16 peak:

    python launch/bench_train.py --config configs/activemem_qwen2_5_1_5b.py [--length 2048] \
        [--set mesh.fsdp=1 --set train.micro_batch_rows=16]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/

from launch.bench_report import peak_rss_gib, write_json

PROMPTS = ("Is Paris in France? Answer Yes or No.", "Is water wet? Answer Yes or No.",
           "Is the sun hot? Answer Yes or No.", "Is snow cold? Answer Yes or No.")



def ours(args) -> dict:
    import jax
    import numpy as np

    from activemem_jax import build
    from activemem_jax.rl.trainer import Trainer
    from configs.activemem_base import base_config, policy_defaults

    cfg = base_config()
    cfg.out_dir = tempfile.mkdtemp()
    precision = dict(dtype="bfloat16", activation_dtype="float32") if args.weights == "bf16w" else {}
    cfg.model.update(dtype="float32", remat=False)
    cfg.model.update(precision)
    cfg.policy = policy_defaults(num_latents=2, capacity=256, hidden=128, max_tokens=args.new_tokens,
                                 stop=(), temperature=1.0)
    cfg.data.update(name="first_token", prompts=PROMPTS[:args.prompts], target_words=("No",))
    rows = args.prompts * args.group
    cfg.train.update(steps=1 + args.steps, group_size=args.group, prompts_per_step=args.prompts,
                     mini_batch_rows=rows, micro_batch_rows=0, beta=0.04)  # with the reference pass
    cfg.checkpoint.update(every=10**6)
    cfg.log.tensorboard = False
    cfg.engine.update(max_slots=rows, max_len=1024)
    model = build.model(cfg)  # float32 (or bf16 weights), no remat, on the config's mesh
    with build.engine(cfg, model) as engine:
        trainer = Trainer(cfg, model=model, engine=engine)
        jitted, shapes = trainer.update._step, []

        def spy(*a, **kw):  # records the update's argument shapes (for its FLOP count)
            shapes.append((jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), a), kw))
            return jitted(*a, **kw)

        trainer.update._step = spy
        try:
            trainer.train_step()  # compiles
            ms = [trainer.train_step() for _ in range(args.steps)]
        finally:
            trainer.close()
    prompt_len = len(trainer.policy.layout.render(PROMPTS[0]).ids)
    tokens = [rows * prompt_len + m["generated_tokens"] for m in ms]
    step = [m["time_step"] for m in ms]
    cost = jitted.lower(*shapes[-1][0], **shapes[-1][1]).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    update_s = float(np.mean([m["time_update"] / max(m["updates"], 1) for m in ms]))
    return {"step_s": float(np.mean(step)), "tokens_per_s": float(np.sum(tokens) / np.sum(step)),
            "update_flops": float(cost.get("flops", 0.0)), "update_call_s": update_s,
            "device_kind": jax.devices()[0].device_kind,
            "rollout_s": float(np.mean([m["time_rollout"] for m in ms])),
            "reference_s": float(np.mean([m["time_reference"] for m in ms])),
            "update_s": float(np.mean([m["time_update"] for m in ms])),
            "completion_tokens_mean": float(np.mean([m["generated_tokens"] / rows for m in ms])),
            "prompt_tokens": prompt_len}


def trl_peer(args) -> dict:
    import numpy as np
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from activemem_jax.models import embedded_gguf_path

    path = embedded_gguf_path()
    torch.set_num_threads(os.cpu_count() or 1)
    kw = dict(gguf_file=os.path.basename(path))
    tok = AutoTokenizer.from_pretrained(os.path.dirname(path), **kw)
    gguf = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), dtype=torch.float32, **kw)
    # the GGUF load is flagged "quantized" (Trainer refuses it): a plain copy of the same weights
    config = gguf.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(gguf.state_dict())
    plain_dir = tempfile.mkdtemp()  # TRL loads its reference model from a path
    model.save_pretrained(plain_dir)
    tok.save_pretrained(plain_dir)
    rows = args.prompts * args.group
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": p}]} for p in PROMPTS[:args.prompts]] * 64)

    def reward(completions, **_):
        return [1.0 if c[0]["content"].strip().lower().startswith("no") else 0.0 for c in completions]

    times, lengths = [], []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            times.append(time.perf_counter() - self.t0)

        def on_log(self, _args, _state, _control, logs=None, **k):
            if logs and "completions/mean_length" in logs:
                lengths.append(logs["completions/mean_length"])

    config = GRPOConfig(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=rows,
                        num_generations=args.group, max_completion_length=args.new_tokens,
                        learning_rate=1e-6, max_steps=1 + args.steps, logging_steps=1, report_to=[],
                        use_cpu=True, bf16=False, temperature=1.0, beta=0.04, save_strategy="no",
                        gradient_accumulation_steps=1, seed=0, model_init_kwargs={"dtype": torch.float32})
    trainer = GRPOTrainer(model=plain_dir, reward_funcs=reward, args=config, train_dataset=data,
                          processing_class=tok, callbacks=[Clock()])
    trainer.train()
    ids = tok.apply_chat_template([{"role": "user", "content": PROMPTS[0]}], add_generation_prompt=True,
                                  tokenize=True)
    prompt_len = len(ids["input_ids"] if hasattr(ids, "keys") else ids)
    timed, lens = times[1:], lengths[1:] or lengths
    tokens = [rows * (prompt_len + mean_len) for mean_len in lens[:len(timed)]]
    return {"step_s": float(np.mean(timed)), "tokens_per_s": float(np.sum(tokens) / np.sum(timed[:len(tokens)])),
            "completion_tokens_mean": float(np.mean(lens)), "prompt_tokens": prompt_len}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--weights", choices=("f32", "bf16w"), default="f32",
                    help="ours: f32, or bf16 weights with f32 activations (TRL stays f32)")
    ap.add_argument("--peak-tflops", type=float, default=0.0,
                    help="the device's dense bf16 peak, for MFU (known GPUs/TPUs are looked up)")
    ap.add_argument("--out", default="bench_results/train.json")
    from activemem_jax.config_files import parse_args
    from activemem_jax.tooling.measure import add_config_args, device_peaks, run_config

    add_config_args(ap)
    args = parse_args(ap)  # --config.a.b=v as well as --set a.b=v
    if args.config:
        write_json(args.out, run_config(args.config, args.set, ("update_grpo", "logprobs"), args.length,
                                        args.calls, args.peak_tflops, args.hbm_gbps))
        return
    res = {"group": args.group, "prompts": args.prompts, "new_tokens": args.new_tokens, "weights": args.weights,
           "ours": ours(args)}
    try:
        res["trl"] = trl_peer(args)
    except ImportError as e:
        res["trl"] = None
        print(f"TRL not installed ({e}); pip install trl to measure the peer")
    res["peak_rss_gib"] = peak_rss_gib()
    o = res["ours"]
    print(f"rows/step {args.prompts * args.group}, completion <= {args.new_tokens} tokens")
    print(f"ours  {o['tokens_per_s']:8.1f} tok/s  step {o['step_s']:.2f} s (rollout {o['rollout_s']:.2f}, "
          f"reference {o['reference_s']:.2f}, update {o['update_s']:.2f}); completions {o['completion_tokens_mean']:.1f}")
    achieved = o["update_flops"] / o["update_call_s"]
    peak = args.peak_tflops * 1e12 if args.peak_tflops else device_peaks(o["device_kind"])[0]
    res["update_tflops"] = achieved / 1e12
    res["update_mfu"] = achieved / peak if peak else None
    print(f"update step: {o['update_flops'] / 1e9:.1f} GFLOP (XLA cost analysis) in {o['update_call_s']:.3f} s = "
          f"{achieved / 1e12:.3f} TFLOP/s on {o['device_kind']}"
          + (f", MFU {100 * achieved / peak:.1f}% of {peak / 1e12:.0f} TFLOP/s (target >= 35%)" if peak else
             " (MFU: pass --peak-tflops for this device)"))
    if res["trl"]:
        t = res["trl"]
        res["ratio"] = o["tokens_per_s"] / t["tokens_per_s"]
        print(f"TRL   {t['tokens_per_s']:8.1f} tok/s  step {t['step_s']:.2f} s; completions {t['completion_tokens_mean']:.1f}")
        print(f"ratio {res['ratio']:.2f}x (target >= 1.5x)")
    write_json(args.out, res)


if __name__ == "__main__":
    main()
