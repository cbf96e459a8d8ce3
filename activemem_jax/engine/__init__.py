"""Generation engine: static-shape KV cache, fixed decode slots, continuous batching.

core.py holds the pure jitted steps; engine.py the `Engine` (public API and its thread's
loop), with the thread's jobs in scheduler.py, prefill.py and faults.py and the request
types in requests.py.

    from activemem_jax.engine import Engine, SamplingParams
"""

from activemem_jax.engine.engine import Engine
from activemem_jax.engine.requests import (Delta, EngineUnavailable, Output, PromptTooLong, QueueFull, RequestHandle,
                                           usage)
from activemem_jax.engine.sampling import SamplingParams

__all__ = ["Delta", "Engine", "EngineUnavailable", "Output", "PromptTooLong", "QueueFull", "RequestHandle",
           "SamplingParams", "usage"]
