"""The tests' training config: the tiny random Llama (path given with --config.model.path)
on the first-token sanity task; a handful of fast steps."""

from configs.activemem_base import base_config, policy_defaults

PROMPTS = ("Say a word.", "Name a colour.", "Pick a number.", "Write a letter.")


def get_config():
    c = base_config()
    c.out_dir = "runs/test"
    c.model.update(path="", dtype="float32", remat=False)
    c.mesh.update(data=1, fsdp=1, tensor=1)
    c.engine.update(max_slots=16, max_len=512)
    c.policy = policy_defaults(num_latents=2, capacity=64, max_children=4, max_depth=4, max_ops=4,
                               max_tokens=1, hidden=64, stop=(), temperature=1.0)
    c.data.update(name="first_token", prompts=PROMPTS, fraction=0.5)
    c.train.update(steps=6, group_size=8, prompts_per_step=2, mini_batch_rows=16, micro_batch_rows=0)
    c.optim.update(lr_controller=1e-2, warmup_steps=1)
    c.checkpoint.update(every=2, keep=5, async_save=True)
    c.log.tensorboard = True
    return c
