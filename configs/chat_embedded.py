"""Load a frozen backbone and answer one chat question (the foundation's main job).

    python launch/chat.py --config=configs/chat_embedded.py \
        --config.model.path=/ckpt/Qwen2.5-1.5B-Instruct --config.mesh.tensor=4
"""

import ml_collections

from activemem_jax.sharding import DEFAULT_RULES


def get_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.model = ml_collections.ConfigDict(dict(
        path="embedded",  # HF directory, .gguf file, or "embedded" (SmolLM2-135M-Instruct)
        dtype="float32",  # "bfloat16" on accelerators
        remat=False,
    ))
    # Mesh (data, fsdp, tensor); -1 takes the remaining devices.
    c.mesh = ml_collections.ConfigDict(dict(data=1, fsdp=-1, tensor=1))
    # Logical axis -> mesh axes; override one entry with --config.sharding.rules.heads=None
    c.sharding = ml_collections.ConfigDict(dict(rules=dict(DEFAULT_RULES)))
    c.question = "What is the capital of France? Answer in one word."
    c.max_new_tokens = 64
    return c
