"""OpenAI-compatible model server on the engine (FastAPI + uvicorn).

    python -m activemem_jax.serve --model embedded --port 8000 [--api-key KEY]
    python -m activemem_jax.serve --config configs/serve_embedded.py

POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health.
Binds 127.0.0.1 unless --host says otherwise. Every field is checked against its real
bounds before it reaches the engine, and a bad request gets a 4xx JSON error in OpenAI's
shape; a full queue gets 503 with Retry-After; a request the engine failed on gets a 500
(a stream: an error event, then [DONE]), never a normal finish; /health answers 503 when
the engine thread has stopped. A client that disconnects (streaming or not) cancels its
request and frees its slots; a refused batch cancels what of it was already accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import itertools
import json
import os
import time
import uuid
from typing import Annotated, Any, Literal, Optional, Sequence, Union

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, field_validator

from activemem_jax.engine import Engine, EngineUnavailable, PromptTooLong, QueueFull, SamplingParams, usage
from activemem_jax.engine.sampling import INT32_MAX, TOP_LOGPROBS

DISCONNECT_POLL_S = 0.25  # how often a non-streaming request checks that its client is still there
DEFAULT_MAX_TOKENS = 512  # what an absent or null max_tokens means (capped by the context left)
ROLES = ("system", "user", "assistant", "tool")

# Request field types: integers are real JSON integers (no booleans, no 4.0) within what
# the engine's int32 arrays hold; numbers (integers accepted) are finite and within
# OpenAI's documented ranges.
Count = Annotated[StrictInt, Field(ge=1, le=INT32_MAX)]
TopN = Annotated[StrictInt, Field(ge=0, le=TOP_LOGPROBS)]
Penalty = Annotated[StrictFloat, Field(ge=-2, le=2, allow_inf_nan=False)]


class APIError(Exception):
    def __init__(self, status: int, message: str, param: Optional[str] = None,
                 code: Optional[str] = None, headers: Optional[dict] = None, kind: Optional[str] = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.headers = status, message, param, code, headers
        self.kind = kind


def _text(value: str, where: str) -> str:
    """`value` unless it cannot be UTF-8 (a lone surrogate such as "\\udfff")."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{where} is not valid Unicode (a lone surrogate at character {e.start})") from None
    return value


class _Common(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: Optional[StrictStr] = None
    max_tokens: Optional[Count] = None  # null or absent: DEFAULT_MAX_TOKENS
    temperature: Annotated[StrictFloat, Field(ge=0, le=2, allow_inf_nan=False)] = 1.0
    top_p: Annotated[StrictFloat, Field(gt=0, le=1, allow_inf_nan=False)] = 1.0
    top_k: Annotated[StrictInt, Field(ge=0, le=INT32_MAX)] = 0
    presence_penalty: Optional[Penalty] = None  # accepted for OpenAI clients, not applied
    frequency_penalty: Optional[Penalty] = None  # accepted for OpenAI clients, not applied
    stop: Optional[Union[StrictStr, list[StrictStr]]] = None
    n: StrictInt = 1
    seed: Optional[Annotated[StrictInt, Field(ge=-2**63, le=2**63 - 1)]] = None
    stream: bool = False
    stream_options: Optional[dict] = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal[ROLES]  # nothing else reaches the chat template as a role
    content: str = ""  # a string, null, or a list of text parts (joined)

    @field_validator("content", mode="before")
    @classmethod
    def _joined_text(cls, content: Any) -> str:
        if content is None:
            return ""
        if isinstance(content, str):
            return _text(content, "content")
        if not isinstance(content, list):
            raise ValueError(f"content must be a string, null or a list of text parts "
                             f"(got {type(content).__name__})")
        texts = []
        for k, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type", "text") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ValueError(f"content[{k}] is {kind!r}: only text parts "
                                 f'{{"type": "text", "text": "..."}} are supported')
            text = part.get("text")
            if not isinstance(text, str):
                raise ValueError(f"content[{k}].text must be a string (got {type(text).__name__})")
            texts.append(_text(text, f"content[{k}].text"))
        return "".join(texts)


class ChatRequest(_Common):
    messages: list[ChatMessage] = Field(..., min_length=1)
    max_completion_tokens: Optional[Count] = None
    logprobs: bool = False
    top_logprobs: Optional[TopN] = None


class CompletionRequest(_Common):
    prompt: Union[str, list[str], list[int]]  # a text, texts, or token ids (checked in _prompt)
    logprobs: Optional[TopN] = None
    echo: bool = False

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt(cls, prompt: Any):
        if isinstance(prompt, str):
            return _text(prompt, "prompt")
        if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
            return [_text(p, f"prompt[{k}]") for k, p in enumerate(prompt)]
        if isinstance(prompt, list) and all(type(t) is int for t in prompt):  # no booleans
            return prompt
        raise ValueError("prompt must be a string, a list of strings or a list of integer token ids")


