"""ActiveMem GRPO on Qwen3-8B, 2-objective QA; FSDP x tensor parallel on a pod slice.

    python -m launch.train --config configs/activemem_qwen3_8b.py --config.model.path=/data/Qwen3-8B \
        --config.mesh.tensor=4
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
    c.out_dir = "runs/activemem_qwen3_8b"
    c.topology = "v5p-16"  # the slice it is sized for: python launch/aot.py --config configs/activemem_qwen3_8b.py
    c.model.scan_layers = True  # one scanned layer: compile time independent of depth (no LoRA)
    # keep the projections for the backward pass (splash attention on TPU): an update of 8 x 8,192
    # tokens keeps 42.7 GiB per v5p chip beside the rollout engine's 23 GiB (no remat: 87.9 GiB);
    # estimate 1,605 -> 1,445 ms, MFU <= 36% -> <= 40% (docs/attention_kernels.md)
    c.model.remat_policy = "dots_saveable"
    c.model.path = "/path/to/Qwen3-8B"
    c.mesh.update(data=1, fsdp=-1, tensor=4)
    c.engine.update(max_slots=64, max_len=8192)
    return paper_data(c, table)
