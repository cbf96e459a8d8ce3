"""Single-turn math environment: GSM8K (`#### answer`) and MATH (`\\boxed{answer}`).

The reward is exact match on the final answer: numbers compared as numbers (after
dropping `$`, `,` and `%`), other answers after removing spaces and LaTeX sizing.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence

from activemem_jax.metrics import last_boxed

PROMPT = ("Solve the following problem step by step. Give the final answer at the end as "
          "\\boxed{{answer}}.\n\nProblem: {question}")


def extract_final_answer(text: str) -> Optional[str]:
    text = text if isinstance(text, str) else str(text)
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed.strip()
    marks = re.findall(r"####\s*(.+)", text)
    if marks:
        return marks[-1].strip()
    return None


def _as_number(s: str) -> Optional[float]:
    cleaned = re.sub(r"[\s$,%]|\\!|\\,|\\\$|\\%", "", s).rstrip(".")
    m = re.fullmatch(r"\\d?frac\{(-?\d+)\}\{(-?\d+)\}", cleaned)
    if m and int(m.group(2)) != 0:
        return int(m.group(1)) / int(m.group(2))
    try:
        return float(cleaned)
    except ValueError:
        return None


def _canonical(s: str) -> str:
    s = re.sub(r"\\(left|right|displaystyle|text\{\s*\}|!|,)", "", s)
    s = re.sub(r"\\text\{(.*?)\}", r"\1", s)
    s = s.replace("dfrac", "frac").replace("tfrac", "frac")
    return re.sub(r"\s+", "", s).rstrip(".").lower()


def math_equal(prediction: Optional[str], gold: str) -> bool:
    if prediction is None:
        return False
    p, g = _as_number(prediction), _as_number(gold)
    if p is not None and g is not None:
        return abs(p - g) <= 1e-6 * max(1.0, abs(g))
    return _canonical(prediction) == _canonical(gold)


class MathEnv:
    """One turn per episode: reset(tasks {"question", "answer"}) -> prompts; step -> rewards."""

    def reset(self, tasks: Sequence[dict]) -> list[str]:
        self.tasks = list(tasks)
        return [PROMPT.format(question=t["question"]) for t in self.tasks]

    def expert(self, i: int, turn: int) -> str:
        """The gold reply (SFT): the task's worked solution where the file has one (GSM8K's
        ends in "#### answer", MATH's in \\boxed{answer}), else the boxed answer."""
        task = self.tasks[i]
        return task.get("solution") or f"The answer is \\boxed{{{task['answer']}}}."

    def step(self, actions: Sequence[str]):
        if len(actions) != len(self.tasks):
            raise ValueError(f"{len(actions)} actions for {len(self.tasks)} tasks")
        rewards, infos = [], []
        for task, action in zip(self.tasks, actions):
            pred = extract_final_answer(action)
            ok = math_equal(pred, str(task["answer"]))
            rewards.append(float(ok))
            infos.append({"id": task.get("id"), "prediction": pred, "correct": ok, "reward": float(ok)})
        return [""] * len(self.tasks), rewards, [True] * len(self.tasks), infos
