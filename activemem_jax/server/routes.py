"""The server's routes as methods of one object that holds the engine and the served
names; `Routes.register` puts them on a FastAPI app."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import time
import uuid
from typing import Any, Optional, Sequence

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from activemem_jax.engine import Engine, SamplingParams, usage
from activemem_jax.server.schema import (DEFAULT_MAX_TOKENS, APIError, ChatRequest, CommonRequest, CompletionRequest,
                                         api_error, error_body, failed, finish_reason)
from activemem_jax.server.structured import checked

DISCONNECT_POLL_S = 0.25  # how often a non-streaming request checks that its client is still there


class Routes:
    """POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health on
    `engine`; `names` are the model ids a request may ask for (the first is the default id
    of replies)."""

    def __init__(self, engine: Engine, names: Sequence[str]):
        self.engine, self.names, self.tokenizer = engine, list(names), engine.tokenizer

    def register(self, app: FastAPI) -> None:
        app.add_api_route("/health", self.health, methods=["GET"])
        app.add_api_route("/v1/models", self.models, methods=["GET"])
        app.add_api_route("/v1/chat/completions", self.chat, methods=["POST"])
        app.add_api_route("/v1/completions", self.completions, methods=["POST"])

    async def health(self):
        state = self.engine.health()
        if state["status"] == "ok":
            return state
        return JSONResponse({**state, **error_body(503, state["message"], code="engine_unavailable",
                                                    kind="server_error")}, status_code=503)

    async def models(self):
        return {"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "activemem-jax"}
                                           for n in self.names]}

    def served(self, req: CommonRequest) -> str:
        """The id a reply carries: the one the request asked for, else the first name."""
        return req.model if req.model in self.names else self.names[0]

    def check_n(self, req: CommonRequest):
        if not 1 <= req.n <= 16:
            raise APIError(400, f"n must be in [1, 16] (got {req.n})", "n")

    def params_of(self, req: CommonRequest, max_tokens: Optional[int], n_prompt: int, logprobs: bool,
                  top_logprobs: int, index: int, prompt_param: str) -> SamplingParams:
        if req.model not in (None, "", *self.names):
            raise APIError(404, f"model {req.model!r} does not exist; this server serves "
                                f"{', '.join(map(repr, self.names))}", "model", "model_not_found")
        room = self.engine.max_len - n_prompt
        if room < 1:
            raise APIError(400, f"the prompt has {n_prompt} tokens; the context is {self.engine.max_len}",
                           prompt_param, "context_length_exceeded")
        try:
            return SamplingParams(
                temperature=req.temperature, top_p=req.top_p, top_k=req.top_k,
                max_tokens=min(max_tokens or DEFAULT_MAX_TOKENS, room), stop=req.stop or (),
                seed=None if req.seed is None else req.seed + index, logprobs=logprobs,
                top_logprobs=top_logprobs)
        except ValueError as e:
            raise APIError(400, str(e)) from e

    async def constrained(self, req: CommonRequest, params: list[SamplingParams]) -> list[SamplingParams]:
        """`params` under the request's constraint (response_format, guided_*; compiled
        here, so a bad one is a 400 before anything is queued: server/structured.py)."""
        constraint = await checked(self.engine, req)
        if constraint is None:
            return params
        return [dataclasses.replace(p, constraint=constraint) for p in params]

    async def run(self, ids, params: SamplingParams, param: str):
        """Collect one request's deltas; maps engine errors (and a failed request) to API errors."""
        try:
            out = [d async for d in self.engine.stream(ids, params)][-1].output
        except Exception as e:
            raise api_error(e, param) from e
        if out.finish_reason in ("error", "cancelled"):
            raise failed(out)
        return out

    async def run_all(self, jobs, param: str, client: Optional[Request] = None):
        """Run [(ids, params)] together. When one fails, or the client hangs up first, the
        others are cancelled: nothing runs on for a reply nobody will read."""
        tasks = [asyncio.ensure_future(self.run(ids, p, param)) for ids, p in jobs]
        together = asyncio.gather(*tasks)
        watch = asyncio.ensure_future(self.hung_up(client)) if client is not None else None
        try:
            if watch is not None:
                await asyncio.wait([together, watch], return_when=asyncio.FIRST_COMPLETED)
                if not together.done():
                    raise APIError(499, "the client closed the connection; its request was cancelled",
                                   code="client_closed_request")
            return await together
        finally:
            for t in tasks:
                t.cancel()
            if watch is not None:
                watch.cancel()
            if not together.done():
                together.cancel()
            # retrieve its outcome when it settles (no "exception was never retrieved" warning)
            together.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def hung_up(self, client: Request):
        while not await client.is_disconnected():
            await asyncio.sleep(DISCONNECT_POLL_S)

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id])

    def chat_logprobs(self, out, top_n: int):
        return {"content": [
            {"token": self.token_text(t), "logprob": lp, "bytes": list(self.token_text(t).encode()),
             "top_logprobs": [{"token": self.token_text(i), "logprob": v, "bytes": list(self.token_text(i).encode())}
                              for i, v in (out.top_logprobs[k] if k < len(out.top_logprobs) else [])][:top_n]}
            for k, (t, lp) in enumerate(zip(out.token_ids, out.logprobs))]}

    async def chat(self, req: ChatRequest, client: Request):
        self.check_n(req)
        messages = [{"role": m.role, "content": m.content} for m in req.messages]
        try:
            ids = self.engine.encode(messages)
        except Exception as e:
            raise APIError(400, f"cannot apply the chat template: {e}", "messages") from e
        top_n = req.top_logprobs or 0
        if top_n and not req.logprobs:
            raise APIError(400, "top_logprobs needs logprobs=true", "top_logprobs")
        max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
        params = [self.params_of(req, max_tokens, len(ids), req.logprobs, top_n, i, "messages")
                  for i in range(req.n)]
        params = await self.constrained(req, params)  # a 400 now, before anything is queued or streamed
        rid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if req.stream:
            return StreamingResponse(self.stream_chat(ids, params, rid, created, self.served(req)),
                                     media_type="text/event-stream")
        outs = await self.run_all([(ids, p) for p in params], "messages", client)
        return {"id": rid, "object": "chat.completion", "created": created, "model": self.served(req),
                "choices": [{"index": i, "message": {"role": "assistant", "content": o.text},
                             "logprobs": self.chat_logprobs(o, top_n) if req.logprobs else None,
                             "finish_reason": finish_reason(o.finish_reason)} for i, o in enumerate(outs)],
                "usage": usage(outs, n=len(outs))}

    async def stream_chat(self, ids, params, rid, created, model):
        def chunk(choices, totals=None):
            body = {"id": rid, "object": "chat.completion.chunk", "created": created,
                    "model": model, "choices": choices}
            if totals is not None:
                body["usage"] = totals
            return f"data: {json.dumps(body)}\n\n"

        queue: asyncio.Queue = asyncio.Queue()

        async def pump(i, p):
            try:
                async for delta in self.engine.stream(ids, p):
                    await queue.put((i, delta, None))
            except Exception as e:  # every failure reaches the client; the stream always ends
                await queue.put((i, None, api_error(e, "messages")))

        tasks = [asyncio.create_task(pump(i, p)) for i, p in enumerate(params)]
        outs, pending = [], len(params)
        try:
            for i in range(len(params)):
                yield chunk([{"index": i, "delta": {"role": "assistant", "content": ""},
                              "logprobs": None, "finish_reason": None}])
            while pending:
                i, delta, err = await queue.get()
                if err is None and delta.output is not None and delta.output.finish_reason in ("error", "cancelled"):
                    err = failed(delta.output)
                if err is not None:  # one failed choice ends the stream (the rest are cancelled)
                    body = error_body(err.status, err.message, err.param, err.code, err.kind)
                    yield f"data: {json.dumps(body)}\n\n"
                    yield "data: [DONE]\n\n"
                    return
                if delta.text:
                    yield chunk([{"index": i, "delta": {"content": delta.text}, "logprobs": None,
                                  "finish_reason": None}])
                if delta.output is not None:
                    outs.append(delta.output)
                    pending -= 1
                    yield chunk([{"index": i, "delta": {}, "logprobs": None,
                                  "finish_reason": finish_reason(delta.output.finish_reason)}])
            yield chunk([], totals=usage(outs, n=len(outs)))
            yield "data: [DONE]\n\n"
        finally:
            for t in tasks:  # client gone: cancelling the pumps cancels the requests
                t.cancel()

    async def completions(self, req: CompletionRequest, client: Request):
        self.check_n(req)
        if req.stream:
            raise APIError(400, "stream=true is supported on /v1/chat/completions only", "stream")
        prompts: list[Any]
        if isinstance(req.prompt, str):
            prompts = [req.prompt]
        elif req.prompt and all(isinstance(x, int) for x in req.prompt):
            prompts = [list(req.prompt)]
        else:
            prompts = list(req.prompt)
        if not prompts:
            raise APIError(400, "prompt is empty", "prompt")
        top_n = req.logprobs or 0
        jobs = []
        for prompt in prompts:
            try:
                ids = self.engine.encode(prompt)  # token ids: checked against the vocabulary here
            except Exception as e:
                raise APIError(400, f"cannot encode the prompt: {e}", "prompt") from e
            if not ids:
                raise APIError(400, "prompt is empty", "prompt")
            for i in range(req.n):
                jobs.append((prompt, ids, self.params_of(req, req.max_tokens, len(ids), req.logprobs is not None,
                                                    top_n, i, "prompt")))
        constrained = await self.constrained(req, [p for *_, p in jobs])
        jobs = [(prompt, ids, p) for (prompt, ids, _), p in zip(jobs, constrained)]
        outs = await self.run_all([(ids, p) for _, ids, p in jobs], "prompt", client)
        choices = []
        for k, ((prompt, _, _), o) in enumerate(zip(jobs, outs)):
            text = (prompt if isinstance(prompt, str) and req.echo else "") + o.text
            lp = None
            if req.logprobs is not None:
                toks = [self.token_text(t) for t in o.token_ids]
                offsets = list(itertools.accumulate((len(t) for t in toks), initial=0))[:-1]
                lp = {"tokens": toks, "token_logprobs": o.logprobs, "text_offset": offsets,
                      "top_logprobs": [{self.token_text(i): v for i, v in row[:top_n]} for row in o.top_logprobs]
                      if top_n else None}
            choices.append({"index": k, "text": text, "logprobs": lp, "finish_reason": finish_reason(o.finish_reason)})
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": self.served(req), "choices": choices, "usage": usage(outs, n=req.n)}


__all__ = ["DISCONNECT_POLL_S", "Routes"]
