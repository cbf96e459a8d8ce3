"""The paper's Table 1 (MemGen's setup) in one place: its datasets, the task family each
trains and evaluates with, what its cell reports, and its domain; the two recipes (rows).
Read by configs/activemem_base.paper_data (the config parameter `:<dataset>[,<recipe>]`)
and launch/table1.py (rows and the merged table). Imports no JAX.

The value of a cell is the held-out mean of the environment's episode score (`em` in
launch.train's summary.json), which is:
  accuracy       the answer (number, boxed expression, option letter) right or wrong;
  EM             exact match against a gold answer (FlashRAG's normalisation);
  tests passed   the share of the task's tests the last program passed (envs/code.py):
                 pass@1 when a task's tests all pass or all fail and max_turns is 1;
  success rate   ALFWorld's games score 1 when won, else 0;
  score          ScienceWorld's normalised score in [0, 1] (partial progress counts).
"""

TABLE1 = {  # dataset: (task family, metric, domain)
    "alfworld": ("alfworld", "success rate", "embodied"),
    "scienceworld": ("scienceworld", "score", "embodied"),
    "triviaqa": ("single_qa", "EM", "QA"),
    "popqa": ("single_qa", "EM", "QA"),          # evaluation only: TRAINED_ON
    "kodcode": ("kodcode", "tests passed", "code"),
    "bigcodebench": ("bigcodebench", "tests passed", "code"),
    "gpqa": ("gpqa", "accuracy", "science"),
    "gsm8k": ("gsm8k", "accuracy", "math"),
    "math": ("math", "accuracy", "math"),
    "aqua": ("aqua", "accuracy", "math"),
}
# evaluation only (no training split): the controller of the run on the dataset named, same recipe
TRAINED_ON = {"popqa": "triviaqa", "bigcodebench": "kodcode"}
DOMAINS = ("embodied", "QA", "code", "science", "math")  # the table's column groups, in order
RECIPES = {"sft": "ActiveMem_SFT", "grpo": "ActiveMem_GRPO"}  # recipe: the row's method name
BACKBONES = ("SmolLM3-3B", "Qwen3-8B", "Qwen2.5-1.5B")  # Table 1's two, then Table 5's
PAPER_K = 4            # the paper configs' num_latents (K in {2, 4, 8}: --config.policy.num_latents)
SFT_WARM_STEPS = 100   # ActiveMem_GRPO's SFT warm start of the 500 training steps (not a paper number)


def dataset_names() -> tuple:
    return tuple(TABLE1)


def check_dataset(name: str) -> tuple:
    """TABLE1[name], or a ValueError naming the datasets."""
    if name not in TABLE1:
        raise ValueError(f"dataset {name!r} is not in Table 1: use one of {', '.join(TABLE1)}")
    return TABLE1[name]
