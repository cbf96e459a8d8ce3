"""One agent protocol for HyMem and every baseline, and the registry that builds them by
name (so the evaluation harness, the benchmarks and the CLI share one list).

An agent has `run(question) -> Result` and `persistent_space`, the name of the context
space that lives through the whole task (HyMem's planner, ReAct's one context): its
prompts are the context curve of the paper's Figure 4. Every model call goes through
`RunState.call` (same client, same accounting), every tool call through
`RunState.tool` (same toolbox, same record), and the trace is typed events
(`hymem.events`).

A baseline is one module: a class with those two members and a factory registered with
`@register("name", ..., section=("config section", ItsConfig))`, taking (name, client,
tools, config, aux) where `config` is the evaluation config (its `sampling` and the
section the factory reads, whose fields the harness checks against ItsConfig at load)
and `aux` the auxiliary model's client (None: the main one).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Mapping, Optional, Protocol

from hymem.events import Event, ToolCall
from hymem.llm import Completion, traced_complete
from hymem.tools import clip_arguments

BUILTIN = ("hymem.agent", "hymem.baselines", "hymem.base", "hymem.amem", "hymem.thread")


@dataclasses.dataclass
class Result:
    answer: str
    confidence: Optional[float]
    trace: list[dict]
    usage: dict


@dataclasses.dataclass
class RunState:
    """What every run keeps: its question, trace, per-space usage."""
    question: str
    trace: list[dict] = dataclasses.field(default_factory=list)
    usage: dict = dataclasses.field(default_factory=dict)
    listener: Optional[Callable[[Event], None]] = None  # sees each event as it happens (progress)

    def emit(self, event: Event) -> None:
        self.trace.append(event.as_dict())
        if self.listener is not None:
            self.listener(event)

    def call(self, client, messages: list, space: str, sampling: dict) -> Completion:
        return traced_complete(client, messages, space, sampling, self.usage, self.trace)

    def tool(self, tools, action) -> tuple[bool, str, dict]:
        """Run a parsed tool action through the toolbox and record it: (ok, raw output,
        the arguments as recorded)."""
        ok, raw = tools.call(action.name, action.arguments)
        args = clip_arguments(action.arguments)
        self.emit(ToolCall(action.name[:100], args, ok, len(raw)))
        return ok, raw, args

    def total_tokens(self) -> int:
        return sum(u["prompt_tokens"] + u["completion_tokens"] for u in self.usage.values())

    def result(self, answer: str, confidence: Optional[float]) -> Result:
        return Result(answer=answer, confidence=confidence, trace=self.trace, usage=self.usage)


class Agent(Protocol):
    persistent_space: str

    def run(self, question: str) -> Result: ...


Factory = Callable[[str, Any, Any, Mapping, Any], Agent]
_REGISTRY: dict[str, Factory] = {}
_SECTIONS: dict[str, type] = {}  # evaluation-config section -> the config dataclass its fields fill


def register(*names: str, section: Optional[tuple[str, type]] = None):
    """Decorator: `factory(name, client, tools, config, aux) -> Agent` answers to `names`.
    section: (the evaluation config's section the factory reads, its config dataclass), so
    the harness checks that section's fields at load (`hymem.run_config`)."""
    def add(factory: Factory) -> Factory:
        for name in names:
            if name in _REGISTRY and _REGISTRY[name] is not factory:
                raise ValueError(f"agent {name!r} is registered twice")
            _REGISTRY[name] = factory
        if section is not None:
            _SECTIONS[section[0]] = section[1]
        return factory
    return add


def _load_builtin() -> None:
    for module in BUILTIN:
        importlib.import_module(module)


def names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def config_sections() -> dict[str, type]:
    """{evaluation-config section: its agents' config dataclass}, for every registered agent."""
    _load_builtin()
    return dict(_SECTIONS)


def build(name: str, client, tools, config: Optional[Mapping] = None, aux=None) -> Agent:
    """The agent registered as `name`, for one task. config: the evaluation config (a
    mapping with `sampling` and the agents' sections); None: every default."""
    _load_builtin()
    if name not in _REGISTRY:
        raise ValueError(f"unknown agent {name!r}; registered: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name](name, client, tools, config or {}, aux)


def section(config: Mapping, key: str) -> dict:
    """config[key] as a plain dict ({} when absent)."""
    value = config.get(key) if hasattr(config, "get") else None
    return dict(value) if value else {}


def sampling(config: Mapping) -> Optional[dict]:
    value = section(config, "sampling")
    return value or None


def agent_fields(config: Mapping, key: str) -> dict:
    """An agent config's fields: config[key], with the evaluation's `sampling` when given."""
    fields = section(config, key)
    if sampling(config):
        fields["sampling"] = sampling(config)
    return fields


__all__ = ["Agent", "Result", "RunState", "agent_fields", "build", "config_sections", "names", "register", "sampling",
           "section"]
