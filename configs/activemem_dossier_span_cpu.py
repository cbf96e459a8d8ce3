"""The dossier recipe of docs/memory_streams.md section 22: configs/activemem_dossier_kl_cpu.py
(600 SFT steps on 3,420 names, 40 GRPO steps with `train.tree_kl=0.1`) with GRPO rollouts
that run two consecutive episodes of a stream as one (`train.grpo_span=2`), so a write is
credited with the next episode's answers that read it; `policy.max_ops=32` holds two
episodes' writes. With one episode a rollout the head went on writing questions over the
facts they ask about (their harm shows only in the next episode). Branched from the kl
runs' step 600, on 32 held-out streams: seed 1 0.811 (0.748 without the span), seed 2
0.828 (both then noop every question), seed 0 0.643 (0.828 on 8 streams 10 steps in, then
its head drifted): not yet stable across seeds. The SFT phase and the step-600 checkpoint are the
kl recipe's, so a kl run's directory can branch here at step 600. Figures: section 22.

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
