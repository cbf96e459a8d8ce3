"""What a caller holds and gets back from the engine: the request record the engine thread
fills, the handle returned by `Engine.submit`, the streamed `Delta` events, the final
`Output` and its OpenAI usage, and the errors `submit` raises."""

from __future__ import annotations

import dataclasses
import itertools
import queue
import threading
from typing import Callable, Optional, Sequence, Union

import numpy as np

from activemem_jax.engine.detokenize import TextStream
from activemem_jax.engine.sampling import SamplingParams

Prompt = Union[str, Sequence[int], Sequence[dict]]


class QueueFull(RuntimeError):
    """The request queue is full; retry later."""


class PromptTooLong(ValueError):
    """The prompt does not fit the engine's cache."""


class EngineUnavailable(RuntimeError):
    """The engine thread has stopped (closed, or failed); nothing more will be served."""


@dataclasses.dataclass
class Output:
    text: str
    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[list[tuple[int, float]]]
    finish_reason: str  # "stop" | "length" | "cancelled" | "error" (engine failure)
    prompt_tokens: int
    cached_tokens: int
    hidden: Optional[np.ndarray] = None  # [d] final hidden state of the last prompt token
    error: Optional[str] = None  # what failed, when finish_reason == "error"

    @property
    def completion_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def usage(self) -> dict:
        return usage([self])


def usage(outputs, n: int = 1) -> dict:
    """OpenAI usage of `outputs`, `n` consecutive ones per prompt (a request's n choices):
    each prompt counts once; its cached tokens are those no choice had to prefill (the
    fewest any of its choices reused)."""
    outputs = list(outputs)
    groups = [outputs[i:i + n] for i in range(0, len(outputs), max(n, 1))]
    prompt = sum(g[0].prompt_tokens for g in groups)
    completion = sum(o.completion_tokens for o in outputs)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": sum(min(o.cached_tokens for o in g) for g in groups)}}


@dataclasses.dataclass
class Delta:
    """A streaming event: new text (and tokens); `output` is set on the last one."""
    text: str
    token_ids: list[int]
    logprobs: list[float]
    output: Optional[Output] = None


class Request:
    _ids = itertools.count()

    def __init__(self, prompt_ids, params: SamplingParams, seed: int, latents, latent_pos,
                 tokenizer, hidden: str = "no"):
        self.id = next(self._ids)
        self.hidden_mode = hidden  # "no" | "also" (return it) | "only" (prefill, no decode)
        self.hidden: Optional[np.ndarray] = None
        self.prompt_ids = list(prompt_ids)
        self.params = params
        self.seed = seed
        self.latents = latents
        self.latent_pos = latent_pos
        self.token_ids: list[int] = []
        self.logprobs: list[float] = []
        self.top_logprobs: list[list[tuple[int, float]]] = []
        self.text = ""  # set when it finishes
        self.text_stream = TextStream(tokenizer, params.stop)
        self.cached_tokens = 0
        self.matcher = None  # a constrained request's constraints.Matcher (its next-token mask)
        self.output: Optional[Output] = None
        self.cancelled = False
        self.done = threading.Event()
        self.listeners: list[Callable[[Delta], None]] = []


class RequestHandle:
    """A caller's view of one queued request: its result, its stream of deltas, cancel."""

    def __init__(self, engine, request: Request):
        self._engine, self.request = engine, request
        self._events: "queue.Queue[Delta]" = queue.Queue()
        request.listeners.append(self._events.put)

    def result(self, timeout: Optional[float] = None) -> Output:
        if not self.request.done.wait(timeout):
            raise TimeoutError(f"request {self.request.id} not finished after {timeout}s")
        return self.request.output

    def __iter__(self):
        while True:
            delta = self._events.get()
            yield delta
            if delta.output is not None:
                return

    def cancel(self):
        self.request.cancelled = True
        self._engine._wake.set()


__all__ = ["Delta", "EngineUnavailable", "Output", "Prompt", "PromptTooLong", "QueueFull", "Request", "RequestHandle",
           "usage"]
