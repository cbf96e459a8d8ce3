"""The recipe where GRPO first beat SFT: the mixed tree-head target, 300 SFT steps, 20
one-episode GRPO steps with each write credited with the answers after it, 190 training
names, no KL on the head. The default base of `python -m launch.bench_memory --task dossier`.

    python -m launch.train --config configs/experiments/dossier_mix.py "--config.train.seeds=()"
"""

from configs.experiments._overrides import on_span

OVERRIDES = ("out_dir=runs/dossier_mix", "data.dossier.name_syllables=2", "policy.max_ops=16", "train.steps=320",
             "train.sft_steps=300", "train.tree_kl=0.0", "train.grpo_span=1", "optim.lr_tree_grpo=1e-3")


def get_config():
    return on_span(OVERRIDES)
