"""The CPU demo: ActiveMem on the embedded SmolLM2-135M learns to recall facts through its
memory tree (envs/recall.py): each episode shows 4 facts, one per turn, then asks 6
questions about them; the model sees only the newest observation, so only the tree and
the latent prefix carry the facts. SFT warm start through the tree, then GRPO; held-out
accuracy before vs after, with the tree telemetry, printed at the end.

    python -m launch.train --config configs/activemem_tiny_cpu.py
"""

from configs.activemem_base import base_config, policy_defaults


def get_config():
    c = base_config()
    c.out_dir = "runs/activemem_tiny_cpu"
    c.model.update(dtype="auto", remat=False)  # bfloat16 on a CPU with AMX (2x faster here), else float32
    c.engine.update(max_slots=16, max_len=256)
    c.policy = policy_defaults(num_latents=1, capacity=64, max_depth=4, max_ops=8, max_tokens=3, hidden=256,
                               latent_init_std=0.02, temperature=1.0, layout="observation", tree_scope="episode",
                               stop=("\n", "."), system_prompt="")
    # 4 facts, 6 questions (two facts asked twice: the second ask reads a node the first updated)
    c.data.update(name="recall", n_facts=4, n_questions=6, n_tasks=256, max_turns=10)
    c.train.update(steps=78, sft_steps=76, group_size=4, prompts_per_step=2, mini_batch_rows=32, seeds=(0, 1),
                   micro_batch_rows=0)
    c.optim.update(lr_controller=2e-3, warmup_steps=5)
    c.checkpoint.update(every=10, keep=2)
    c.eval.update(enabled=True, n_tasks=16)
    return c
