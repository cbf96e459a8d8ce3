"""The generalization matrix in miniature (the ActiveMem paper's Figures 2 and 5): on the
embedded SmolLM2-135M, one controller trained on GSM8K and one on AQuA, each from
scratch, then both (and the untrained controller) scored on the held-out files of GSM8K,
AQuA, GPQA and KodCode (a 2 x 4 matrix and its gain over the untrained row:
launch/generalize.py).

    python -m launch.generalize --config configs/activemem_generalize_cpu.py

Without the datasets, `python -m launch.write_practice_data --out data` writes small
practice files at these paths (templated items in each dataset's format).

The files are the user's, under data/ (a source or target whose file is missing stops the
launch before anything trains, naming it and the path):

  data/gsm8k/train.jsonl, test.jsonl   GSM8K as published: {"question", "answer": "... #### 72"}
                                       (family `gsm8k`, tasks/single_shot.py)
  data/aqua/train.json, test.json      AQuA-RAT as published: JSONL rows {"question",
                                       "options": ["A)..", "B)..", ...], "rationale",
                                       "correct": "C"} (family `aqua`, tasks/choice.py)
  data/gpqa/test.csv                   GPQA's CSV columns (Question, Correct Answer,
                                       Incorrect Answer 1-3, Record ID, Explanation), family
                                       `gpqa`; only evaluated here (e.g. the last 100 rows of
                                       gpqa_main.csv, header kept)
  data/kodcode/test.jsonl              KodCode-V1 rows {"question_id", "question", "solution",
                                       "test"} (family `kodcode`, tasks/code.py); only
                                       evaluated here

The sizes are a CPU smoke run (a few SFT and GRPO steps a source, 16 held-out tasks a
target); the 135M model is not expected to solve these tasks, so the matrix shows the
pipeline, not the paper's figures.
"""

from configs.activemem_continual_cpu import stage_base


def get_config():
    c = stage_base("runs/activemem_generalize_cpu")
    c.sources = (
        {"name": "gsm8k", "data": {"name": "gsm8k", "path": "data/gsm8k/train.jsonl"}, "steps": 8, "sft_steps": 6},
        {"name": "aqua", "data": {"name": "aqua", "path": "data/aqua/train.json"}, "steps": 8, "sft_steps": 6},
    )
    c.targets = (
        {"name": "gsm8k", "data": {"name": "gsm8k"}, "eval": {"path": "data/gsm8k/test.jsonl"}},
        {"name": "aqua", "data": {"name": "aqua"}, "eval": {"path": "data/aqua/test.json"}},
        {"name": "gpqa", "data": {"name": "gpqa"}, "eval": {"path": "data/gpqa/test.csv"}},
        {"name": "kodcode", "data": {"name": "kodcode", "max_turns": 2},
         "eval": {"path": "data/kodcode/test.jsonl", "turns_per_objective": 2, "max_turns_cap": 2}},
    )
    return c
