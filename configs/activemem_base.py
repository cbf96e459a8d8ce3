"""Shared defaults of every ActiveMem training config (paper 6.1 hyperparameters).

Each launch config calls `base_config()` and overrides what differs. Ablations are
overrides on the command line (or in a config):
  w/o HLMT                    --config.policy.use_tree=False
  w/o latent injection        --config.policy.num_latents=0
  w/o tree action head        --config.policy.tree_actions=False
  w/o merge/delete            --config.policy.maintenance=False
  w/o hierarchical advantage  --config.train.lambda_h=0.0
  K in {2, 4, 8}              --config.policy.num_latents=8
"""

import dataclasses

import ml_collections

from activemem_jax.activemem.rollout import PolicyConfig
from activemem_jax.sharding import DEFAULT_RULES


def policy_defaults(**overrides) -> ml_collections.ConfigDict:
    d = {f.name: getattr(PolicyConfig(), f.name) for f in dataclasses.fields(PolicyConfig)}
    d.update(overrides)
    return ml_collections.ConfigDict(d)


def base_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.out_dir = "runs/activemem"
    # activation_dtype "" = dtype; "float32" with dtype "bfloat16": bf16 weights, f32 activations
    # attention: auto (splash on TPU, cudnn on GPU, xla on CPU) | xla | splash | cudnn (docs/attention_kernels.md);
    # remat_policy: "" (full with remat) | none | full | dots_saveable | dots_with_no_batch_dims_saveable
    c.model = ml_collections.ConfigDict(dict(path="embedded", dtype="bfloat16", activation_dtype="", remat=True,
                                             remat_policy="", attention="auto"))
    c.mesh = ml_collections.ConfigDict(dict(data=1, fsdp=-1, tensor=1))  # -1: all remaining devices
    c.sharding = ml_collections.ConfigDict(dict(rules=dict(DEFAULT_RULES)))
    c.engine = ml_collections.ConfigDict(dict(max_slots=64, max_len=8192))
    c.policy = policy_defaults(num_latents=4, capacity=4096, max_tokens=512, temperature=1.0)
    c.lora = ml_collections.ConfigDict(dict(rank=0, alpha=16.0, targets=("q_proj", "v_proj")))
    c.data = ml_collections.ConfigDict(dict(
        name="synthetic",          # activemem_jax/tasks/: synthetic | recall | first_token | multi_objective_qa
        seed=0, n_entities=2000, split="train", n_objectives=(2,), n_tasks=4096, max_turns=8,  # | single_qa | gsm8k | math
        n_facts=4, n_questions=0,  # recall: facts and questions per episode (0: one per fact)
        codes=(),                  # recall, dossier: the closed answer set (empty: envs.recall.CODES, 8 colours)
        dossier=dict(streams=16, episodes=4, entities=2, attributes=2, corrections=1, reminders=1, decoys=2,
                     questions=4, horizon=2, carry=0.5, memory_sizes=(4, 8)),  # dossier: envs/dossier.py (sizes per episode)
        retrieval_topk=3, format_reward=0.0, prompts=(), target_words=(), fraction=0.5,  # first_token: see rl.trainer
        qa_files=(),               # multi_objective_qa / single_qa: FlashRAG JSONL files
        bad_rows="strict",         # qa_files / path rows: strict (stop at the first bad row) | skip (drop
                                   # them, one summary line per reason; exact duplicates merged)
        index="", corpus="", retrieval_url="",  # their search: an index dir | a JSONL corpus | a server | closed-book
        path="", delimiter=""))    # gsm8k / math: the data file; delimiter: delimiter steps (policy.step_mode)
    c.train = ml_collections.ConfigDict(dict(
        algo="grpo",               # grpo | sft
        sft_steps=0,               # grpo: the first steps are SFT on expert turns (a warm start)
        sft_tree="rule",           # SFT's tree actions: the threshold rule | "expert" (env.expert_write)
        key_coef=0.0, key_tau=0.1,  # SFT's loss on the key head (policy.key_head): env.observation_key
        steps=500, group_size=8, prompts_per_step=8,   # rollout batch 64 = 8 prompts x G 8
        seeds=(),                  # launch.train trains one controller per seed (init + data), () = (seed,)
        mini_batch_rows=64, ppo_epochs=1,
        old_logp="rollout",        # PPO's old log-probs: the engine's, recorded as it sampled (the
                                   # model's own distribution) | "recompute" (one more forward pass)
        micro_batch_rows=8,        # gradient accumulation: rows per forward/backward (0: all)
        clip_eps=0.2, clip_eps_high=0.0,               # 0: symmetric clipping
        agg="token-mean",          # token-mean | seq-mean-token-mean | seq-mean-token-sum-norm
        beta=0.0,                  # k3 KL to the reference (frozen LLM + initial controller)
        tree_coef=1.0, lambda_h=0.5, adv_eps=1e-6, normalize_std=True, logprob_chunk=128))
    c.optim = ml_collections.ConfigDict(dict(
        lr_controller=1e-5, lr_lora=1e-6, warmup_steps=50, weight_decay=0.0, max_grad_norm=1.0,
        lr_grpo=0.0,               # > 0: GRPO's controller rate after an SFT warm start (LoRA's scales
                                   # alike); 0: lr_controller throughout
        decay_steps=0, final_lr_ratio=0.1))  # > 0: cosine from the rate down to rate x final_lr_ratio
                                   # by optimizer update decay_steps (0: constant after warm-up)
    # step: restore this step (0: the newest readable one); overwrite: with resume=False, set an
    # existing run in out_dir aside (renamed, kept) instead of refusing to start
    c.checkpoint = ml_collections.ConfigDict(dict(every=50, keep=3, async_save=True, resume=True, step=0,
                                                  overwrite=False))
    c.log = ml_collections.ConfigDict(dict(tensorboard=True))
    c.eval = ml_collections.ConfigDict(dict(enabled=False, n_objectives=(1, 2), n_tasks=4, split="test",
                                            turns_per_objective=2, extra_turns=1, max_turns_cap=8,
                                            qa_files=(), path=""))  # held-out data of a registered task
    c.distributed = ml_collections.ConfigDict(dict(
        coordinator_address="", num_processes=1, process_id=-1))  # empty: single process / auto
    return c


PAPER_TABLES = ("table7", "table9", "synthetic")


def paper_data(c: ml_collections.ConfigDict, table: str, data_dir: str = "/path/to/flashrag",
               index: str = "/path/to/indexes/wiki18") -> ml_collections.ConfigDict:
    """The data of the ActiveMem paper's tables on config `c`: table7, 2-objective QA
    composed from NQ + HotpotQA training questions (MEM1's setup), evaluated at N = 1..16;
    table9, single-objective Wikipedia QA; synthetic, the embedded world (no files).
    Paths are placeholders: a run stops at the first one that does not exist, naming it."""
    if table not in PAPER_TABLES:
        raise ValueError(f"config parameter {table!r}: use one of {PAPER_TABLES} (e.g. --config=FILE.py:table9)")
    if table == "synthetic":
        return c
    train = (f"{data_dir}/nq/train.jsonl", f"{data_dir}/hotpotqa/train.jsonl")
    c.data.update(dict(name="multi_objective_qa" if table == "table7" else "single_qa", qa_files=train,
                       index=index, n_objectives=(2,) if table == "table7" else (1,), max_turns=8))
    c.eval.update(dict(n_objectives=(1, 2, 4, 8, 16) if table == "table7" else (1,), max_turns_cap=33,
                       qa_files=(f"{data_dir}/hotpotqa/dev.jsonl", f"{data_dir}/nq/dev.jsonl")))
    return c