def _error_body(status: int, message: str, param=None, code=None, kind=None) -> dict:
    kind = kind or {401: "authentication_error", 404: "not_found_error", 503: "server_busy"}.get(
        status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _error(status: int, message: str, param=None, code=None, headers=None, kind=None) -> JSONResponse:
    return JSONResponse(_error_body(status, message, param, code, kind), status_code=status, headers=headers)


def _api_error(e: Exception, param: str) -> APIError:
    """What a client is told when submitting or running a request raised `e`."""
    if isinstance(e, APIError):
        return e
    if isinstance(e, QueueFull):
        return APIError(503, str(e), headers={"Retry-After": "1"})
    if isinstance(e, PromptTooLong):
        return APIError(400, str(e), param, "context_length_exceeded")
    if isinstance(e, EngineUnavailable):
        return APIError(503, f"the engine is not serving: {e}", code="engine_unavailable", kind="server_error")
    if isinstance(e, ValueError):
        return APIError(400, str(e), param)
    return APIError(500, f"internal error: {type(e).__name__}: {e}")


def _failed(output) -> APIError:
    """An output that did not finish: an engine fault (500) or a cancellation (503)."""
    if output.finish_reason == "cancelled":
        return APIError(503, "the request was cancelled before it finished (the engine is stopping, or a "
                             "request of the same batch failed); retry it", code="request_cancelled",
                        kind="server_error")
    return APIError(500, f"the engine failed on this request: {output.error}", code="engine_error")


class _KeyCheck:
    """ASGI middleware: /v1/ routes need 'Authorization: Bearer <key>'. (A plain ASGI
    wrapper: starlette's BaseHTTPMiddleware hides a client's disconnect from the route.)"""

    def __init__(self, app, api_key: str):
        self.app, self.expected = app, f"Bearer {api_key}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                reply = _error(401, "missing or wrong API key (send 'Authorization: Bearer <key>')")
                return await reply(scope, receive, send)
        return await self.app(scope, receive, send)


def make_app(engine: Engine, model_names: Union[str, Sequence[str]], api_key: Optional[str] = None) -> FastAPI:
    """model_names: the ids a request may ask for (the first is the default in replies)."""
    names = [model_names] if isinstance(model_names, str) else list(dict.fromkeys(model_names))
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"model_names={model_names!r}: give at least one non-empty name")
    app = FastAPI(title="activemem-jax model server")
    tokenizer = engine.tokenizer

    @app.exception_handler(APIError)
    async def _api_error_response(_: Request, e: APIError):
        return _error(e.status, e.message, e.param, e.code, e.headers, e.kind)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, e: RequestValidationError):
        first = e.errors()[0] if e.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ())[1:]) or None
        return _error(400, f"invalid request: {first.get('msg', 'malformed body')}"
                      + (f" at '{where}'" if where else ""), param=where)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, e: StarletteHTTPException):  # unknown path, wrong method, ...
        return _error(e.status_code, f"{e.detail}", headers=getattr(e, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, e: Exception):
        return _error(500, f"internal error: {type(e).__name__}: {e}")

    if api_key:
        app.add_middleware(_KeyCheck, api_key=api_key)

    @app.get("/health")
    async def health():
        state = engine.health()
        if state["status"] == "ok":
            return state
        return JSONResponse({**state, **_error_body(503, state["message"], code="engine_unavailable",
                                                    kind="server_error")}, status_code=503)

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "activemem-jax"}
                                           for n in names]}

    def served(req: _Common) -> str:
        """The id a reply carries: the one the request asked for, else the first name."""
        return req.model if req.model in names else names[0]

    def check_n(req: _Common):
        if not 1 <= req.n <= 16:
            raise APIError(400, f"n must be in [1, 16] (got {req.n})", "n")

    def params_of(req: _Common, max_tokens: Optional[int], n_prompt: int, logprobs: bool,
                  top_logprobs: int, index: int, prompt_param: str) -> SamplingParams:
        if req.model not in (None, "", *names):
            raise APIError(404, f"model {req.model!r} does not exist; this server serves "
                                f"{', '.join(map(repr, names))}", "model", "model_not_found")
        room = engine.max_len - n_prompt
        if room < 1:
            raise APIError(400, f"the prompt has {n_prompt} tokens; the context is {engine.max_len}",
                           prompt_param, "context_length_exceeded")
        try:
            return SamplingParams(
                temperature=req.temperature, top_p=req.top_p, top_k=req.top_k,
                max_tokens=min(max_tokens or DEFAULT_MAX_TOKENS, room), stop=req.stop or (),
                seed=None if req.seed is None else req.seed + index, logprobs=logprobs,
                top_logprobs=top_logprobs)
        except ValueError as e:
            raise APIError(400, str(e)) from e

    async def run(ids, params: SamplingParams, param: str):
        """Collect one request's deltas; maps engine errors (and a failed request) to API errors."""
        try:
            out = [d async for d in engine.stream(ids, params)][-1].output
        except Exception as e:
            raise _api_error(e, param) from e
        if out.finish_reason in ("error", "cancelled"):
            raise _failed(out)
        return out

    async def run_all(jobs, param: str, client: Optional[Request] = None):
        """Run [(ids, params)] together. When one fails, or the client hangs up first, the
        others are cancelled: nothing runs on for a reply nobody will read."""
        tasks = [asyncio.ensure_future(run(ids, p, param)) for ids, p in jobs]
        together = asyncio.gather(*tasks)
        watch = asyncio.ensure_future(hung_up(client)) if client is not None else None
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

    async def hung_up(client: Request):
        while not await client.is_disconnected():
            await asyncio.sleep(DISCONNECT_POLL_S)

    def token_text(token_id: int) -> str:
        return tokenizer.decode([token_id])

    def chat_logprobs(out, top_n: int):
        return {"content": [
            {"token": token_text(t), "logprob": lp, "bytes": list(token_text(t).encode()),
             "top_logprobs": [{"token": token_text(i), "logprob": v, "bytes": list(token_text(i).encode())}
                              for i, v in (out.top_logprobs[k] if k < len(out.top_logprobs) else [])][:top_n]}
            for k, (t, lp) in enumerate(zip(out.token_ids, out.logprobs))]}

    @app.post("/v1/chat/completions")
    async def chat(req: ChatRequest, client: Request):
        check_n(req)
        messages = [{"role": m.role, "content": m.content} for m in req.messages]
        try:
            ids = engine.encode(messages)
        except Exception as e:
            raise APIError(400, f"cannot apply the chat template: {e}", "messages") from e
        top_n = req.top_logprobs or 0
        if top_n and not req.logprobs:
            raise APIError(400, "top_logprobs needs logprobs=true", "top_logprobs")
        max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
        params = [params_of(req, max_tokens, len(ids), req.logprobs, top_n, i, "messages")
                  for i in range(req.n)]
        rid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if req.stream:
            return StreamingResponse(stream_chat(ids, params, rid, created, served(req)),
                                     media_type="text/event-stream")
        outs = await run_all([(ids, p) for p in params], "messages", client)
        return {"id": rid, "object": "chat.completion", "created": created, "model": served(req),
                "choices": [{"index": i, "message": {"role": "assistant", "content": o.text},
                             "logprobs": chat_logprobs(o, top_n) if req.logprobs else None,
                             "finish_reason": _reason(o.finish_reason)} for i, o in enumerate(outs)],
                "usage": usage(outs, n=len(outs))}

    async def stream_chat(ids, params, rid, created, model):
        def chunk(choices, totals=None):
            body = {"id": rid, "object": "chat.completion.chunk", "created": created,
                    "model": model, "choices": choices}
            if totals is not None:
                body["usage"] = totals
            return f"data: {json.dumps(body)}\n\n"

        queue: asyncio.Queue = asyncio.Queue()

        async def pump(i, p):
            try:
                async for delta in engine.stream(ids, p):
                    await queue.put((i, delta, None))
            except Exception as e:  # every failure reaches the client; the stream always ends
                await queue.put((i, None, _api_error(e, "messages")))

        tasks = [asyncio.create_task(pump(i, p)) for i, p in enumerate(params)]
        outs, pending = [], len(params)
        try:
            for i in range(len(params)):
                yield chunk([{"index": i, "delta": {"role": "assistant", "content": ""},
                              "logprobs": None, "finish_reason": None}])
            while pending:
                i, delta, err = await queue.get()
                if err is None and delta.output is not None and delta.output.finish_reason in ("error", "cancelled"):
                    err = _failed(delta.output)
                if err is not None:  # one failed choice ends the stream (the rest are cancelled)
                    body = _error_body(err.status, err.message, err.param, err.code, err.kind)
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
                                  "finish_reason": _reason(delta.output.finish_reason)}])
            yield chunk([], totals=usage(outs, n=len(outs)))
            yield "data: [DONE]\n\n"
        finally:
            for t in tasks:  # client gone: cancelling the pumps cancels the requests
                t.cancel()

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest, client: Request):
        check_n(req)
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
                ids = engine.encode(prompt)  # token ids: checked against the vocabulary here
            except Exception as e:
                raise APIError(400, f"cannot encode the prompt: {e}", "prompt") from e
            if not ids:
                raise APIError(400, "prompt is empty", "prompt")
            for i in range(req.n):
                jobs.append((prompt, ids, params_of(req, req.max_tokens, len(ids), req.logprobs is not None,
                                                    top_n, i, "prompt")))
        outs = await run_all([(ids, p) for _, ids, p in jobs], "prompt", client)
        choices = []
        for k, ((prompt, _, _), o) in enumerate(zip(jobs, outs)):
            text = (prompt if isinstance(prompt, str) and req.echo else "") + o.text
            lp = None
            if req.logprobs is not None:
                toks = [token_text(t) for t in o.token_ids]
                offsets = list(itertools.accumulate((len(t) for t in toks), initial=0))[:-1]
                lp = {"tokens": toks, "token_logprobs": o.logprobs, "text_offset": offsets,
                      "top_logprobs": [{token_text(i): v for i, v in row[:top_n]} for row in o.top_logprobs]
                      if top_n else None}
            choices.append({"index": k, "text": text, "logprobs": lp, "finish_reason": _reason(o.finish_reason)})
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": served(req), "choices": choices, "usage": usage(outs, n=req.n)}

    return app


