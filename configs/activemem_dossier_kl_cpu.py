"""The dossier recipe that reached 0.8 held-out (docs/memory_streams.md section 20):
configs/activemem_dossier_mix_cpu.py on 3,420 training names (`data.dossier.name_syllables=3`;
190 let the controller fit names it will not see again), twice the SFT (600 steps: reading
the newest write of a fact rose from 0.81 to 0.95 of the questions whose path ends on it),
then 40 GRPO steps in which the tree head is held near the head SFT left it with
(`train.tree_kl=0.1`, a KL on its three actions: without it 20 GRPO steps turned the
corrections into inserts or noops on some seeds). The step-600 checkpoint (the SFT-only
row) is kept for good by the trainer. About 76 minutes a run on 2 cores.

    python -m launch.train --config configs/activemem_dossier_kl_cpu.py "--config.train.seeds=()"
    python -m launch.score_streams --config configs/activemem_dossier_kl_cpu.py --step 600  # SFT only
"""

from configs.activemem_dossier_mix_cpu import get_config as mix_config


def get_config():
    c = mix_config()
    c.out_dir = "runs/activemem_dossier_kl_cpu"
    c.data.dossier.update(name_syllables=3)
    c.train.update(steps=640, sft_steps=600, tree_kl=0.1)
    return c
