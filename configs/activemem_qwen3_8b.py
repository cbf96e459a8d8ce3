"""ActiveMem GRPO on Qwen3-8B, 2-objective QA; FSDP x tensor parallel on a pod slice.

    python -m launch.train --config configs/activemem_qwen3_8b.py --config.model.path=/data/Qwen3-8B \
        --config.mesh.tensor=4
"""

from configs.activemem_base import base_config


def get_config():
    c = base_config()
    c.out_dir = "runs/activemem_qwen3_8b"
    c.topology = "v5p-16"  # the slice it is sized for: python launch/aot.py --config configs/activemem_qwen3_8b.py
    c.model.scan_layers = True  # one scanned layer: compile time independent of depth (no LoRA)
    c.model.path = "/path/to/Qwen3-8B"
    c.mesh.update(data=1, fsdp=-1, tensor=4)
    c.engine.update(max_slots=64, max_len=8192)
    return c
