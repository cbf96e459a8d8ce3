"""The model client protocol and its adapters (no JAX).

    client.complete(messages, tag=None, **sampling) -> Completion(text, prompt_tokens,
                                                                  completion_tokens, cached_tokens)

`tag` names the context space of the call (planner, executor, iso, memory:episode, ...);
real clients ignore it, the scripted client routes on it. Clients are safe to call
from several threads at once. A client may also offer `count_tokens(messages) -> int`
(the prompt's real token count); agents then use it for their context guards.

Constrained decoding: a sampling key `guided_grammar` (a Lark grammar, `hymem.grammars`)
asks the client to decode under it; `OpenAIClient` sends it as the vLLM-style request field
(this project's server and vLLM take it), `EngineClient` as an engine constraint. A client
that can tell whether its endpoint takes it offers `supports_constraints() -> bool`; the
agent's `constrained="auto"` asks it (docs/hymem_cli.md#constrained-decoding).

Failures: a client raises `ModelError` (`transient=True` for what a retry may cure:
connection refused, timeouts, HTTP 429/5xx). `GuardedClient` retries transient errors
with exponential backoff and, after `max_consecutive_failures` failed calls in a row,
raises `EndpointDown` for every call, which ends the run (and the evaluation) with a
clear message instead of a stream of empty replies. `traced_complete` turns every other
failure into an empty, traced reply: it costs a turn, never the run.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Callable, Optional, Protocol, Sequence, Union

from hymem.events import CallError, ModelCall


@dataclasses.dataclass
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0


class ModelClient(Protocol):
    def complete(self, messages: Sequence[dict], tag: Optional[str] = None, **sampling) -> Completion:
        ...


class ModelError(RuntimeError):
    """The model endpoint failed or answered something unreadable. `transient`: a retry
    may cure it; `request_fault`: this request was refused (HTTP 4xx, a prompt too long),
    which says nothing about the endpoint's health."""

    def __init__(self, message: str, transient: bool = False, request_fault: bool = False):
        super().__init__(message)
        self.transient, self.request_fault = transient, request_fault


class EndpointDown(RuntimeError):
    """The endpoint failed too many calls in a row; the run cannot go on (not a ModelError:
    `traced_complete` lets it through)."""


def _as_int(value) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return n if 0 <= n < 2**40 else 0


def _clean_text(text) -> str:
    """Any reply as valid UTF-8 text (bytes decoded, lone surrogates replaced)."""
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "replace")
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def traced_complete(client, messages, space: str, sampling: dict, usage: dict, trace: list) -> Completion:
    """One call in context space `space`, accounted in `usage[space prefix]` and `trace`.
    Any failure but `EndpointDown` is traced and returns empty text: it costs a turn, not
    the run."""
    t0 = time.perf_counter()
    try:
        raw = client.complete(messages, tag=space, **sampling)
        out = Completion(text=_clean_text(getattr(raw, "text", "")),
                         prompt_tokens=_as_int(getattr(raw, "prompt_tokens", 0)),
                         completion_tokens=_as_int(getattr(raw, "completion_tokens", 0)),
                         cached_tokens=_as_int(getattr(raw, "cached_tokens", 0)))
    except EndpointDown:
        raise
    except Exception as e:  # ModelError, or a client bug: the turn is lost, not the run
        trace.append(CallError(space, _clean_text(f"{type(e).__name__}: {e}")[:300]).as_dict())
        out = Completion(text="")
    u = usage.setdefault(space.split(":")[0], {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                               "cached_tokens": 0})
    u["calls"] += 1
    u["prompt_tokens"] += out.prompt_tokens
    u["completion_tokens"] += out.completion_tokens
    u["cached_tokens"] += out.cached_tokens
    trace.append(ModelCall(space, out.prompt_tokens, out.completion_tokens, out.cached_tokens,
                           round(time.perf_counter() - t0, 4)).as_dict())
    return out


