"""ActiveMem on ScienceWorld with the embedded SmolLM2-135M (CPU): the find-living-thing
task's train variations (its gold sequences run about 10 actions), up to 12 actions an
episode, one tree across episodes. SFT on the simulator's gold action sequences, then GRPO; held-out
variations (the simulator's test split) before and after, beside a random valid action
and the gold sequence on the same episodes.

    python -m launch.train --config configs/activemem_sciworld_cpu.py

Needs Java 8+ and the scienceworld package (bash launch/install.sh installs it).
"""

from configs.activemem_base import base_config, policy_defaults


def get_config():
    c = base_config()
    c.out_dir = "runs/activemem_sciworld_cpu"
    # observations of ~300-600 tokens: remat and micro-batches keep the update's memory in bounds
    c.model.update(dtype="auto", remat=True)
    c.engine.update(max_slots=8, max_len=1024)
    c.policy = policy_defaults(num_latents=1, capacity=256, max_depth=4, max_ops=32, max_tokens=16, hidden=256,
                               latent_init_std=0.02, temperature=1.0, layout="observation",
                               tree_scope="persistent", stop=("\n",), system_prompt="")
    c.data.update(name="scienceworld", split="train", n_tasks=64, max_turns=12,
                  scienceworld={"tasks": ["find-living-thing"], "simplification": "easy"})
    c.train.update(steps=6, sft_steps=4, group_size=2, prompts_per_step=2, mini_batch_rows=16, micro_batch_rows=4)
    c.optim.update(lr_controller=1e-3, warmup_steps=2)
    c.checkpoint.update(every=10, keep=2)
    c.eval.update(enabled=True, n_tasks=4, split="test", n_objectives=(1,), turns_per_objective=12, extra_turns=0,
                  max_turns_cap=12)
    return c
