"""The OpenAI request bodies the server accepts, checked against their real bounds before
anything reaches the engine, and the errors it answers with (OpenAI's JSON shape)."""

from __future__ import annotations

import hmac
from typing import Annotated, Any, Literal, Optional, Union

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, field_validator

from activemem_jax.engine import EngineUnavailable, PromptTooLong, QueueFull
from activemem_jax.engine.constraints import FAILED as CONSTRAINT_FAILED
from activemem_jax.engine.sampling import INT32_MAX, TOP_LOGPROBS

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


class CommonRequest(BaseModel):
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
    # structured output (server/structured.py): OpenAI's response_format, vLLM's guided_*
    # fields and their newer structured_outputs object; at most one of them per request
    response_format: Optional[dict] = None
    guided_json: Optional[Union[dict, bool, StrictStr]] = None
    guided_regex: Optional[StrictStr] = None
    guided_choice: Optional[list[StrictStr]] = None
    guided_grammar: Optional[StrictStr] = None
    structured_outputs: Optional[dict] = None


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


class ChatRequest(CommonRequest):
    messages: list[ChatMessage] = Field(..., min_length=1)
    max_completion_tokens: Optional[Count] = None
    logprobs: bool = False
    top_logprobs: Optional[TopN] = None


class CompletionRequest(CommonRequest):
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


def error_body(status: int, message: str, param=None, code=None, kind=None) -> dict:
    kind = kind or {401: "authentication_error", 404: "not_found_error", 503: "server_busy"}.get(
        status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(status: int, message: str, param=None, code=None, headers=None, kind=None) -> JSONResponse:
    return JSONResponse(error_body(status, message, param, code, kind), status_code=status, headers=headers)


def api_error(e: Exception, param: str) -> APIError:
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


def failed(output) -> APIError:
    """An output that did not finish: an engine fault (500) or a cancellation (503)."""
    if output.error and output.error.startswith(CONSTRAINT_FAILED):  # the request's constraint, not the engine
        return APIError(400, output.error, code="constraint_failed")
    if output.finish_reason == "cancelled":
        return APIError(503, "the request was cancelled before it finished (the engine is stopping, or a "
                             "request of the same batch failed); retry it", code="request_cancelled",
                        kind="server_error")
    return APIError(500, f"the engine failed on this request: {output.error}", code="engine_error")


class KeyCheck:
    """ASGI middleware: /v1/ routes need 'Authorization: Bearer <key>'. (A plain ASGI
    wrapper: starlette's BaseHTTPMiddleware hides a client's disconnect from the route.)"""

    def __init__(self, app, api_key: str):
        self.app, self.expected = app, f"Bearer {api_key}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                reply = error_response(401, "missing or wrong API key (send 'Authorization: Bearer <key>')")
                return await reply(scope, receive, send)
        return await self.app(scope, receive, send)


def finish_reason(reason: str) -> str:
    """OpenAI's finish_reason of a finished output ("error" and "cancelled" never get here:
    `failed` makes them a 5xx or an error event)."""
    if reason not in ("stop", "length"):
        raise ValueError(f"finish_reason {reason!r} is not a completion's")
    return reason


__all__ = ["APIError", "ChatMessage", "ChatRequest", "CommonRequest", "CompletionRequest", "DEFAULT_MAX_TOKENS",
           "KeyCheck", "ROLES", "api_error", "error_body", "error_response", "failed", "finish_reason"]
