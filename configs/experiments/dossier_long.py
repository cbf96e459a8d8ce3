"""The first recipe on streams three times as long, so that episode-end maintenance has
work: 12 episodes a stream, so by the last episode three quarters of what a stream's tree
holds is never asked again. The prune removes a quarter of the nodes at each episode end
(`policy.prune_fraction=0.25`, about the rate new attributes arrive; the paper's rule is a
utility threshold; docs/results.md, confounds); a node the episode wrote counts as activated
(`policy.credit_writes`), its first activation sets its utility
(`policy.utility_start="first"`), and an unread node decays at beta 0.3.

    python -m launch.train --config configs/experiments/dossier_long.py "--config.train.seeds=()"
"""

from configs.experiments._overrides import on_span

OVERRIDES = ("out_dir=runs/dossier_long", "data.dossier.episodes=12", "data.dossier.name_syllables=2",
             "eval.n_tasks=96", "policy.credit_writes=True", "policy.ema_beta=0.3", "policy.max_ops=16",
             "policy.prune_fraction=0.25", "policy.tree_temperature=8.0", "policy.utility_start=first",
             "train.steps=620", "train.sft_head=acted", "train.write_credit=episode", "train.tree_kl=0.0",
             "train.grpo_span=1", "optim.lr_tree_grpo=0.0")


def get_config():
    return on_span(OVERRIDES)
