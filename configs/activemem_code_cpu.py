"""ActiveMem on code with executed tests, on the embedded SmolLM2-135M (CPU): HumanEval's
problems as the package ships them (every fifth held out), two attempts per episode (the
second sees how many tests the first passed and its first failure), the reward the share
of tests passed. SFT on the canonical solutions, then GRPO; held-out pass share before and
after, beside the no-learning rules (an empty body, the canonical solution).

    python -m launch.train --config configs/activemem_code_cpu.py

The 135M model rarely writes a passing program; the run shows the pipeline acting (the
sandbox's verdicts, the tree's paths and writes, gradients per head), not a solver.
"""

from configs.activemem_base import base_config, policy_defaults


def get_config():
    c = base_config()
    c.out_dir = "runs/activemem_code_cpu"
    # rows of up to 1,024 tokens: remat and micro-batches of 2 rows keep the update's memory near 3 GB
    # (without them XLA attention keeps every layer's [T, T] scores: 24 GB, measured)
    c.model.update(dtype="auto", remat=True)
    c.engine.update(max_slots=8, max_len=1024)
    # one tree across problems (the paper's procedural memory): a problem's first attempt reads what
    # earlier problems wrote; the second attempt also reads the first's node
    c.policy = policy_defaults(num_latents=1, capacity=256, max_depth=4, max_ops=8, max_tokens=192, hidden=256,
                               latent_init_std=0.02, temperature=1.0, layout="observation",
                               tree_scope="persistent", system_prompt="")
    c.data.update(name="humaneval", split="train", n_tasks=131, max_turns=2,
                  sandbox={"cpu_s": 5.0, "wall_s": 10.0, "memory_mb": 512})
    c.train.update(steps=6, sft_steps=4, group_size=4, prompts_per_step=2, mini_batch_rows=8, micro_batch_rows=2)
    c.optim.update(lr_controller=1e-3, warmup_steps=2)
    c.checkpoint.update(every=10, keep=2)
    c.eval.update(enabled=True, n_tasks=8, split="test", n_objectives=(1,), turns_per_objective=2, extra_turns=0,
                  max_turns_cap=2)
    return c
