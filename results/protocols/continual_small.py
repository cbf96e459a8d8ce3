from configs.activemem_continual_cpu import get_config as full


def small(c, out_dir: str, runs: str):
    """The protocols' smallest size: 96-token replies, 8 held-out tasks, 2 steps (1 SFT)
    for each entry of `runs` (stages or sources)."""
    c.out_dir = out_dir
    c.policy.max_tokens = 96
    c.eval.n_tasks = 8
    setattr(c, runs, tuple(dict(s, steps=2, sft_steps=1) for s in getattr(c, runs)))
    return c


def get_config():
    return small(full(), "runs/practice_continual_small", "stages")
