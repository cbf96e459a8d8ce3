"""ActiveMem on TextWorld's generated games with the embedded SmolLM2-135M (CPU): tw-simple
games (dense rewards, a detailed goal; their walkthroughs run 8-12 commands), up to 16
commands an episode, one tree across episodes. SFT on the quest solver's plan, then GRPO;
held-out games (the test seeds, with tw-simple's held-out objects) before and after, beside
a random admissible command and the plan itself on the same games.

    python -m launch.train --config configs/activemem_textworld_cpu.py

Needs the textworld package (bash launch/install.sh installs it); the games are generated
at first use into ~/.cache/activemem-jax/textworld (data.path to put them elsewhere).
"""

from configs.activemem_base import base_config, policy_defaults


def get_config():
    c = base_config()
    c.out_dir = "runs/activemem_textworld_cpu"
    # observations of ~300-500 tokens: remat and micro-batches keep the update's memory in bounds
    c.model.update(dtype="auto", remat=True)
    c.engine.update(max_slots=8, max_len=1024)
    c.policy = policy_defaults(num_latents=1, capacity=256, max_depth=4, max_ops=32, max_tokens=16, hidden=256,
                               latent_init_std=0.02, temperature=1.0, layout="observation",
                               tree_scope="persistent", stop=("\n",), system_prompt="")
    c.data.update(name="textworld", split="train", n_tasks=32, max_turns=16,
                  textworld={"challenge": "tw-simple", "args": "--rewards dense --goal detailed"})
    c.train.update(steps=6, sft_steps=4, group_size=2, prompts_per_step=2, mini_batch_rows=16, micro_batch_rows=4)
    c.optim.update(lr_controller=1e-3, warmup_steps=2)
    c.checkpoint.update(every=10, keep=2)
    c.eval.update(enabled=True, n_tasks=4, split="test", n_objectives=(1,), turns_per_objective=16, extra_turns=0,
                  max_turns_cap=16)
    return c
