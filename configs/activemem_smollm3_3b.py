"""ActiveMem GRPO on SmolLM3-3B, 2-objective QA (paper setup, K via --config.policy.num_latents).

    python -m launch.train --config configs/activemem_smollm3_3b.py --config.model.path=/data/SmolLM3-3B
Data (config parameter): table7 (default; 2-objective NQ + HotpotQA, eval N = 1..16),
table9 (single-objective QA), synthetic (the embedded world), code (KodCode with executed tests),
humaneval (the shipped HumanEval problems), scienceworld, alfworld, textworld (embodied text worlds):
`--config=<this file>:table9`;
set --config.data.qa_files / --config.data.index (see configs/activemem_base.paper_data).
Table 1 (configs/table1_datasets.py): `:<dataset>,sft` (ActiveMem_SFT) or `:<dataset>,grpo`
(ActiveMem_GRPO, the default) for alfworld, scienceworld, triviaqa, popqa, kodcode, bigcodebench,
gpqa, gsm8k, math, aqua; K via --config.policy.num_latents (default 4); docs/activemem.md, "Table 1".
"""

from configs.activemem_base import base_config, paper_data


def get_config(table: str = "table7"):
    c = base_config()
    c.out_dir = "runs/activemem_smollm3_3b"
    c.topology = "v5p-8"  # the slice it is sized for: python launch/aot.py --config configs/activemem_smollm3_3b.py
    c.model.scan_layers = True  # one scanned layer: compile time independent of depth (no LoRA)
    # keep the projections for the backward pass (splash attention on TPU): an update of 8 x 8,192
    # tokens keeps 38.0 GiB per v5p chip (no remat: 80.7 GiB, too close to 95 beside the engine's
    # 9.6 GiB cache); estimate 1,439 -> 1,215 ms, MFU <= 34% -> <= 40% (docs/attention_kernels.md)
    c.model.remat_policy = "dots_saveable"
    c.model.path = "/path/to/SmolLM3-3B"
    return paper_data(c, table)
