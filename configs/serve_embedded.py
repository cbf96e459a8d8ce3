"""Serve the embedded model over the OpenAI API: python -m activemem_jax.serve --config configs/serve_embedded.py"""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.serve = ml_collections.ConfigDict(dict(
        model="embedded",            # HF directory, .gguf file, or "embedded"
        served_model_name="smollm2-135m-instruct",
        host="127.0.0.1",            # loopback unless you mean to expose it
        port=8000,
        dtype="float32",             # weights; "bfloat16" on accelerators
        activation_dtype="",         # "" = dtype; "float32" with bf16 weights: fast batched CPU decode
        quant="",                    # "int8": int8 weights, W8A8 matmuls (fastest CPU decode, logits KL ~0.005)
        max_slots=8,                 # concurrent decode slots (continuous batching)
        max_len=2048,                # tokens per slot (prompt + completion), multiple of 256
        max_queue=256,               # waiting requests beyond the slots; more get 503
    ))
    return c
