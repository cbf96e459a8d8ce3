from configs.activemem_generalize_cpu import get_config as full


def get_config():
    c = full()
    c.out_dir = "runs/practice_generalize_small"
    c.policy.max_tokens = 96
    c.eval.n_tasks = 8
    c.sources = tuple(dict(s, steps=2, sft_steps=1) for s in c.sources)
    return c
