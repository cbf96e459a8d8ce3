"""Table 1's parametric SFT baseline in miniature: LoRA on the embedded model's q/v
projections trained with SFT on AQuA's rationales (practice data), no latents and no tree;
the same data, steps and held-out tasks as aqua_table1.py's ActiveMem run."""
from configs.activemem_continual_cpu import stage_base


def get_config():
    c = stage_base("runs/practice_table1/aqua_lora_sft")
    c.model.update(scan_layers=False)
    c.lora.update(rank=8)
    c.optim.update(lr_lora=1e-4)
    c.policy.update(max_tokens=96, num_latents=0, use_tree=False)
    c.data.update(name="aqua", path="data/aqua/train.json")
    c.eval.update(enabled=True, n_tasks=16, path="data/aqua/test.json")
    c.train.update(steps=4, sft_steps=4, algo="sft")
    return c
