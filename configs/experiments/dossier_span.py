"""The current dossier recipe, behind the published ablation table (docs/results.md):
ActiveMem on dossier streams (envs/dossier.py) with the embedded SmolLM2-135M. Entities
with grouped attributes, corrections, reminders and decoys; questions that reach back
across the episodes of a stream; one tree per stream, kept across its episodes and
checkpointed with the controller. Each step runs the next episode of 8 streams side by
side, drawn from 2,048 training streams over 3,420 names so that none repeats.

- 600 SFT steps: the tree actions follow the environment's expert writes
  (`train.sft_tree="expert"`) and the tree head learns a soft target, half the expert's
  write and half the threshold rule's action (`train.sft_head="mix"`), so it hesitates
  where the rule is wrong; a contrastive loss trains the retrieval key head; the rate
  falls on a cosine to a tenth (`optim.decay_steps=-1`).
- 40 GRPO steps on task reward at a rate of their own (`optim.lr_grpo`), two consecutive
  episodes of a stream as one rollout (`train.grpo_span=2`) so a write is credited with
  the next episode's answers that read it (`train.write_credit="to_go"`), the tree head
  sampled at temperature 1 at its own rate (`optim.lr_tree_grpo`, half the one-episode
  rate: a span step makes twice the updates) and held near the SFT head by a KL on its
  three actions (`train.tree_kl=0.1`); `policy.max_ops=32` holds two episodes' writes.

Scored on 32 held-out streams at the checkpoint chosen on validation streams of the
training names (`bench_memory --runs` with `"select": [620, 640]`). The older recipes are
override lists on this one (dossier_base, dossier_mix, dossier_kl, dossier_long).

    python -m launch.train --config configs/experiments/dossier_span.py "--config.train.seeds=()"
    python -m launch.score_streams --config configs/experiments/dossier_span.py --streams 32
"""

from configs.activemem_base import base_config, policy_defaults


def get_config():
    c = base_config()
    c.out_dir = "runs/dossier_span"
    c.model.update(dtype="auto", remat=False)  # bfloat16 on a CPU with AMX, else float32
    c.engine.update(max_slots=16, max_len=256)
    c.policy = policy_defaults(num_latents=1, capacity=256, max_children=16, max_depth=4, max_ops=32, max_tokens=3,
                               hidden=256, latent_init_std=0.02, temperature=1.0, layout="observation",
                               tree_scope="stream", idle_utility="decay", stop=("\n", "."), system_prompt="",
                               key_head=True, descend="closer", path_pool="leaf", tau_stop=0.5,
                               tree_temperature=1.0)
    c.data.update(name="dossier", max_turns=12)
    c.data.dossier.update(streams=2048, name_syllables=3)  # 8,192 episodes: none repeats in 640 steps of 8 streams
    c.train.update(steps=640, sft_steps=600, group_size=4, prompts_per_step=8, mini_batch_rows=32, seeds=(0, 1),
                   micro_batch_rows=0, sft_tree="expert", key_coef=1.0, sft_head="mix", sft_rule_share=0.5,
                   write_credit="to_go", tree_kl=0.1, grpo_span=2)
    c.optim.update(lr_controller=2e-3, lr_grpo=2e-4, lr_tree_grpo=5e-4, warmup_steps=5, decay_steps=-1,
                   final_lr_ratio=0.1)
    c.checkpoint.update(every=10, keep=2)
    c.eval.update(enabled=True, n_tasks=32)  # 8 held-out streams of 4 episodes (128 questions)
    return c
