"""Typed trace events: every agent records its run as these, one JSON object each in the
JSONL trace (`Event.as_dict()`: its fields plus "type"). A misspelled or missing field
fails where the event is made, not in a reader of the trace."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Optional


@dataclasses.dataclass(frozen=True)
class Event:
    type: ClassVar[str] = "event"

    def as_dict(self) -> dict:
        return {"type": self.type, **dataclasses.asdict(self)}


@dataclasses.dataclass(frozen=True)
class ModelCall(Event):
    type: ClassVar[str] = "model_call"
    space: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    latency_s: float


@dataclasses.dataclass(frozen=True)
class CallError(Event):
    """A model call that failed (the turn is lost, not the run)."""
    type: ClassVar[str] = "model_error"
    space: str
    error: str


@dataclasses.dataclass(frozen=True)
class ToolCall(Event):
    type: ClassVar[str] = "tool_call"
    tool: str
    arguments: Any
    ok: bool
    chars: int


@dataclasses.dataclass(frozen=True)
class InvalidAction(Event):
    type: ClassVar[str] = "invalid_action"
    space: str
    reason: str


@dataclasses.dataclass(frozen=True)
class Fold(Event):
    """A context refresh: HyMem's memory fold, a summary, a ReSum restart."""
    type: ClassVar[str] = "fold"
    trigger: str
    turn: int


@dataclasses.dataclass(frozen=True)
class PlannerTurn(Event):
    """After each turn of an agent's persistent context (the paper's Figure 4)."""
    type: ClassVar[str] = "turn"
    turn: int
    context_tokens: int  # the persistent context's last prompt + completion
    total_tokens: int  # every space's tokens so far
    history_messages: int
    action: str = ""  # what the turn did (HyMem: task, iso, fold, answer, invalid: <why>)


@dataclasses.dataclass(frozen=True)
class ContextGuard(Event):
    type: ClassVar[str] = "context_guard"
    space: str
    prompt_tokens: int
    context_window: int


@dataclasses.dataclass(frozen=True)
class ContextTruncated(Event):
    type: ClassVar[str] = "context_truncated"
    turn: int
    dropped_exchanges: int


@dataclasses.dataclass(frozen=True)
class MemoryFailure(Event):
    type: ClassVar[str] = "memory_failure"
    module: str
    error: str


@dataclasses.dataclass(frozen=True)
class MemoryWrite(Event):
    """A note or memory entry written (A-MEM), with the links and evolutions it caused."""
    type: ClassVar[str] = "memory_write"
    note: int
    links: int
    evolved: int


@dataclasses.dataclass(frozen=True)
class Spawn(Event):
    """THREAD: a child thread started (depth of the child) and what it returned."""
    type: ClassVar[str] = "spawn"
    parent: str
    child: str
    depth: int
    returned_chars: int


@dataclasses.dataclass(frozen=True)
class DistillFallback(Event):
    type: ClassVar[str] = "distill_fallback"
    chars: int


@dataclasses.dataclass(frozen=True)
class ForcedAnswer(Event):
    """The turn that asks for an answer once the planner's budget is spent. Scoring stays
    strict (an unparsable reply is no answer); `text` is the reply as written, `why` says
    what the parser found when `parsed` is False."""
    type: ClassVar[str] = "forced_answer"
    parsed: bool
    text: str
    why: str


@dataclasses.dataclass(frozen=True)
class Answer(Event):
    type: ClassVar[str] = "answer"
    answer: str
    confidence: Optional[float]
    turns: int
    folds: int = 0


__all__ = ["Answer", "CallError", "ContextGuard", "ContextTruncated", "DistillFallback", "Event", "Fold",
           "ForcedAnswer", "InvalidAction", "MemoryFailure", "MemoryWrite", "ModelCall", "PlannerTurn", "Spawn",
           "ToolCall"]
