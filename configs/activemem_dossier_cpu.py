"""ActiveMem on dossier streams (envs/dossier.py) with the embedded SmolLM2-135M: entities
with grouped attributes, corrections, reminders and decoys, questions that reach back
across the episodes of a stream. The tree persists across episodes (and is checkpointed
with the controller); each step runs the next episode of 8 streams side by side
(data/streams.py), drawn from 2,048 training streams so that none repeats. 600 SFT steps
(the tree actions follow the environment's expert writes, `train.sft_tree="expert"`; a
supervised contrastive loss trains the retrieval key head) with the rate falling on a
cosine to a tenth over them (`optim.decay_steps=-1`), then 20 GRPO steps on task reward at a rate of
their own (`optim.lr_grpo`; at the SFT rate GRPO collapses to reward 0) with the tree head
sampled at temperature 8 (after SFT its choices are 10-50 nats apart and its GRPO gradient
is exactly 0 at T = 1). Held-out streams before vs after, beside the rules that need no
training (store_all is the threshold rule with perfect retrieval). The switches and what
was measured to choose them: the runs logged in the git history of docs/memory_streams.md.

    python -m launch.train --config configs/activemem_dossier_cpu.py "--config.train.seeds=()"
"""

from configs.activemem_base import base_config, policy_defaults


def get_config():
    c = base_config()
    c.out_dir = "runs/activemem_dossier_cpu"
    c.model.update(dtype="auto", remat=False)
    c.engine.update(max_slots=16, max_len=256)
    c.policy = policy_defaults(num_latents=1, capacity=256, max_children=16, max_depth=4, max_ops=16, max_tokens=3,
                               hidden=256, latent_init_std=0.02, temperature=1.0, layout="observation",
                               tree_scope="stream", idle_utility="decay", stop=("\n", "."), system_prompt="",
                               key_head=True, descend="closer", path_pool="leaf", tau_stop=0.5,
                               tree_temperature=8.0)
    c.data.update(name="dossier", max_turns=12)
    c.data.dossier.update(streams=2048)  # 600 steps x 8 streams run 4,800 of its 8,192 episodes
    c.train.update(steps=620, sft_steps=600, group_size=4, prompts_per_step=8, mini_batch_rows=32, seeds=(0, 1),
                   micro_batch_rows=0, sft_tree="expert", key_coef=1.0)
    c.optim.update(lr_controller=2e-3, lr_grpo=2e-4, warmup_steps=5, decay_steps=-1, final_lr_ratio=0.1)  # over SFT
    c.checkpoint.update(every=10, keep=2)
    c.eval.update(enabled=True, n_tasks=32)  # 8 held-out streams of 4 episodes (128 questions)
    return c
