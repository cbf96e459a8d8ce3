"""Serve the embedded model over the OpenAI API: python -m activemem_jax.serve --config configs/serve_embedded.py

The model and engine sections are a training config's (activemem_jax/schema.py); the
serve section holds what only a server has."""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.model = ml_collections.ConfigDict(dict(
        path="embedded",             # HF directory, .gguf file, or "embedded"
        dtype="float32",             # weights; "bfloat16" on accelerators
        activation_dtype="",         # "" = dtype; "float32" with bf16 weights: fast batched CPU decode
        quant="",                    # "int8": int8 weights, W8A8 matmuls (fastest CPU decode, logits KL ~0.005)
        remat=False))
    c.engine = ml_collections.ConfigDict(dict(
        max_slots=8,                 # concurrent decode slots (continuous batching)
        max_len=2048,                # tokens per slot (prompt + completion), multiple of 256
        max_queue=256))              # waiting requests beyond the slots; more get 503
    c.serve = ml_collections.ConfigDict(dict(
        served_model_name="smollm2-135m-instruct",
        host="127.0.0.1",            # loopback unless you mean to expose it
        port=8000))
    return c
