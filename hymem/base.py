"""Base: the backbone answers alone, in one call, with no tools and no memory (the "Base"
rows of the HyMem paper's Table 1). Its answer is the <answer> it writes, else its last
non-empty line."""

from __future__ import annotations

import dataclasses
from typing import Optional

from hymem.events import Answer, PlannerTurn
from hymem.parsing import parse_confidence
from hymem.protocol import Result, RunState, agent_fields, register

BASE_SYSTEM = ("Answer the question from what you know. Think briefly inside <think>...</think>, then give "
               "the final answer as <answer>...</answer><confidence>0-1</confidence>.")


@dataclasses.dataclass
class BaseConfig:
    sampling: dict = dataclasses.field(default_factory=lambda: {"temperature": 0.0, "max_tokens": 1024})


class BaseAgent:
    persistent_space = "base"

    def __init__(self, client, tools=None, config: Optional[BaseConfig] = None):
        self.client, self.config = client, config or BaseConfig()

    def run(self, question: str) -> Result:
        run = RunState(question)
        out = run.call(self.client, [{"role": "system", "content": BASE_SYSTEM},
                                     {"role": "user", "content": f"Question: {question}"}], "base",
                       self.config.sampling)
        text, confidence = out.text, None
        if "<answer>" in text:
            answer = text.split("<answer>", 1)[1].split("</answer>", 1)[0].strip()
            if "<confidence>" in text:
                confidence = parse_confidence(text.split("<confidence>", 1)[1].split("</confidence>")[0])
        else:
            lines = [line.strip() for line in text.replace("</think>", "\n").splitlines() if line.strip()]
            answer = lines[-1] if lines else ""
        run.emit(PlannerTurn(1, out.prompt_tokens + out.completion_tokens, run.total_tokens(), 1))
        run.emit(Answer(answer, confidence, 1))
        return run.result(answer, confidence)


@register("base", section=("base", BaseConfig))
def _build(name, client, tools, config, aux):
    return BaseAgent(client, tools, BaseConfig(**agent_fields(config, "base")))
