"""ActiveMem GRPO on Qwen3-30B-A3B-Instruct-2507 (the paper's Table 10 backbone, a Qwen3-MoE:
128 experts, 8 per token, 30.5B parameters of which 3.35B act per token), 2-objective QA;
FSDP x tensor parallel on a pod slice, experts replicated over the expert axis and sharded as
the dense MLP is (hidden over fsdp, width over tensor).

    python -m launch.train --config configs/activemem_qwen3_30b_a3b.py \
        --config.model.path=/data/Qwen3-30B-A3B-Instruct-2507
    python launch/aot.py --config configs/activemem_qwen3_30b_a3b.py   # per-chip memory on `topology`
Data (config parameter): table7 (default; 2-objective NQ + HotpotQA, eval N = 1..16),
table9 (single-objective QA), synthetic (the embedded world), code (KodCode with executed tests),
humaneval (the shipped HumanEval problems), scienceworld, alfworld, textworld (embodied text worlds):
`--config=<this file>:table9`;
set --config.data.qa_files / --config.data.index (see configs/activemem_base.paper_data).
"""

from configs.activemem_base import base_config, paper_data


def get_config(table: str = "table7"):
    c = base_config()
    c.out_dir = "runs/activemem_qwen3_30b_a3b"
    c.topology = "v5p-16"  # the slice it is sized for (docs/pods.md)
    c.model.scan_layers = True  # every layer sparse, so one scanned layer serves all 48 (no LoRA)
    # recompute each layer in the backward pass: keeping the projections (dots_saveable, as the 8B
    # does) asks 103.9 GiB of temporaries per v5p chip for an update of 8 x 8,192 tokens, whose
    # 65,536 x 8 expert rows per layer keep their grouped-matmul outputs; full remat: 30.6 GiB
    c.model.remat_policy = "full"
    c.model.path = "/path/to/Qwen3-30B-A3B-Instruct-2507"  # aot.ARCHITECTURES knows its shapes
    c.mesh.update(data=1, fsdp=-1, tensor=4)
    c.engine.update(max_slots=64, max_len=8192)
    return paper_data(c, table)
