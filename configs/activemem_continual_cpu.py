"""Continual learning in miniature (the ActiveMem paper's Table 6): one controller on the
embedded SmolLM2-135M trained on AQuA -> GPQA -> GSM8K -> KodCode in that order, each
stage from the previous stage's controller, then every stage's controller scored on every
dataset's held-out file (a 4 x 4 matrix, forgetting and forward transfer: launch/continual.py).

    python -m launch.continual --config configs/activemem_continual_cpu.py

Without the datasets, `python -m launch.write_practice_data --out data` writes small
practice files at these paths (templated items in each dataset's format).

The files are the user's, under data/ (a stage whose file is missing stops the launch
before anything trains, naming the stage and the path):

  data/aqua/train.json, test.json      AQuA-RAT as published: JSONL rows {"question",
                                       "options": ["A)..", "B)..", ...], "rationale",
                                       "correct": "C"} (family `aqua`, tasks/choice.py)
  data/gpqa/train.csv, test.csv        GPQA's CSV columns (Question, Correct Answer,
                                       Incorrect Answer 1-3, Record ID, Explanation), family
                                       `gpqa`; GPQA publishes no split: cut gpqa_main.csv in
                                       two, header in both (e.g. the last 100 rows as test.csv)
  data/gsm8k/train.jsonl, test.jsonl   GSM8K as published: {"question", "answer": "... #### 72"}
                                       (family `gsm8k`, tasks/single_shot.py)
  data/kodcode/train.jsonl, test.jsonl KodCode-V1 rows {"question_id", "question", "solution",
                                       "test"} (family `kodcode`, tasks/code.py; KodCode
                                       publishes one split: hold some rows out as test.jsonl)

The sizes are a CPU smoke run (a few SFT and GRPO steps a stage, 16 held-out tasks a
dataset); the 135M model is not expected to solve these tasks, so the matrix shows the
pipeline, not the paper's figures.
"""

from configs.activemem_base import base_config, policy_defaults

ONE_TURN = {"n_objectives": (1,), "turns_per_objective": 1, "extra_turns": 0, "max_turns_cap": 1}


def stage_base(out_dir: str):
    """What every stage, source and target shares (launch.generalize's config builds on it):
    the model, one policy (the controller's shapes carry over between runs), sizes."""
    c = base_config()
    c.out_dir = out_dir
    c.model.update(dtype="auto", remat=True)
    c.engine.update(max_slots=8, max_len=1024)
    # one policy for every stage (the controller's shapes carry over): room for a program's reply
    c.policy = policy_defaults(num_latents=1, capacity=256, max_depth=4, max_ops=8, max_tokens=192, hidden=256,
                               latent_init_std=0.02, temperature=1.0, layout="observation",
                               tree_scope="persistent", system_prompt="")
    c.data.update(n_tasks=64, max_turns=1, sandbox={"cpu_s": 5.0, "wall_s": 10.0, "memory_mb": 512})
    c.train.update(group_size=4, prompts_per_step=2, mini_batch_rows=8, micro_batch_rows=2)
    c.optim.update(lr_controller=1e-3, warmup_steps=2)
    c.checkpoint.update(every=4, keep=2)
    c.eval.update(n_tasks=16, split="test", **ONE_TURN)
    return c


def get_config():
    c = stage_base("runs/activemem_continual_cpu")
    c.stages = (
        {"name": "aqua", "data": {"name": "aqua", "path": "data/aqua/train.json"},
         "eval": {"path": "data/aqua/test.json"}, "steps": 8, "sft_steps": 6},
        {"name": "gpqa", "data": {"name": "gpqa", "path": "data/gpqa/train.csv"},
         "eval": {"path": "data/gpqa/test.csv"}, "steps": 8, "sft_steps": 6},
        {"name": "gsm8k", "data": {"name": "gsm8k", "path": "data/gsm8k/train.jsonl"},
         "eval": {"path": "data/gsm8k/test.jsonl"}, "steps": 8, "sft_steps": 6},
        {"name": "kodcode", "data": {"name": "kodcode", "path": "data/kodcode/train.jsonl", "max_turns": 2},
         "eval": {"path": "data/kodcode/test.jsonl", "turns_per_objective": 2, "max_turns_cap": 2},
         "steps": 8, "sft_steps": 6},
    )
    return c
