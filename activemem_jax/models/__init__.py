"""The frozen decoder backbone and its loaders.

    from activemem_jax.models import load_pretrained
    model = load_pretrained("embedded", dtype="float32")  # HF dir, .gguf file, or "embedded"
    model.config, model.tokenizer
    model.logits(token_ids)  # int [B, T] -> np.float32 [B, T, vocab]
"""

from activemem_jax.models.checkpoint_files import CheckpointError
from activemem_jax.models.config import ModelConfig, RopeConfig, UnsupportedModelError
from activemem_jax.models.decoder import BackboneWeight, Decoder
from activemem_jax.models.embedded import embedded_gguf_path
from activemem_jax.models.generate import greedy_generate
from activemem_jax.models.kv_cache import KVCache
from activemem_jax.models.loading import (PretrainedModel, forward, load_from_config, load_pretrained,
                                         positions_from_mask)

__all__ = [
    "BackboneWeight", "CheckpointError", "Decoder", "KVCache", "ModelConfig", "PretrainedModel",
    "RopeConfig", "UnsupportedModelError", "embedded_gguf_path", "forward", "greedy_generate",
    "load_from_config", "load_pretrained", "positions_from_mask",
]
