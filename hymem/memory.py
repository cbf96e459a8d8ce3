"""Structured memories (paper Table 7) and the memory manager that folds into them.

Each memory is validated with pydantic. A fold is Eq. 13, M_{t+1} = Phi(H^p_t, H^e_<=t,
H^iso_<=t, M_t): each module's rewrite sees its previous value (so milestones from before
the last fold survive) beside the histories. It asks the model for each module's JSON;
invalid JSON is retried once with a corrective message, then the previous memory is
kept and the failure recorded. Inputs are clipped to `max_input_chars` (the most recent
text kept) so a fold prompt fits the context window."""

from __future__ import annotations

import json
from typing import Callable, Optional

from pydantic import BaseModel, Field

from hymem import prompts
from hymem.events import MemoryFailure
from hymem.parsing import as_text, extract_json


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


def _tail(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else "[...earlier text clipped...]\n" + text[-max_chars:]


def fold(memories: Memories, complete: Callable[[list, str], str], question: str,
         planner_history: str, executor_summary: str, recent_history: str,
         tool_history: str, record: Callable[[dict], None], iso_summary: str = "",
         max_input_chars: int = 60000) -> None:
    """Rewrite the three memories from their previous values and the histories (one model
    call per module)."""
    previous = {kind: json.dumps(getattr(memories, kind).model_dump(), ensure_ascii=False) for kind in SCHEMAS}
    budget = max(1000, max_input_chars // 3)
    inputs = {
        "episode": f"previous_memory:\n{previous['episode']}\n\n"
                   f"planner_history:\n{_tail(planner_history, budget)}\n\n"
                   f"executor_summary:\n{_tail(executor_summary, budget // 2)}"
                   + (f"\n\nisolated_reasoning_summary:\n{_tail(iso_summary, budget // 2)}" if iso_summary else ""),
        "working": f"previous_memory:\n{previous['working']}\n\n"
                   f"recent_history:\n{_tail(recent_history, budget)}\n\n"
                   f"hypothesis_section:\n{memories.working.active_hypotheses}",
        "tool": f"previous_memory:\n{previous['tool']}\n\nhistory_str:\n{_tail(tool_history, budget)}",
    }
    for kind, schema in SCHEMAS.items():
        messages = [{"role": "system", "content": prompts.MEMORY_SYSTEM},
                    {"role": "user", "content": prompts.MEMORY_TASKS[kind].format(question=question)
                     + "\n\n" + inputs[kind]}]
        value: Optional[BaseModel] = None
        error = ""
        for attempt in range(2):
            text = as_text(complete(messages, f"memory:{kind}"))
            raw = extract_json(text)
            try:
                if raw is None:
                    raise ValueError("no JSON object found")
                value = schema.model_validate(raw)
                json.dumps(value.model_dump(), ensure_ascii=False)  # it must render
                break
            except Exception as e:  # ValidationError, ValueError, RecursionError, ...
                value = None
                error = (str(e).splitlines() or [type(e).__name__])[0][:300]
                messages = messages[:2] + [{"role": "assistant", "content": text[:4000]},
                                           {"role": "user", "content": f"That was not valid JSON for this module "
                                                                       f"({error}). Output only the JSON object."}]
        if value is None:
            record(MemoryFailure(kind, error).as_dict())
        else:
            setattr(memories, kind, value)
    memories.folds += 1