class OpenAIClient:
    """Any OpenAI-compatible endpoint: activemem_jax.serve, vLLM, ... (stdlib HTTP only).
    Connection failures, timeouts and HTTP 408/429/5xx raise a transient ModelError;
    other HTTP errors and unreadable bodies (HTTP 200 included) a permanent one."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000/v1", model: Optional[str] = None,
                 api_key: Optional[str] = None, timeout: float = 600.0, **defaults):
        self.base_url = base_url.rstrip("/")
        self.model, self.api_key, self.timeout, self.defaults = model, api_key, timeout, defaults

    def _post(self, path: str, body: dict) -> bytes:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.base_url + path, data=json.dumps(body).encode(), headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.read()
        except urllib.error.HTTPError as e:
            try:
                detail = e.read()[:500]
            except Exception:
                detail = b""
            transient = e.code in (408, 429) or e.code >= 500
            raise ModelError(f"{self.base_url}{path}: HTTP {e.code}: {detail!r}", transient=transient,
                             request_fault=not transient and 400 <= e.code < 500) from e
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            raise ModelError(f"{self.base_url}{path} unreachable: {e}", transient=True) from e

    @staticmethod
    def parse_response(raw: bytes) -> Completion:
        """A chat-completion body as a Completion; anything else raises ModelError."""
        try:
            out = json.loads(raw)
        except (ValueError, RecursionError, TypeError) as e:
            raise ModelError(f"response is not JSON ({type(e).__name__}): {bytes(raw[:200])!r}") from None
        try:
            usage = out.get("usage") or {}
            text = out["choices"][0]["message"]["content"]
            if text is not None and not isinstance(text, str):
                raise TypeError(f"content is {type(text).__name__}, not a string")
            return Completion(text=_clean_text(text or ""),
                              prompt_tokens=_as_int(usage.get("prompt_tokens", 0)),
                              completion_tokens=_as_int(usage.get("completion_tokens", 0)),
                              cached_tokens=_as_int((usage.get("prompt_tokens_details") or {}).get("cached_tokens")))
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            raise ModelError(f"unexpected response shape ({e}): {_clean_text(str(out)[:300])}") from None

    def supports_constraints(self) -> bool:
        """Whether the endpoint decodes under `guided_grammar`: True for this project's own
        server, known by its GET /models answer (every model `owned_by` "activemem-jax"),
        asked once and remembered; any other answer, or none, is False (vLLM takes the field
        too, but the probe does not tell it from a server that would ignore it: name it with
        constrained="on")."""
        if getattr(self, "_supports", None) is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            try:
                req = urllib.request.Request(self.base_url + "/models", headers=headers)
                with urllib.request.urlopen(req, timeout=min(self.timeout, 10.0)) as resp:
                    data = json.loads(resp.read()).get("data") or []
                self._supports = bool(data) and all(
                    isinstance(m, dict) and m.get("owned_by") == "activemem-jax" for m in data)
            except Exception:
                self._supports = False
        return self._supports

    def complete(self, messages, tag=None, **sampling) -> Completion:
        body = {"messages": list(messages), **self.defaults, **sampling}
        if self.model:
            body["model"] = self.model
        return self.parse_response(self._post("/chat/completions", body))


class GuardedClient:
    """Wraps a client: transient ModelErrors are retried (`retries` times, backoff
    `backoff_s * 2**k`); any other exception from the client becomes a ModelError; after
    `max_consecutive_failures` calls in a row fail (across all threads), every call raises
    EndpointDown. One success resets the count; a refused request (`request_fault`, e.g.
    a prompt too long) neither counts nor resets."""

    def __init__(self, client, retries: int = 2, backoff_s: float = 1.0, max_consecutive_failures: int = 3,
                 sleep: Callable[[float], None] = time.sleep):
        self.client, self.retries, self.backoff_s = client, retries, backoff_s
        self.max_consecutive_failures, self.sleep = max_consecutive_failures, sleep
        self.consecutive_failures, self.last_error = 0, ""
        self._lock = threading.Lock()
        if hasattr(client, "count_tokens"):
            self.count_tokens = client.count_tokens
        if hasattr(client, "supports_constraints"):
            self.supports_constraints = client.supports_constraints

    @property
    def down(self) -> bool:
        return self.consecutive_failures >= self.max_consecutive_failures

    def _abort(self):
        raise EndpointDown(f"the model endpoint failed {self.consecutive_failures} calls in a row "
                           f"(last: {self.last_error}); stopping. Check the server, then re-run: "
                           f"finished tasks are kept and skipped.")

    def complete(self, messages, tag=None, **sampling) -> Completion:
        if self.down:
            self._abort()
        for attempt in range(self.retries + 1):
            try:
                out = self.client.complete(messages, tag=tag, **sampling)
            except EndpointDown:
                raise
            except Exception as e:
                err = e if isinstance(e, ModelError) else ModelError(f"{type(e).__name__}: {e}")
                if err.transient and attempt < self.retries and not self.down:
                    self.sleep(self.backoff_s * 2 ** attempt)
                    continue
                if err.request_fault:
                    raise err from e
                with self._lock:
                    self.consecutive_failures += 1
                    self.last_error = str(err)[:300]
                if self.down:
                    self._abort()
                raise err from e
            with self._lock:
                self.consecutive_failures = 0
            return out
        raise AssertionError("unreachable")


class EngineClient:
    """The in-process JAX engine (imported lazily, so hymem itself stays JAX-free)."""

    def __init__(self, engine, **defaults):
        self.engine, self.defaults = engine, defaults

    @classmethod
    def from_config(cls, cfg, **defaults):
        """An engine built from a config's model and engine sections, as every run builds
        one (`activemem_jax.build`: the same fields mean the same thing everywhere). Of the
        model section only the backbone's fields are read (an endpoint's url, name and
        retries are not the backbone's); remat is off (the engine never differentiates)."""
        from activemem_jax import build
        from activemem_jax.models.loading import MODEL_FIELDS

        model = {"remat": False, **{k: cfg.model[k] for k in MODEL_FIELDS if k in cfg.model}}
        run = build.config(model=model, **{k: dict(cfg[k]) for k in ("engine", "mesh", "sharding") if k in cfg})
        return cls(build.engine(run, build.model(run)), **defaults)

    @classmethod
    def from_model(cls, model="embedded", max_slots: int = 8, max_len: int = 4096, **defaults):
        """model: a checkpoint path, or a config's `model` section (path, dtype,
        activation_dtype, quant, ...: `activemem_jax.schema.Model`); float32 unless it says."""
        import ml_collections

        section = {"dtype": "float32", **({"path": model} if isinstance(model, str) else dict(model))}
        cfg = ml_collections.ConfigDict({"model": section, "engine": {"max_slots": max_slots, "max_len": max_len}})
        return cls.from_config(cfg, **defaults)

    @staticmethod
    def supports_constraints() -> bool:
        return True

    def complete(self, messages, tag=None, **sampling) -> Completion:
        kw = {**self.defaults, **sampling}
        try:
            from activemem_jax.engine import SamplingParams
            from activemem_jax.engine.constraints import Constraint

            constraint = (Constraint.grammar(kw["guided_grammar"]) if kw.get("guided_grammar") else
                          Constraint.regex(kw["guided_regex"]) if kw.get("guided_regex") else None)
            params = SamplingParams(temperature=kw.get("temperature", 0.0), top_p=kw.get("top_p", 1.0),
                                    max_tokens=kw.get("max_tokens", 512), stop=tuple(kw.get("stop") or ()),
                                    seed=kw.get("seed"), constraint=constraint)
            out = self.engine.submit(list(messages), params).result()
            return Completion(_clean_text(out.text), _as_int(out.prompt_tokens), _as_int(out.completion_tokens),
                              _as_int(out.cached_tokens))
        except Exception as e:  # prompt too long, bad parameters, an engine fault: a failed call
            raise ModelError(f"engine: {type(e).__name__}: {e}", request_fault=isinstance(e, ValueError)) from e


