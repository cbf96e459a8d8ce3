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
import dataclasses
import itertools
import logging
import operator
import queue
import random
import threading
import time
from typing import Callable, Optional, Sequence, Union

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from activemem_jax import shapes
from activemem_jax.engine import core
from activemem_jax.engine.detokenize import TextStream
from activemem_jax.engine.prefix_policy import PREFIX_MIN, choose, common_prefix
from activemem_jax.engine.sampling import SamplingParams

Prompt = Union[str, Sequence[int], Sequence[dict]]
PREFILL_CHUNK = max(shapes.PREFILL_BUCKETS)
PREFILL_TOKENS = 4096  # most padded tokens one batched prefill call computes
FAULTS_IN_A_ROW = 8  # loop iterations in a row whose fault concerned no request: the thread stops
log = logging.getLogger(__name__)


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
        self.output: Optional[Output] = None
        self.cancelled = False
        self.done = threading.Event()
        self.listeners: list[Callable[[Delta], None]] = []


class RequestHandle:
    def __init__(self, engine: "Engine", request: Request):
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


class Engine:
    def __init__(self, model, max_slots: int = 8, max_len: int = 2048, max_queue: int = 256):
        if max_len % 256:
            raise ValueError(f"max_len={max_len}: use a multiple of 256")
        self.model = model
        self._params = model.state  # the backbone weights decoding uses (see set_weights)
        self.tokenizer = model.tokenizer
        self.eos_ids = set(model.eos_token_ids)
        self.max_slots, self.max_len = max_slots, max_len
        self.rows = max_len + PREFILL_CHUNK  # slack so a padded chunk never runs off the cache
        # The decode state is sharded by the model's rules (slots over the batch axes, KV
        # heads over tensor) and every step keeps it so. The small inputs live on the same
        # mesh (replicated), so each jitted step sees the same input shardings call after
        # call and compiles once per shape bucket.
        self._state_shardings = core.state_shardings(model.config, max_slots, self.rows, model.mesh,
                                                     model.rules)
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
        prefills (the prompt's KV stays cached for prefix reuse) and returns it."""
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
        request = Request(ids, params, seed & 0x7FFFFFFF, lat, pos, self.tokenizer, hidden)
        handle = RequestHandle(self, request)
        try:
            self._pending.put_nowait(request)
        except queue.Full:
            raise QueueFull(f"{self._pending.maxsize} requests are already queued") from None
        self._check_alive()  # stopped meanwhile: nobody will take it from the queue
        self._wake.set()
        return handle

    def _check_alive(self):
        if self._error is not None:
            raise EngineUnavailable(f"the engine thread failed: {type(self._error).__name__}: "
                                    f"{self._error}") from self._error
        if self._stop.is_set() or not self._thread.is_alive():
            raise EngineUnavailable("the engine is closed")

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

    def _new_state(self) -> core.DecodeState:
        return core.new_state(self.model.config, self.max_slots, self.rows, self._state_shardings)

    def _latents(self, latents, positions, n_prompt):
        d = self.model.config.hidden_size
        lat = np.zeros((core.MAX_LATENTS, d), np.float32)
        pos = np.full((core.MAX_LATENTS,), -1, np.int32)
        if latents is None:
            return lat, pos
        latents = np.asarray(latents, np.float32)
        positions = list(positions or [])
        if latents.ndim != 2 or latents.shape[1] != d or len(positions) != latents.shape[0]:
            raise ValueError(f"latents must be [K, {d}] with K positions; got {latents.shape} "
                             f"and {len(positions)} positions")
        if latents.shape[0] > core.MAX_LATENTS or any(not 0 <= p < n_prompt for p in positions):
            raise ValueError(f"at most {core.MAX_LATENTS} latents, at positions inside the prompt")
        lat[: len(positions)] = latents
        pos[: len(positions)] = positions
        return lat, pos

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

    @contextlib.contextmanager
    def _guard(self, requests: Sequence[Request]):
        """Work on behalf of `requests`: an exception fails them (see _fault), not the engine."""
        try:
            yield
        except Exception as e:
            self._fault(e, requests)

    def _fault(self, error: Exception, requests: Sequence[Request]):
        """Finish `requests` with "error". If the device state did not survive (a failed
        call had its buffers donated), rebuild it: every request it held fails too."""
        self.stats["faults"] += 1
        self.last_fault = f"{type(error).__name__}: {error}"
        log.error("engine fault (failing %d request(s))", len(requests), exc_info=error)
        concerned = [r for r in requests if r is not None]
        if not self._state_usable():
            concerned += [r for r in self._slots if r is not None]
            self._slots = [None] * self.max_slots
            self._lengths = [0] * self.max_slots
            self._history = [[] for _ in range(self.max_slots)]
            self._state = self._new_state()
            self.stats["state_resets"] += 1
        for r in concerned:
            if r.done.is_set():
                continue
            if r in self._slots:  # its cache row may hold a half-written prompt
                self._history[self._slots.index(r)] = []
            self._finish(r, "error", error=self.last_fault)

    def _state_usable(self) -> bool:
        try:
            if any(leaf.is_deleted() for leaf in jax.tree.leaves(self._state)):
                return False
            jax.block_until_ready(self._state)  # a failed computation surfaces here
            return True
        except Exception:
            return False

    def _admit(self):
        for slot in range(self.max_slots):
            req = self._slots[slot]
            if req is not None and req.cancelled:
                with self._guard([req]):
                    self._finish(req, "cancelled")
        batch = []
        with self._admission:
            while not self._pending.empty() and None in self._slots:
                request = self._pending.get_nowait()
                if request.cancelled:
                    self._finish(request, "cancelled")
                    continue
                self._current = request
                with self._guard([request]):
                    batch.append(self._reserve(request))
                self._current = None
        batch = [b for b in batch if not b[0].done.is_set()]  # a state rebuild failed them
        if batch:
            self._prefill(batch)

    def _reserve(self, req: Request) -> tuple[Request, int, int]:
        """Give `req` a free slot (the policy: `prefix_policy.choose`), copying in a prefix
        another slot holds when that saves enough. Returns (req, slot, reused tokens)."""
        ids = req.prompt_ids
        limit = len(ids) - 1  # the last prompt token is always recomputed (its logits)
        used = req.latent_pos[req.latent_pos >= 0]
        if used.size:
            limit = min(limit, int(used.min()))
        match = [min(common_prefix(h, ids), limit) for h in self._history]
        free = [s for s in range(self.max_slots) if self._slots[s] is None]
        slot, source = choose(match, [len(h) for h in self._history], self._used, free)
        reuse = match[source]
        if match[slot] < PREFIX_MIN and len(self._history[slot]) >= PREFIX_MIN:
            self.stats["prefix_evictions"] += 1
        self.stats["prefix_hits" if reuse >= PREFIX_MIN else "prefix_misses"] += 1
        if source != slot:
            self._state = self._fns["copy_row"](self._state, *self._put((np.int32(source), np.int32(slot))),
                                                upto=shapes.kv_bucket(reuse, self.rows))
            self.stats["prefix_copies"] += 1
            self._touch(source)
        self._slots[slot] = req
        self._touch(slot)
        self._history[slot] = list(ids[:reuse])  # what stays valid until its prefill lands
        return req, slot, reuse

    def _touch(self, slot: int):
        self._clock += 1
        self._used[slot] = self._clock

    def _prefill(self, batch: list[tuple[Request, int, int]]):
        """Prefill reserved requests together: full 512-token chunks of long prompts first
        (batched round by round), then all last chunks as batched calls grouped by padded
        length."""
        starts = [reuse for _, _, reuse in batch]
        cap = max(1, min(self.max_slots, PREFILL_TOKENS // PREFILL_CHUNK))
        while True:  # a request that failed (done) drops out of the later calls
            long = [i for i, (req, _, _) in enumerate(batch)
                    if not req.done.is_set() and len(req.prompt_ids) - starts[i] > PREFILL_CHUNK]
            if not long:
                break
            for k in range(0, len(long), cap):
                part = [i for i in long[k:k + cap] if not batch[i][0].done.is_set()]
                if part:
                    with self._guard([batch[i][0] for i in part]):
                        self._run_prefill([(batch[i][0], batch[i][1], starts[i],
                                            batch[i][0].prompt_ids[starts[i]:starts[i] + PREFILL_CHUNK])
                                           for i in part])
            for i in long:
                starts[i] += PREFILL_CHUNK
        groups: dict[int, list] = {}
        for (req, slot, _), start in zip(batch, starts):
            ids = req.prompt_ids
            if not req.done.is_set():
                groups.setdefault(shapes.prefill_bucket(len(ids) - start), []).append(
                    (req, slot, start, ids[start:]))
        for r, items in sorted(groups.items()):
            cap = max(1, min(self.max_slots, PREFILL_TOKENS // r))
            for i in range(0, len(items), cap):
                chunk = [item for item in items[i:i + cap] if not item[0].done.is_set()]
                if chunk:
                    with self._guard([req for req, *_ in chunk]):
                        self._started(chunk, self._run_prefill(chunk), {s: u for _, s, u in batch})

    def _run_prefill(self, items):
        """One jitted prefill of chunks [(req, slot, start, tokens)], padded to a row bucket."""
        r = shapes.prefill_bucket(max(len(t) for *_, t in items))
        p = min(shapes.prefill_rows(len(items), self.max_slots), max(len(items), PREFILL_TOKENS // r))
        d = self.model.config.hidden_size
        tokens = np.zeros((p, r), np.int32)
        slots = np.full((p,), self.max_slots, np.int32)  # padding rows write nothing
        starts, lengths, top_k, seed = (np.zeros((p,), np.int32) for _ in range(4))
        temperature, top_p = np.zeros((p,), np.float32), np.ones((p,), np.float32)
        lat = np.zeros((p, core.MAX_LATENTS, d), np.float32)
        pos = np.full((p, core.MAX_LATENTS), -1, np.int32)
        for i, (req, slot, start, chunk) in enumerate(items):
            tokens[i, :len(chunk)] = chunk
            slots[i], starts[i], lengths[i] = slot, start, len(chunk)
            temperature[i], top_k[i], top_p[i] = req.params.temperature, req.params.top_k, req.params.top_p
            seed[i], lat[i], pos[i] = req.seed, req.latents, req.latent_pos
        sampling = (temperature, top_k, top_p, seed)
        args = self._put((slots, tokens, starts, lengths, lat, pos, sampling))
        self._state, *out = self._fns["prefill"](self._params, self._state, *args,
                                                 kv_len=shapes.kv_bucket(int((starts + r).max()), self.rows),
                                                 fresh=not starts.any())
        self.stats["prefill_calls"] += 1
        return args[0], args[-1], out

    def _started(self, items, prefilled, reused: dict):
        """After a prompt's last chunk: start decoding (one batched insert), record the
        cached history, hand back hidden states, emit each first token."""
        slots, sampling, (token, logprob, top_lp, top_ids, last) = prefilled
        decode = np.asarray(slots).copy()
        for i, item in enumerate(items):
            if item[0].hidden_mode == "only":  # prefill only: never starts decoding
                decode[i] = self.max_slots
        lengths = np.zeros(decode.shape, np.int32)
        lengths[:len(items)] = [len(req.prompt_ids) for req, *_ in items]
        self._state = self._fns["insert"](self._state, *self._put((decode, lengths)), token, sampling)
        token, logprob = np.asarray(token), np.asarray(logprob)
        want_top = any(req.params.top_logprobs for req, *_ in items)
        top_lp, top_ids = (np.asarray(top_lp), np.asarray(top_ids)) if want_top else (None, None)
        hidden = np.asarray(last, np.float32) if any(req.hidden_mode != "no" for req, *_ in items) else None
        for i, (req, slot, _, _) in enumerate(items):
            if req.done.is_set():  # failed by an earlier item's fault (state rebuilt)
                continue
            with self._guard([req]):
                ids = req.prompt_ids
                used = req.latent_pos[req.latent_pos >= 0]
                if req.hidden_mode != "no":
                    req.hidden = hidden[i]
                self._history[slot] = list(ids[: int(used.min())] if used.size else ids)
                req.cached_tokens = reused[slot]
                self.stats["prefill_tokens"] += len(ids) - reused[slot]
                self.stats["cached_tokens"] += reused[slot]
                if req.hidden_mode == "only":
                    self._finish(req, "stop")
                    continue
                self._lengths[slot] = len(ids)
                self._emit(req, slot, int(token[i]), float(logprob[i]),
                           None if top_lp is None else top_lp[i], None if top_ids is None else top_ids[i])

    def _step(self):
        live = [s for s in range(self.max_slots) if self._slots[s] is not None]
        kv = shapes.kv_bucket(max(self._lengths[s] for s in live) + 1, self.rows, low=128)
        width = shapes.prefill_rows(len(live), self.max_slots)  # 1, 2, 4, 8, ... rows stepped
        if self._slots_sharded:  # every device steps its own slots: picking rows would move their KV
            width = self.max_slots
        rows = None
        if width < self.max_slots:  # step only the live slots (padding: out of range)
            rows = self._put(np.asarray(live + [self.max_slots] * (width - len(live)), np.int32))
        want_top = any(self._slots[s].params.top_logprobs for s in live)
        stepped = [self._slots[s] for s in live]
        try:  # a failed step concerns every live request
            self._state, toks, lps, top_lp, top_ids = self._fns["generate"](
                self._params, self._state, rows, kv_len=kv, top=want_top)
            toks, lps = np.asarray(toks), np.asarray(lps)
            top_lp, top_ids = (np.asarray(top_lp), np.asarray(top_ids)) if want_top else (None, None)
        except Exception as e:
            return self._fault(e, stepped)
        self.stats["steps"] += 1
        self.stats["decode_rows"] += self.max_slots if rows is None else width
        for i, (s, req) in enumerate(zip(live, stepped)):
            j = s if rows is None else i  # the step's output row of slot s
            if self._slots[s] is not req:  # failed by an earlier row's fault (state rebuilt)
                continue
            with self._guard([req]):
                self._history[s].append(req.token_ids[-1])  # the token fed this step is now cached
                self._lengths[s] += 1
                self._emit(req, s, int(toks[j]), float(lps[j]),
                           None if top_lp is None else top_lp[j], None if top_ids is None else top_ids[j])

    def _emit(self, req: Request, slot: int, token: int, logprob: float, top_lp, top_ids):
        p = req.params
        if token in self.eos_ids and not p.ignore_eos:
            return self._finish(req, "stop", slot)
        req.token_ids.append(token)
        req.logprobs.append(logprob)
        if p.top_logprobs and top_lp is not None:
            req.top_logprobs.append([(int(i), float(v)) for i, v in
                                     zip(np.asarray(top_ids)[: p.top_logprobs], np.asarray(top_lp)[: p.top_logprobs])])
        self.stats["generated_tokens"] += 1
        t0 = time.perf_counter()
        piece, stopped = req.text_stream.push(token)  # constant work per token (a short window)
        self.stats["detokenize_s"] += time.perf_counter() - t0
        reason = "stop" if stopped else None
        if reason is None and len(req.token_ids) >= p.max_tokens:
            reason = "length"
        if reason is None and len(req.prompt_ids) + len(req.token_ids) >= self.max_len:
            reason = "length"
        # every token is streamed; its text may be held back (a partial stop string or UTF-8 character)
        self._send(req, Delta(piece, [token], [logprob]))
        if reason is not None:
            return self._finish(req, reason, slot)

    def _finish(self, req: Request, reason: str, slot: Optional[int] = None, error: Optional[str] = None):
        if slot is None and req in self._slots:
            slot = self._slots.index(req)
        if slot is not None and self._slots[slot] is req:
            self._state = self._fns["release"](self._state, self._put(np.int32(slot)))
            self._slots[slot] = None
            self._touch(slot)
        rest = req.text_stream.rest()  # what the stream held back (or had not decoded yet)
        req.text = req.text_stream.finish()
        req.output = Output(text=req.text, token_ids=list(req.token_ids), logprobs=list(req.logprobs),
                            top_logprobs=list(req.top_logprobs), finish_reason=reason,
                            prompt_tokens=len(req.prompt_ids), cached_tokens=req.cached_tokens,
                            hidden=req.hidden, error=error)
        self._send(req, Delta(rest, [], [], req.output))
        req.done.set()

    @staticmethod
    def _send(req: Request, delta: Delta):
        for listener in list(req.listeners):
            try:
                listener(delta)
            except Exception:  # a broken listener loses its events; the engine goes on
                log.exception("a listener of request %d failed", req.id)


__all__ = ["Delta", "Engine", "EngineUnavailable", "Output", "PromptTooLong", "QueueFull", "RequestHandle",
           "SamplingParams", "usage"]
