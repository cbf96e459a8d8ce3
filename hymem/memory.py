"""Structured memories (paper Table 7) and the memory manager that folds into them.

Each memory is validated with pydantic. A fold asks the model for each module's JSON;
invalid JSON is retried once with a corrective message, then the previous memory is
kept and the failure recorded."""

from __future__ import annotations

import json
from typing import Callable, Optional

from pydantic import BaseModel, Field, ValidationError

from hymem import prompts
from hymem.parsing import extract_json


class KeyEvent(BaseModel):
    step: str = ""
    description: str = ""
    outcome: str = ""


class EpisodeMemory(BaseModel):
    task_description: str = ""
    key_events: list[KeyEvent] = Field(default_factory=list)
    current_progress: str = ""


class NextAction(BaseModel):
    type: str = "search"
    description: str = ""


class WorkingMemory(BaseModel):
    immediate_goal: str = ""
    current_challenges: str = ""
    active_hypotheses: list[str] = Field(default_factory=list)
    next_actions: list[NextAction] = Field(default_factory=list)


class ToolUse(BaseModel):
    tool_name: str
    call_count: int = 0
    effective_queries: list[str] = Field(default_factory=list)


class ToolMemory(BaseModel):
    tools_used: list[ToolUse] = Field(default_factory=list)
    derived_rules: list[str] = Field(default_factory=list)
    useful_sources: list[str] = Field(default_factory=list)


SCHEMAS = {"episode": EpisodeMemory, "working": WorkingMemory, "tool": ToolMemory}


class Memories:
    def __init__(self):
        self.episode, self.working, self.tool = EpisodeMemory(), WorkingMemory(), ToolMemory()
        self.folds = 0

    def render(self, kinds=("episode", "working", "tool")) -> str:
        """The memory block injected into a context (planner/iso: all; executor: tool)."""
        parts = []
        for kind in kinds:
            mem = getattr(self, kind)
            if mem != SCHEMAS[kind]():
                parts.append(f"<{kind}_memory>{json.dumps(mem.model_dump(), ensure_ascii=False)}</{kind}_memory>")
        return "\n".join(parts)


def fold(memories: Memories, complete: Callable[[list, str], str], question: str,
         planner_history: str, executor_summary: str, recent_history: str,
         tool_history: str, record: Callable[[dict], None]) -> None:
    """Rewrite the three memories from the histories (one model call per module)."""
    inputs = {
        "episode": f"planner_history:\n{planner_history}\n\nexecutor_summary:\n{executor_summary}",
        "working": f"recent_history:\n{recent_history}\n\nhypothesis_section:\n{memories.working.active_hypotheses}",
        "tool": f"history_str:\n{tool_history}",
    }
    for kind, schema in SCHEMAS.items():
        messages = [{"role": "system", "content": prompts.MEMORY_SYSTEM},
                    {"role": "user", "content": prompts.MEMORY_TASKS[kind].format(question=question)
                     + "\n\n" + inputs[kind]}]
        value: Optional[BaseModel] = None
        error = ""
        for attempt in range(2):
            text = complete(messages, f"memory:{kind}")
            raw = extract_json(text)
            try:
                if raw is None:
                    raise ValueError("no JSON object found")
                value = schema.model_validate(raw)
                break
            except (ValidationError, ValueError) as e:
                error = str(e).splitlines()[0]
                messages = messages + [{"role": "assistant", "content": text},
                                       {"role": "user", "content": f"That was not valid JSON for this module "
                                                                   f"({error}). Output only the JSON object."}]
        if value is None:
            record({"type": "memory_failure", "module": kind, "error": error})
        else:
            setattr(memories, kind, value)
    memories.folds += 1
