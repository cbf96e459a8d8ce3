"""A Table 1 cell in miniature: AQuA (practice data) on the embedded model, ActiveMem_GRPO's
recipe shape (SFT warm start, then GRPO), evaluated before and after with the rules."""
from configs.activemem_continual_cpu import stage_base


def get_config():
    c = stage_base("runs/practice_table1/aqua_grpo")
    c.policy.max_tokens = 96
    c.data.update(name="aqua", path="data/aqua/train.json")
    c.eval.update(enabled=True, n_tasks=16, path="data/aqua/test.json")
    c.train.update(steps=4, sft_steps=2)
    return c
