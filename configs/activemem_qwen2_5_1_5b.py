"""ActiveMem GRPO on Qwen2.5-1.5B-Instruct (the paper's main backbone), 2-objective QA.

    python -m launch.train --config configs/activemem_qwen2_5_1_5b.py \
        --config.model.path=/data/models/Qwen2.5-1.5B-Instruct --config.policy.num_latents=8
K in {2, 4, 8}: --config.policy.num_latents. Paper 6.1: rollout and mini-batch 64,
lr 1e-5 (controller) / 1e-6 (LoRA), 50 warmup steps, temperature 1.0 (eval 0.01).
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
    c.out_dir = "runs/activemem_qwen2_5_1_5b"
    c.topology = "v5p-8"  # the slice it is sized for: python launch/aot.py --config configs/activemem_qwen2_5_1_5b.py
    c.model.scan_layers = True  # one scanned layer: compile time independent of depth (no LoRA)
    # no remat: with splash attention (model.attention auto on TPU) an update of 8 x 8,192 tokens
    # keeps 49.8 GiB of v5p's 95 per chip, and the compiler's estimate drops from 788 to 562 ms
    # (MFU <= 30% -> <= 43%); with attention=xla set remat=True (docs/attention_kernels.md)
    c.model.remat = False
    c.model.path = "/path/to/Qwen2.5-1.5B-Instruct"  # a local Hugging Face directory
    c.mesh.update(data=1, fsdp=-1, tensor=1)
    return paper_data(c, table)
