"""The dossier recipe where GRPO beats SFT (docs/results.md, recipes tried): 300 SFT steps
on dossier streams in which the tree head learns a soft target, half the expert's write
and half the threshold rule's action on the same state (`train.sft_head="mix"`), so it is
sure where the two agree (a new entity's fact, a correction) and hesitates where the rule
is wrong (a decoy, a question, a known entity's new attribute); then 20 GRPO steps in
which only task reward decides those writes: the head sampled at temperature 1, its own
rate (`optim.lr_tree_grpo`), each write credited with the answers after it
(`train.write_credit="to_go"`). Everything else is configs/activemem_dossier_cpu.py.
This is the base of `python -m launch.bench_memory --task dossier` (its "full" and "SFT
only" rows).

    python -m launch.train --config configs/activemem_dossier_mix_cpu.py "--config.train.seeds=()"
    python -m launch.score_streams --config configs/activemem_dossier_mix_cpu.py --step 300  # SFT only
"""

from configs.activemem_dossier_cpu import get_config as dossier_config


def get_config():
    c = dossier_config()
    c.out_dir = "runs/activemem_dossier_mix_cpu"
    c.policy.update(tree_temperature=1.0)  # sampled in GRPO only; SFT acts by the expert's writes
    c.train.update(steps=320, sft_steps=300, sft_head="mix", sft_rule_share=0.5, write_credit="to_go")
    c.optim.update(lr_tree_grpo=1e-3)
    return c
