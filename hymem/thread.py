"""THREAD (Schroeder et al., 2024, "THREAD: Thinking Deeper with Recursive Spawning") as
a baseline in HyMem's harness: same client, tools, accounting and scorer.

What is built, after the paper: a thread is a model context that acts step by step
(here with the ReAct baseline's tools and action format). Besides a tool call or the
answer, a thread may write <spawn>instruction</spawn>: a child thread starts with a
context of its own, holding only that instruction (THREAD's children see what the parent
passes them, not its history), runs to its own <answer>, and that answer alone comes
back into the parent's context as the spawn's result, so a subtask's steps never reach
the parent. Children may spawn children, down to `max_depth`; a thread at the limit is
told it cannot spawn and must work itself. Each thread has its own turn budget; a child
that runs out returns what it has.

Where it differs: THREAD's threads can spawn several children at once and join them;
here a thread spawns one child per step, and children run one after another (the same
client serves them all). The root's context space is "thread"; a child at depth d is
"thread:d".
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from hymem.events import Answer, InvalidAction, PlannerTurn, Spawn
from hymem.parsing import parse_answer, parse_executor, tagged
from hymem.protocol import Result, RunState, agent_fields, register
from hymem.tools import Toolbox

THREAD_SYSTEM = """You are a research agent that answers questions with tools, and you can delegate.
Available tools:
{tools}
At each step think inside <think>...</think>, then do exactly one of:
- call one tool: <tool_call>{{"name": "web_search", "arguments": {{"keywords": "..."}}}}</tool_call>
{spawn}- give the final answer: <answer>...</answer><confidence>0-1</confidence>"""
SPAWN_OPTION = ("- spawn a child thread for a self-contained subtask: <spawn>the subtask, with every detail it "
                "needs</spawn>; the child works in its own context and its answer comes back to you\n")
NO_SPAWN = "You cannot spawn here: call a tool yourself or answer."


@dataclasses.dataclass
class ThreadConfig:
    max_depth: int = 2  # the root is depth 0
    root_turns: int = 30
    child_turns: int = 10
    max_children: int = 8  # spawns per thread
    sampling: dict = dataclasses.field(default_factory=lambda: {"temperature": 0.0, "max_tokens": 1024})


class ThreadAgent:
    persistent_space = "thread"

    def __init__(self, client, tools: Toolbox, config: Optional[ThreadConfig] = None):
        self.client, self.tools, self.config = client, tools, config or ThreadConfig()

    def _thread(self, run: RunState, instruction: str, depth: int, name: str) -> tuple[str, Optional[float], int]:
        """Run one thread to its answer: (answer, confidence, turns used)."""
        cfg = self.config
        space = "thread" if depth == 0 else f"thread:{depth}"
        can_spawn = depth < cfg.max_depth
        system = {"role": "system", "content": THREAD_SYSTEM.format(tools=self.tools.describe(),
                                                                    spawn=SPAWN_OPTION if can_spawn else "")}
        head = {"role": "user", "content": (f"Question: {instruction}" if depth == 0 else
                                            f"Subtask from your parent thread: {instruction}")}
        history: list[dict] = []
        budget = cfg.root_turns if depth == 0 else cfg.child_turns
        children, turn = 0, 0
        for turn in range(1, budget + 1):
            out = run.call(self.client, [system, head] + history, space, cfg.sampling)
            text = out.text
            history.append({"role": "assistant", "content": text})
            if depth == 0:
                run.emit(PlannerTurn(turn, out.prompt_tokens + out.completion_tokens, run.total_tokens(),
                                     len(history)))
            done = parse_answer(text)
            if done is not None:
                return done[0], done[1], turn
            spawns = tagged("spawn", text)
            if spawns:
                if not can_spawn or children >= cfg.max_children:
                    run.emit(InvalidAction(space, "spawn not available (depth or child limit)"))
                    history.append({"role": "user", "content": NO_SPAWN})
                    continue
                children += 1
                child = f"{name}.{children}"
                answer, confidence, _ = self._thread(run, spawns[0][:4000], depth + 1, child)
                run.emit(Spawn(name, child, depth + 1, len(answer)))
                history.append({"role": "user", "content": f"<child_result>{answer or 'no answer'}"
                                                           f"</child_result>"})
                continue
            action = parse_executor(text)
            if action.kind == "tool":
                _, raw, _ = run.tool(self.tools, action)
                history.append({"role": "user", "content": f"<observation>{raw}</observation>"})
            else:
                run.emit(InvalidAction(space, action.reason[:200]))
                history.append({"role": "user", "content": "No valid action. Call one tool, "
                                + ("spawn a child, " if can_spawn else "") + "or answer with <answer>."})
        return "", None, turn

    def run(self, question: str) -> Result:
        run = RunState(question)
        answer, confidence, turns = self._thread(run, question, 0, "root")
        run.emit(Answer(answer, confidence, turns))
        return run.result(answer, confidence)


@register("thread", section=("thread", ThreadConfig))
def _build(name, client, tools, config, aux):
    """THREAD; config section `thread` (ThreadConfig fields)."""
    fields = agent_fields(config, "thread")
    return ThreadAgent(client, tools, ThreadConfig(**fields))
