"""The model client protocol and its adapters (no JAX).

    client.complete(messages, tag=None, **sampling) -> Completion(text, prompt_tokens,
                                                                  completion_tokens, cached_tokens)

`tag` names the context space of the call (planner, executor, iso, memory:episode, ...);
real clients ignore it, the scripted client routes on it. Clients are safe to call
from several threads at once.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Callable, Optional, Protocol, Sequence, Union


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
    """The model endpoint failed or answered something unreadable."""


def traced_complete(client, messages, space: str, sampling: dict, usage: dict, trace: list) -> Completion:
    """One call in context space `space`, accounted in `usage[space prefix]` and `trace`.
    An endpoint failure is traced and returns empty text: it costs a turn, not the run."""
    t0 = time.perf_counter()
    try:
        out = client.complete(messages, tag=space, **sampling)
    except ModelError as e:
        trace.append({"type": "model_error", "space": space, "error": str(e)[:300]})
        out = Completion(text="")
    u = usage.setdefault(space.split(":")[0], {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                               "cached_tokens": 0})
    u["calls"] += 1
    u["prompt_tokens"] += out.prompt_tokens
    u["completion_tokens"] += out.completion_tokens
    u["cached_tokens"] += out.cached_tokens
    trace.append({"type": "model_call", "space": space, "prompt_tokens": out.prompt_tokens,
                  "completion_tokens": out.completion_tokens, "cached_tokens": out.cached_tokens,
                  "latency_s": round(time.perf_counter() - t0, 4)})
    return out


class OpenAIClient:
    """Any OpenAI-compatible endpoint: activemem_jax.serve, vLLM, ... (stdlib HTTP only)."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000/v1", model: Optional[str] = None,
                 api_key: Optional[str] = None, timeout: float = 600.0, **defaults):
        self.base_url = base_url.rstrip("/")
        self.model, self.api_key, self.timeout, self.defaults = model, api_key, timeout, defaults

    def _post(self, path: str, body: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.base_url + path, data=json.dumps(body).encode(), headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise ModelError(f"{self.base_url}{path}: HTTP {e.code}: {e.read()[:500]!r}") from e
        except (urllib.error.URLError, OSError) as e:
            raise ModelError(f"{self.base_url}{path} unreachable: {e}") from e

    def complete(self, messages, tag=None, **sampling) -> Completion:
        body = {"messages": list(messages), **self.defaults, **sampling}
        if self.model:
            body["model"] = self.model
        out = self._post("/chat/completions", body)
        try:
            usage = out.get("usage") or {}
            return Completion(text=out["choices"][0]["message"]["content"] or "",
                              prompt_tokens=int(usage.get("prompt_tokens", 0)),
                              completion_tokens=int(usage.get("completion_tokens", 0)),
                              cached_tokens=int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0))
        except (KeyError, IndexError, TypeError) as e:
            raise ModelError(f"unexpected response shape: {str(out)[:300]}") from e


class EngineClient:
    """The in-process JAX engine (imported lazily, so hymem itself stays JAX-free)."""

    def __init__(self, engine, **defaults):
        self.engine, self.defaults = engine, defaults

    @classmethod
    def from_model(cls, model="embedded", max_slots: int = 8, max_len: int = 4096, **defaults):
        """model: a checkpoint path, or a config's `model` section (path, dtype,
        activation_dtype, quant, ...: `activemem_jax.models.load_from_config`)."""
        from activemem_jax.engine import Engine
        from activemem_jax.models import load_from_config

        section = {"path": model} if isinstance(model, str) else model
        return cls(Engine(load_from_config(section), max_slots=max_slots, max_len=max_len), **defaults)

    def complete(self, messages, tag=None, **sampling) -> Completion:
        from activemem_jax.engine import SamplingParams

        kw = {**self.defaults, **sampling}
        params = SamplingParams(temperature=kw.get("temperature", 0.0), top_p=kw.get("top_p", 1.0),
                                max_tokens=kw.get("max_tokens", 512), stop=tuple(kw.get("stop") or ()),
                                seed=kw.get("seed"))
        try:
            out = self.engine.submit(list(messages), params).result()
        except ValueError as e:  # prompt too long, bad parameters
            raise ModelError(str(e)) from e
        return Completion(out.text, out.prompt_tokens, out.completion_tokens, out.cached_tokens)


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

    def messages_for(self, tag_prefix: str) -> list[list]:
        return [m for t, m in self.calls if t.startswith(tag_prefix)]
