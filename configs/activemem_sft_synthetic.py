"""SFT of the controller on oracle (expert) trajectories of the synthetic benchmark:
cross-entropy on the expert's tokens through the injected prefix; the tree head imitates
the threshold rule (insert when no child reaches tau_stop, else update the leaf).

    python -m launch.train --config configs/activemem_sft_synthetic.py [--config.model.path=...]
"""

from configs.activemem_base import base_config


def get_config():
    c = base_config()
    c.out_dir = "runs/activemem_sft_synthetic"
    c.model.update(path="embedded", dtype="float32", remat=False)
    c.engine.update(max_slots=8, max_len=2048)
    c.policy.update(num_latents=2, capacity=256, hidden=128)
    c.data.update(n_objectives=(1, 2), n_tasks=64, max_turns=8)
    c.train.update(algo="sft", steps=20, group_size=1, prompts_per_step=2, mini_batch_rows=8,
                   micro_batch_rows=1)
    c.optim.update(lr_controller=1e-4, warmup_steps=5)
    c.checkpoint.update(every=10)
    return c
