"""`Engine`: continuous batching over fixed decode slots, with prefix reuse.

A background thread admits queued requests into free slots (chunked prefill, reusing
the longest cached prefix any slot holds), then runs one jitted decode step for all
slots at a time; each step moves only the new tokens to the host. Text is detokenized
incrementally (constant host work per token, see detokenize.py), stop strings matched
across token boundaries; a finished or cancelled request frees its slot at once.

The prefix cache is the slots' KV rows: a free slot keeps the tokens it last held. A new
request takes the free slot whose cached prefix it continues, else the least recently
used free slot is evicted for it, so callers that alternate between different long
prompts keep each other's prefixes; a prefix held by a busy slot is copied in when that
saves enough (`prefix_policy.py`). `stats` counts prefix hits, misses and evictions.

Faults stay with the requests they concern: an exception while serving a request
finishes it with finish_reason "error" (and `Output.error`), and the engine goes on. If
a failed device call left the decode state unusable (donated buffers), the state is
rebuilt and the requests it held fail too. Only a fault the engine cannot attribute,
repeated, or one outside `Exception`, stops the thread; `health()` then says so, and
every waiting or later request gets an error instead of hanging.

    engine = Engine(load_pretrained("embedded"), max_slots=8, max_len=2048)
    outs = engine.generate(["Hello", [{"role": "user", "content": "Hi"}]], SamplingParams(temperature=0))
    async for delta in engine.stream(messages, params): ...
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import operator
import queue
import random
import threading
from typing import Optional, Sequence, Union

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from activemem_jax.engine import core
from activemem_jax.engine.constraints import Constraint, Constraints
from activemem_jax.engine.faults import FAULTS_IN_A_ROW, Faults
from activemem_jax.engine.prefill import PREFILL_CHUNK, Prefill
from activemem_jax.engine.requests import (Delta, EngineUnavailable, Output, Prompt, PromptTooLong, QueueFull,
                                           Request, RequestHandle, usage)
from activemem_jax.engine.sampling import SamplingParams
from activemem_jax.engine.scheduler import Scheduler
from activemem_jax.models.decode_kernel import paged_cache

log = logging.getLogger(__name__)


class Engine(Scheduler, Prefill, Faults):
    """The public API and the engine thread's loop; the thread's jobs live in their own
    modules: scheduling and decode steps (scheduler.py), prefill and slot choice
    (prefill.py), fault handling (faults.py); the request types in requests.py."""

    def __init__(self, model, max_slots: int = 8, max_len: int = 2048, max_queue: int = 256):
        if max_len % 256:
            raise ValueError(f"max_len={max_len}: use a multiple of 256")
        self.model = model
        self._params = model.state  # the backbone weights decoding uses (see set_weights)
        self.tokenizer = model.tokenizer
        self.eos_ids = set(model.eos_token_ids)
        # constrained decoding: compiled per request on the caller's thread, masks on the host
        self.constraints = Constraints(self.tokenizer, model.config.vocab_size, self.eos_ids)
        self.max_slots, self.max_len = max_slots, max_len
        self.rows = max_len + PREFILL_CHUNK  # slack so a padded chunk never runs off the cache
        # The decode state is sharded by the model's rules (slots over the batch axes, KV
        # heads over tensor) and every step keeps it so. The small inputs live on the same
        # mesh (replicated), so each jitted step sees the same input shardings call after
        # call and compiles once per shape bucket.
        # a paged decode kernel (model.decode_attention) reads the cache in pages
        self.paged = paged_cache(model.config, model.mesh)
        self._state_shardings = core.state_shardings(model.config, max_slots, self.rows, model.mesh,
                                                     model.rules, paged=self.paged)
        self._fns = core.compiled(model.graphdef, self._state_shardings)
        self._replicated = NamedSharding(model.mesh, PartitionSpec())
        # With slots spread over devices, a decode step runs every slot (each device its
        # own); stepping a few live rows would gather their cache rows across devices.
        self._slots_sharded = (self._state_shardings.cache.mask.spec or (None,))[0] is not None
        self._state = self._new_state()
        self._slots: list[Optional[Request]] = [None] * max_slots
        self._lengths = [0] * max_slots  # host copy of cache rows in use per slot
        self._history: list[list[int]] = [[] for _ in range(max_slots)]  # tokens whose KV a row holds
        self._used = [0] * max_slots  # when each slot's cache was last taken, copied from or released
        self._clock = 0
        self._pending: "queue.Queue[Request]" = queue.Queue(maxsize=max_queue)
        self._admission = threading.Lock()  # held while a batch is submitted (see batch())
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._rng = random.Random()
        self._error: Optional[BaseException] = None  # why the engine thread stopped
        self._current: Optional[Request] = None
        self.last_fault: Optional[str] = None  # the latest fault the engine survived
        self.stats = {"steps": 0, "decode_rows": 0, "prefill_calls": 0, "prefill_tokens": 0,
                      "cached_tokens": 0, "prefix_copies": 0, "generated_tokens": 0,
                      "faults": 0, "state_resets": 0,
                      "detokenize_s": 0.0, "prefix_hits": 0, "prefix_misses": 0, "prefix_evictions": 0}
        self._thread = threading.Thread(target=self._loop, name="engine", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ public API
    def encode(self, prompt: Prompt) -> list[int]:
        """Token ids of a text, chat messages or token ids (checked: integers in
        [0, vocab_size); a ValueError names the first bad one)."""
        if isinstance(prompt, str):
            return list(self.tokenizer(prompt)["input_ids"])
        prompt = list(prompt)
        if prompt and isinstance(prompt[0], dict):
            return self.model.encode_chat(prompt)
        return [self._token_id(t, k) for k, t in enumerate(prompt)]

    def _token_id(self, t, k: int) -> int:
        vocab = self.model.config.vocab_size
        try:
            if isinstance(t, (bool, np.bool_)):
                raise TypeError
            i = operator.index(t)
        except TypeError:
            raise ValueError(f"prompt token {k} is {t!r}: token ids must be integers") from None
        if not 0 <= i < vocab:
            raise ValueError(f"prompt token {k} is {i}: token ids must be in [0, {vocab})")
        return i

    def submit(self, prompt: Prompt, params: SamplingParams = SamplingParams(),
               latents=None, latent_positions: Optional[Sequence[int]] = None,
               hidden: str = "no") -> RequestHandle:
        """Queue one request. latents [K, d] replace the embeddings of the prompt tokens at
        `latent_positions` (ActiveMem's splice hook). hidden="also" returns the final
        hidden state of the last prompt token in `Output.hidden`; hidden="only" just
        prefills (the prompt's KV stays cached for prefix reuse) and returns it.
        `params.constraint` is compiled here: a constraint that cannot be met is a
        ValueError before anything is queued."""
        if hidden not in ("no", "also", "only"):
            raise ValueError(f"hidden={hidden!r}: use 'no', 'also' or 'only'")
        self._check_alive()
        ids = self.encode(prompt)
        if not ids:
            raise ValueError("the prompt is empty")
        if len(ids) + 1 > self.max_len:
            raise PromptTooLong(f"the prompt has {len(ids)} tokens; this engine's context is "
                                f"{self.max_len} tokens (prompt + at least 1 generated)")
        lat, pos = self._latents(latents, latent_positions, len(ids))
        seed = params.seed if params.seed is not None else self._rng.randrange(2**31)
        matcher = None
        if params.constraint is not None and hidden != "only":
            matcher = self.constraints.start(params.constraint, params.ignore_eos)
        request = Request(ids, params, seed & 0x7FFFFFFF, lat, pos, self.tokenizer, hidden)
        request.matcher = matcher
        handle = RequestHandle(self, request)
        try:
            self._pending.put_nowait(request)
        except queue.Full:
            raise QueueFull(f"{self._pending.maxsize} requests are already queued") from None
        self._check_alive()  # stopped meanwhile: nobody will take it from the queue
        self._wake.set()
        return handle

    def check_constraint(self, constraint: Constraint) -> None:
        """Compile `constraint` (kept for the requests that carry it): a ValueError says why
        it cannot be served. Thread-safe; bounded by `constraints.LIMITS`."""
        self.constraints.compile(constraint)

    def health(self) -> dict:
        """{"status": "ok" | "failed" | "closed", "message", "busy_slots", "queued",
        "faults" (survived so far), "last_fault", "prefix_cache" (hits, misses, evictions,
        cached and prefilled prompt tokens)}."""
        try:
            self._check_alive()
            status, message = "ok", None
        except EngineUnavailable as e:
            status, message = ("failed" if self._error is not None else "closed"), str(e)
        return {"status": status, "message": message, "busy_slots": self.busy_slots, "queued": self.queued,
                "faults": self.stats["faults"], "last_fault": self.last_fault,
                "prefix_cache": {"hits": self.stats["prefix_hits"], "misses": self.stats["prefix_misses"],
                                 "evictions": self.stats["prefix_evictions"],
                                 "cached_tokens": self.stats["cached_tokens"],
                                 "prefilled_tokens": self.stats["prefill_tokens"]}}

    @contextlib.contextmanager
    def batch(self):
        """Requests submitted inside `with engine.batch():` are admitted together (as slots
        allow): their prompts share batched prefill calls, and a given batch of requests
        always meets the same compiled shapes."""
        with self._admission:
            yield

    def generate(self, prompts: Union[Prompt, Sequence[Prompt]], params: SamplingParams = SamplingParams(),
                 timeout: Optional[float] = None) -> list[Output]:
        """Blocking: one Output per prompt (a single str/ids/messages prompt also works)."""
        single = isinstance(prompts, str) or (len(prompts) and isinstance(prompts[0], (int, dict)))
        with self.batch():
            handles = [self.submit(p, params) for p in ([prompts] if single else prompts)]
        return [h.result(timeout) for h in handles]

    def encode_hidden(self, prompts: Sequence[Prompt], timeout: Optional[float] = None) -> np.ndarray:
        """[n, d] final hidden states of each prompt's last token (prefill only; the
        prompts' KV stays cached, so a later request sharing a prefix reuses it)."""
        with self.batch():
            handles = [self.submit(p, hidden="only") for p in prompts]
        return np.stack([h.result(timeout).hidden for h in handles])

    async def stream(self, prompt: Prompt, params: SamplingParams = SamplingParams(), **kw):
        """Async iterator of Delta events; cancelling the consumer frees the slot."""
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()
        handle = self.submit(prompt, params, **kw)

        def deliver(delta):
            try:
                loop.call_soon_threadsafe(events.put_nowait, delta)
            except RuntimeError:  # the consumer's event loop has closed: nobody listens
                pass

        handle.request.listeners.append(deliver)
        if handle.request.output is not None:  # finished before the listener was attached
            events.put_nowait(Delta("", [], [], handle.request.output))
        try:
            while True:
                try:
                    delta = await asyncio.wait_for(events.get(), timeout=1.0)
                except asyncio.TimeoutError:  # a stopping thread finishes what it holds; this is the net
                    if handle.request.output is None and not self._thread.is_alive():
                        self._check_alive()
                        raise EngineUnavailable("the engine thread stopped") from None
                    continue
                yield delta
                if delta.output is not None:
                    return
        finally:
            if deliver in handle.request.listeners:
                handle.request.listeners.remove(deliver)
            if handle.request.output is None:
                handle.cancel()

    def set_weights(self, state):
        """Decode with other backbone weights of the same structure from now on (e.g. the
        backbone with LoRA merged in). Only while the engine is idle (between rollouts);
        cached prefixes are dropped."""
        self.clear_prefix_cache()
        self._params = state

    def clear_prefix_cache(self):
        """Forget every cached prefix (idle engine only), e.g. so that a resumed training
        run computes exactly what an uninterrupted one did."""
        if self.busy_slots or self.queued:
            raise RuntimeError("needs an idle engine (no running or queued requests)")
        self._history = [[] for _ in range(self.max_slots)]
        self._used, self._clock = [0] * self.max_slots, 0

    @property
    def queued(self) -> int:
        return self._pending.qsize()

    @property
    def busy_slots(self) -> int:
        return sum(r is not None for r in self._slots)

    def close(self):
        """Stop the engine thread; requests still queued or running finish with "error"."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ engine thread
    def _put(self, tree):
        return jax.device_put(tree, self._replicated)

    def _masks(self, placed, n: int):
        """The packed token masks of a step's n rows, [(row, request)] placed (rows of
        unconstrained requests and padding allow everything), on device; None when no
        request is constrained (the step's unmasked variant)."""
        if not any(r.matcher is not None for _, r in placed):
            return None
        mask = np.full((n, self.constraints.words), -1, np.int32)
        for j, r in placed:
            if r.matcher is not None:
                mask[j] = r.matcher.mask
        return self._put(mask)

    def _new_state(self) -> core.DecodeState:
        return core.new_state(self.model.config, self.max_slots, self.rows, self._state_shardings, self.paged)

    def _loop(self):
        why = "the engine was closed"
        try:
            unattributed = 0
            while not self._stop.is_set():
                try:
                    self._admit()
                    if any(self._slots):
                        self._step()
                    else:
                        self._wake.wait(0.05)
                        self._wake.clear()
                    unattributed = 0
                except Exception as e:  # not caught by a request's guard: fail what it touched
                    concerned = [self._current] if self._current is not None else []
                    self._current = None
                    self._fault(e, concerned)
                    unattributed = 0 if concerned else unattributed + 1
                    if unattributed >= FAULTS_IN_A_ROW:
                        raise RuntimeError(f"{FAULTS_IN_A_ROW} faults in a row outside any request; "
                                           f"the last: {self.last_fault}") from e
                    self._wake.wait(0.05)
        except BaseException as e:  # stop, and surface it to callers instead of hanging them
            self._error = e
            why = f"the engine thread failed: {type(e).__name__}: {e}"
            log.error("engine thread stopped", exc_info=e)
            if not isinstance(e, Exception):
                raise
        finally:
            stranded = [r for r in self._slots if r is not None] + [self._current]
            self._slots = [None] * self.max_slots  # no device calls from here on
            while not self._pending.empty():
                stranded.append(self._pending.get_nowait())
            for r in stranded:
                if r is not None and not r.done.is_set():
                    self._finish(r, "error", error=why)


__all__ = ["Delta", "Engine", "EngineUnavailable", "Output", "PromptTooLong", "QueueFull", "RequestHandle",
           "SamplingParams", "usage"]
