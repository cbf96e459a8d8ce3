"""A dossier recipe (docs/results.md, recipes tried):
configs/activemem_dossier_mix_cpu.py on 3,420 training names (`data.dossier.name_syllables=3`;
190 let the controller fit names it will not see again), twice the SFT (600 steps: reading
the newest write of a fact rose from 0.81 to 0.93-0.95 of the questions whose path ends on
it), then 40 GRPO steps in which the tree head is held near the head SFT left it with
(`train.tree_kl=0.1`, a KL on its three actions: without it 20 GRPO steps turned the
corrections into inserts or noops on some seeds). Held-out: 0.742 on a fresh seed (0.516
after SFT), 0.805 on a seed trained in three restarted pieces; its checkpoints up to 80
GRPO steps move by +-0.05, a level of about 0.77 (on 32 held-out streams the two score
0.748 and 0.773; a perfect memory emptied each episode 0.778). The step-600 checkpoint (the SFT-only
row) is kept for good by the trainer. 74 minutes of step time a run on 2 cores.

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
