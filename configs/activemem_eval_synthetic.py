"""ActiveMem vs the frozen model (full history) and its truncated-context variant on the
synthetic N-objective multi-hop QA (the ActiveMem paper's Table 7 / Figure 4 setup).

    python -m launch.eval_activemem --config configs/activemem_eval_synthetic.py
    python -m launch.eval_activemem --config configs/activemem_eval_synthetic.py \
        --config.checkpoint=runs/activemem_tiny_cpu/checkpoints --config.data.n_tasks=8
Ablations of the `activemem` variant: --config.policy.num_latents=0 (w/o latent
injection), --config.policy.use_tree=False (w/o HLMT), --config.policy.tree_actions=False
(w/o tree action head), --config.policy.maintenance=False (w/o merge/delete).
"""

import ml_collections

from activemem_jax.activemem.text_memory import eval_fields
from configs.activemem_base import policy_defaults


def get_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    # 16 slots: the 5 N x 2 tasks of a variant run in one batch
    c.model = ml_collections.ConfigDict(dict(path="embedded", dtype="float32"))
    c.engine = ml_collections.ConfigDict(dict(max_slots=16, max_len=4096))  # the training configs' names
    c.policy = policy_defaults(num_latents=4, max_tokens=96, capacity=1024)
    c.data = ml_collections.ConfigDict(dict(
        seed=0, n_entities=2000, split="test", n_objectives=(1, 2, 4, 8, 16), n_tasks=2))
    # turns per episode: min(max_turns_cap, turns_per_objective * N + extra_turns), as training's eval section
    c.eval = ml_collections.ConfigDict(dict(turns_per_objective=2, extra_turns=1, max_turns_cap=12,
                                           **eval_fields()))  # memorybank / expel (text_memory.py)
    c.variants = ("activemem", "plain", "truncate")
    c.temperature = 0.01   # paper 6.1 evaluation temperature
    c.seed = 0
    c.checkpoint = ""      # a training run's checkpoint directory (its latest step is restored)
    c.out_dir = "runs/activemem_eval_synthetic"
    return c