def _reason(reason: str) -> str:
    """OpenAI's finish_reason of a finished output ("error" and "cancelled" never get here:
    `_failed` makes them a 5xx or an error event)."""
    if reason not in ("stop", "length"):
        raise ValueError(f"finish_reason {reason!r} is not a completion's")
    return reason


def served_names(model: str, served_model_name=None) -> list[str]:
    """The ids a server answers to: --served-model-name's (comma-separated, first is the
    default id of replies), then the --model value as given and, for a path, its last
    component; "embedded" is also "smollm2-135m-instruct"."""
    extra = served_model_name or []
    extra = [n.strip() for n in extra.split(",")] if isinstance(extra, str) else list(extra)
    own = [model] + (["smollm2-135m-instruct"] if model == "embedded" else
                     [os.path.basename(os.path.normpath(model))])
    return list(dict.fromkeys(n for n in [*extra, *own] if n))


def main(argv=None):
    ap = argparse.ArgumentParser(description="OpenAI-compatible server on the activemem-jax engine")
    ap.add_argument("--config", help="ml_collections config file with a `serve` section")
    ap.add_argument("--model", default=None, help="HF directory, .gguf file, or 'embedded'")
    ap.add_argument("--served-model-name", default=None,
                    help="more ids the model answers to, comma-separated (the --model value always works)")
    ap.add_argument("--host", default=None)
    ap.add_argument("--port", type=int, default=None)
    ap.add_argument("--api-key", default=os.environ.get("ACTIVEMEM_API_KEY"))
    ap.add_argument("--dtype", default=None, help="weights: float32 | bfloat16")
    ap.add_argument("--activation-dtype", default=None,
                    help="float32 with --dtype bfloat16: bf16 weights, f32 activations (fast on CPU)")
    ap.add_argument("--quant", default=None, help="int8: int8 weights, W8A8 matmuls (fastest batch-1 decode on CPU)")
    ap.add_argument("--max-slots", type=int, default=None)
    ap.add_argument("--max-len", type=int, default=None)
    ap.add_argument("--max-queue", type=int, default=None)
    ap.add_argument("--compile-cache", default=None,
                    help="persistent compilation cache directory, or 'off' (default: $ACTIVEMEM_COMPILE_CACHE, "
                         "else ~/.cache/activemem-jax/xla): a restart loads its compiled shapes")
    args = ap.parse_args(argv)
    cfg = dict(model="embedded", served_model_name=None, host="127.0.0.1", port=8000, dtype="float32",
               activation_dtype="", quant="", max_slots=8, max_len=2048, max_queue=256)
    if args.config:
        import importlib.util

        spec = importlib.util.spec_from_file_location("serve_config", args.config)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cfg.update(dict(module.get_config().serve))
    cfg.update({k: v for k, v in vars(args).items() if v is not None and k in cfg})
    from activemem_jax.tooling import compile_cache
    from activemem_jax.models import load_from_config

    cache = compile_cache.enable(args.compile_cache)  # before anything compiles

    model = load_from_config({"path": cfg["model"], "dtype": cfg["dtype"], "activation_dtype": cfg["activation_dtype"],
                              "quant": cfg["quant"]})
    names = served_names(cfg["model"], cfg["served_model_name"])
    engine = Engine(model, max_slots=cfg["max_slots"], max_len=cfg["max_len"], max_queue=cfg["max_queue"])
    import uvicorn

    print(f"serving {', '.join(names)} on http://{cfg['host']}:{cfg['port']}/v1 "
          f"({cfg['max_slots']} slots x {cfg['max_len']} tokens; compilation cache: {cache or 'off'})",
          flush=True)
    uvicorn.run(make_app(engine, names, args.api_key), host=cfg["host"], port=cfg["port"],
                log_level="warning")


if __name__ == "__main__":
    main()
