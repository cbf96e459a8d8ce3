"""The CPU demo: GRPO on the embedded SmolLM2-135M, synthetic 2-objective QA, a few
minutes on 2 cores, then ActiveMem before vs after on held-out tasks.

    python -m launch.train --config configs/activemem_tiny_cpu.py
"""

from configs.activemem_base import base_config, policy_defaults


def get_config():
    c = base_config()
    c.out_dir = "runs/activemem_tiny_cpu"
    c.model.update(dtype="float32", remat=False)
    c.engine.update(max_slots=8, max_len=2048)
    c.policy = policy_defaults(num_latents=2, capacity=256, max_tokens=48, hidden=128, temperature=1.0)
    # format_reward: 135M rarely answers right; a well-formed 2-item answer earns 0.2
    c.data.update(n_objectives=(2,), n_tasks=32, max_turns=3, format_reward=0.2)
    c.train.update(steps=4, group_size=4, prompts_per_step=1, mini_batch_rows=4, micro_batch_rows=1)
    c.optim.update(lr_controller=1e-4, warmup_steps=2)
    c.checkpoint.update(every=2, keep=2)
    c.eval.update(enabled=True, n_objectives=(2,), n_tasks=2, max_turns_cap=3)
    return c
