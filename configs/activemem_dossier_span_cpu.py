"""The span recipe behind the published ablation table (docs/results.md): configs/activemem_dossier_kl_cpu.py
(600 SFT steps on 3,420 names, 40 GRPO steps with `train.tree_kl=0.1`) with GRPO rollouts
that run two consecutive episodes of a stream as one (`train.grpo_span=2`), so a write is
credited with the next episode's answers that read it, at half the kl recipe's tree-head
GRPO rate (`optim.lr_tree_grpo=5e-4`: a span step makes twice the updates);
`policy.max_ops=32` holds two episodes' writes. Branched from the kl runs' step 600 (or
trained from scratch), scored on 32 held-out streams at the checkpoint chosen on
validation streams of the training names (`bench_memory --runs` with `"select": [620,
640]`): the published ablation table,
docs/results.md, with the rules that need no training up to a perfect memory of the 8
newest attributes, which reaches 0.962 on those questions and is above every trained row.
The SFT phase and the step-600 checkpoint are the kl recipe's, so a kl run's directory can
branch here at step 600. Figures: docs/results.md.

    python -m launch.train --config configs/activemem_dossier_span_cpu.py "--config.train.seeds=()"
    python -m launch.score_streams --config configs/activemem_dossier_span_cpu.py --streams 32
"""

from configs.activemem_dossier_kl_cpu import get_config as kl_config


def get_config():
    c = kl_config()
    c.out_dir = "runs/activemem_dossier_span_cpu"
    c.policy.update(max_ops=32)
    c.train.update(grpo_span=2)
    c.optim.update(lr_tree_grpo=5e-4)  # a span step makes twice the updates: half the kl recipe's head rate
    return c
