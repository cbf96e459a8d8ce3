"""The recipe before the span: 600 SFT steps on 3,420 names and 40 one-episode GRPO steps
with the KL on the tree head, at the one-episode head rate.

    python -m launch.train --config configs/experiments/dossier_kl.py "--config.train.seeds=()"
    python -m launch.score_streams --config configs/experiments/dossier_kl.py --step 600  # SFT only
"""

from configs.experiments._overrides import on_span

OVERRIDES = ("out_dir=runs/dossier_kl", "policy.max_ops=16", "train.grpo_span=1", "optim.lr_tree_grpo=1e-3")


def get_config():
    return on_span(OVERRIDES)
