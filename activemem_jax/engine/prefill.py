"""Admitted requests into their slots' caches (the Engine's prefill, a mixin).

`_reserve` gives a request a free slot, by the prefix policy (`prefix_policy.choose`),
copying in a prefix another slot holds when that saves enough; `_prefill` runs the
prompts' chunks as batched jitted calls (full 512-token chunks of long prompts first,
round by round, then all last chunks grouped by padded length); `_started` starts decoding
and emits each first token. Uses the Engine's `_slots`, `_history`, `_used`, `_clock`,
`_state`, `_fns`, `_params`, `stats`, `model`, `max_slots`, `rows` and its `_guard`,
`_put`, `_emit` and `_finish`.
"""

from __future__ import annotations

import numpy as np

from activemem_jax import shapes
from activemem_jax.engine import core
from activemem_jax.engine.prefix_policy import PREFIX_MIN, choose, common_prefix
from activemem_jax.engine.requests import Request

PREFILL_CHUNK = max(shapes.PREFILL_BUCKETS)
PREFILL_TOKENS = 4096  # most padded tokens one batched prefill call computes


class Prefill:
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
                        self._started(chunk, self._run_prefill(chunk, last=True), {s: u for _, s, u in batch})

    def _run_prefill(self, items, last: bool = False):
        """One jitted prefill of chunks [(req, slot, start, tokens)], padded to a row bucket;
        `last`: the prompts' last chunks, whose first tokens are sampled (under their
        constraints' masks)."""
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
        mask = self._masks([(i, item[0]) for i, item in enumerate(items)], p) if last else None
        self._state, *out = self._fns["prefill"](self._params, self._state, *args, mask,
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


__all__ = ["PREFILL_CHUNK", "PREFILL_TOKENS", "Prefill"]
