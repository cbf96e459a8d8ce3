"""Flat-context baselines in the same harness, client and tools as HyMem.

- ReAct: one growing context; raw observations appended; `max_turns` cap (100).
- Summary agent: when the context passes `summary_threshold` tokens, the last 3 turns
  are summarized by the model and replaced by the summary; the older history stays.
- ReSum: at `resum_fraction` (90%) of the context window, the previous summary and
  everything after it are summarized into one new summary (docs/design_hymem.md#baselines:
  nothing found earlier is lost) and the context restarts from [system, question + summary].
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from hymem.events import Answer, Fold, InvalidAction, PlannerTurn
from hymem.parsing import parse_confidence, parse_executor
from hymem.protocol import Result, RunState, agent_fields, register
from hymem.tools import Toolbox

REACT_SYSTEM = """You are a research agent that answers questions with tools.
Available tools:
{tools}
At each step think inside <think>...</think>, then either call one tool as
<tool_call>{{"name": "web_search", "arguments": {{"keywords": "..."}}}}</tool_call>
or give the final answer as <answer>...</answer><confidence>0-1</confidence>."""

SUMMARIZE = ("Summarize the following agent steps into a short, factual note that keeps every entity, "
             "number, source and partial answer found so far:\n\n{steps}")
RESUMMARIZE = ("Update the summary of this search with the agent steps since it. Keep every entity, number, "
               "source and partial answer from the previous summary and add what the new steps found.\n\n"
               "Previous summary:\n{summary}\n\nSteps since the summary:\n{steps}")


@dataclasses.dataclass
class BaselineConfig:
    mode: str = "react"  # react | summary | resum
    max_turns: int = 100
    context_window: int = 32768
    summary_threshold: int = 16384  # summary agent: tokens that trigger a summary
    resum_fraction: float = 0.9
    sampling: dict = dataclasses.field(default_factory=lambda: {"temperature": 0.0, "max_tokens": 1024})


class FlatAgent:
    def __init__(self, client, tools: Toolbox, config: Optional[BaselineConfig] = None):
        self.client, self.tools, self.config = client, tools, config or BaselineConfig()
        if self.config.mode not in ("react", "summary", "resum"):
            raise ValueError(f"mode={self.config.mode!r}: use react, summary or resum")
        self.persistent_space = self.config.mode

    def run(self, question: str) -> Result:
        cfg = self.config
        run = RunState(question)
        system = {"role": "system", "content": REACT_SYSTEM.format(tools=self.tools.describe())}
        head = {"role": "user", "content": f"Question: {question}"}
        history: list[dict] = []
        answer, confidence, summary, turn = "", None, "", 0
        for turn in range(1, cfg.max_turns + 1):
            out = run.call(self.client, [system, head] + history, cfg.mode, cfg.sampling)
            text = out.text
            history.append({"role": "assistant", "content": text})
            context = out.prompt_tokens + out.completion_tokens
            if "<answer>" in text and "</answer>" in text:
                answer = text.split("<answer>", 1)[1].split("</answer>", 1)[0].strip()
                conf = text.split("<confidence>", 1)[1] if "<confidence>" in text else ""
                confidence = parse_confidence(conf.split("</confidence>")[0]) if conf else None
                run.emit(PlannerTurn(turn, context, run.total_tokens(), len(history)))
                break
            action = parse_executor(text)
            if action.kind == "tool":
                _, raw, _ = run.tool(self.tools, action)
                history.append({"role": "user", "content": f"<observation>{raw}</observation>"})
            else:
                run.emit(InvalidAction(cfg.mode, action.reason[:200]))
                history.append({"role": "user", "content": "No valid action. Call one tool with "
                                                           "<tool_call>{...}</tool_call> or answer with <answer>."})
            run.emit(PlannerTurn(turn, context, run.total_tokens(), len(history)))
            if cfg.mode == "summary" and context > cfg.summary_threshold and len(history) >= 6:
                steps = "\n".join(f"[{m['role']}] {m['content']}" for m in history[-6:])
                note = run.call(self.client, [{"role": "user", "content": SUMMARIZE.format(steps=steps)}],
                                "summarize", cfg.sampling).text
                history[-6:] = [{"role": "user", "content": f"<summary>{note}</summary>"}]
                run.emit(Fold("summary_threshold", turn))
            elif cfg.mode == "resum" and context > cfg.resum_fraction * cfg.context_window:
                steps = "\n".join(f"[{m['role']}] {m['content']}" for m in history)
                prompt = (RESUMMARIZE.format(summary=summary, steps=steps) if summary else
                          SUMMARIZE.format(steps=steps))
                summary = run.call(self.client, [{"role": "user", "content": prompt}], "summarize",
                                   cfg.sampling).text or summary
                head = {"role": "user", "content": f"Question: {question}\n\nSummary so far: {summary}"}
                history = []
                run.emit(Fold("resum", turn))
        run.emit(Answer(answer, confidence, turn))
        return run.result(answer, confidence)


@register("react", "summary", "resum", section=("baselines", BaselineConfig))
def _build(name, client, tools, config, aux):
    """The flat-context baselines; config section `baselines` (BaselineConfig fields)."""
    fields = agent_fields(config, "baselines")
    return FlatAgent(client, tools, BaselineConfig(mode=name, **fields))
