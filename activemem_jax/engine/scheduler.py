"""Which requests run, one decode step for all of them, and how each ends (the Engine's
scheduler, a mixin).

`_admit` fails cancelled requests and moves queued ones into free slots (as one batch
when they were submitted inside `Engine.batch()`); `_step` runs one jitted decode step
over the live slots (only those rows, padded to a power of two, unless the slots are
sharded over devices); `_emit` records a token, streams its text and decides whether the
request stops; `_finish` frees the slot and hands the caller its `Output`. Uses the
Engine's `_slots`, `_lengths`, `_history`, `_pending`, `_admission`, `_current`, `_state`,
`_fns`, `_params`, `stats`, `eos_ids`, `max_slots`, `max_len`, `rows` and its `_guard`,
`_fault`, `_reserve`, `_prefill`, `_touch` and `_put`.
"""

from __future__ import annotations

import logging
import time
from typing import Optional

import numpy as np

from activemem_jax import shapes
from activemem_jax.engine.requests import Delta, Output, Request

log = logging.getLogger("activemem_jax.engine.engine")


class Scheduler:
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
            mask = self._masks([(s if rows is None else i, req) for i, (s, req) in enumerate(zip(live, stepped))],
                               self.max_slots if rows is None else width)
            self._state, toks, lps, top_lp, top_ids = self._fns["generate"](
                self._params, self._state, rows, mask, kv_len=kv, top=want_top)
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
        if token in self.eos_ids and (not p.ignore_eos or req.matcher is not None):  # a constraint masks
            return self._finish(req, "stop", slot)  # EOS out (ignore_eos) until it is complete
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
        error = None
        if reason is None and req.matcher is not None:  # the automaton advances; the next mask
            status = req.matcher.advance(token)
            if status == "done":  # complete: nothing but EOS may follow
                reason = "stop"
            elif status is not None:  # cannot go on (a limit hit, a dead end): this request fails
                reason, error = "error", status
        # every token is streamed; its text may be held back (a partial stop string or UTF-8 character)
        self._send(req, Delta(piece, [token], [logprob]))
        if reason is not None:
            return self._finish(req, reason, slot, error=error)

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


__all__ = ["Scheduler"]