Script = Union[Callable[[str, list], str], dict]


class ScriptedClient:
    """Answers from a script, for tests: a function (tag, messages) -> text, or a dict
    tag-prefix -> list of texts consumed in order (the last one repeats). Records every
    call; token counts are whitespace-separated words."""

    def __init__(self, script: Script, default: str = ""):
        self.script, self.default = script, default
        self.calls: list[tuple[str, list]] = []
        self._lock = threading.Lock()
        self._cursor: dict[str, int] = {}

    def complete(self, messages, tag=None, **sampling) -> Completion:
        tag = tag or ""
        with self._lock:
            self.calls.append((tag, [dict(m) for m in messages]))
            if callable(self.script):
                text = self.script(tag, list(messages))
            else:
                key = max((k for k in self.script if tag.startswith(k)), key=len, default=None)
                if key is None:
                    text = self.default
                else:
                    replies = self.script[key]
                    i = self._cursor.get(key, 0)
                    self._cursor[key] = i + 1
                    text = replies[min(i, len(replies) - 1)] if replies else self.default
        prompt = sum(len(str(m.get("content", "")).split()) for m in messages)
        return Completion(text=text, prompt_tokens=prompt, completion_tokens=len(text.split()))

    @staticmethod
    def count_tokens(messages) -> int:
        """The prompt's token count as `complete` reports it (whitespace words)."""
        return sum(len(str(m.get("content", "")).split()) for m in messages)

    def messages_for(self, tag_prefix: str) -> list[list]:
        return [m for t, m in self.calls if t.startswith(tag_prefix)]
