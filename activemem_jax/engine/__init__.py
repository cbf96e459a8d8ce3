"""Generation engine: static-shape KV cache, fixed decode slots, continuous batching.

    from activemem_jax.engine import Engine, SamplingParams
"""

from activemem_jax.engine.engine import (Delta, Engine, EngineUnavailable, Output, PromptTooLong, QueueFull,
                                         RequestHandle, usage)
from activemem_jax.engine.sampling import SamplingParams

__all__ = ["Delta", "Engine", "EngineUnavailable", "Output", "PromptTooLong", "QueueFull", "RequestHandle",
           "SamplingParams", "usage"]
