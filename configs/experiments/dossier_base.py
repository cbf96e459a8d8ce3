"""The first dossier recipe: the tree head imitates the expert's writes alone
(`train.sft_head="acted"`), 20 one-episode GRPO steps with the head sampled at
temperature 8 (after SFT its choices are 10-50 nats apart and its GRPO gradient is exactly
0 at T = 1), credit per episode, 190 training names (two-syllable names).

    python -m launch.train --config configs/experiments/dossier_base.py "--config.train.seeds=()"
"""

from configs.experiments._overrides import on_span

OVERRIDES = ("out_dir=runs/dossier_base", "data.dossier.name_syllables=2", "policy.max_ops=16",
             "policy.tree_temperature=8.0", "train.steps=620", "train.sft_head=acted", "train.write_credit=episode",
             "train.tree_kl=0.0", "train.grpo_span=1", "optim.lr_tree_grpo=0.0")


def get_config():
    return on_span(OVERRIDES)
