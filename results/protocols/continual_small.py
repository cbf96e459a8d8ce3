from configs.activemem_continual_cpu import get_config as full


def get_config():
    c = full()
    c.out_dir = "runs/practice_continual_small"
    c.policy.max_tokens = 96
    c.eval.n_tasks = 8
    c.stages = tuple(dict(s, steps=2, sft_steps=1) for s in c.stages)
    return c
