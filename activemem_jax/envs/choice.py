"""Single-turn multiple-choice environment: GPQA and AQuA-RAT (data/choice_loaders.py).

    env = ChoiceEnv()
    obs = env.reset(tasks)        # tasks {"question", "options": [texts], "gold": letter}
    obs, rewards, dones, infos = env.step(replies)

The prompt lists the options as "A) text", one a line, and asks for the letter on the last
line as "Answer: X". `parse_choice` reads the letter robustly: the last mark in the reply
among "Answer: X" / "answer is X" (also "answer is: X", "(X)", "option X", "**X**"),
\\boxed{X}, and a line holding only the letter ("X", "(X)", "X."). Letters are capitals; a
mark counts only when its letter is one of the task's options (a mark naming another is
passed over, and an earlier one may count), and when after the letter come only
punctuation to the end of the line, or ")" and the option's text ("Answer: B) 21.5" names
B; "Answer: A or B", "Answer: A, B" and "the answer is A rational number" name none).

The reward is 1 for the gold letter, else 0; accuracy is the mean reward. `expert(i, turn)`
is the SFT reply: AQuA's rationale, or GPQA's explanation, then "Answer: X" (the answer
alone when the file has no text). Infos carry "reward" and the parsed letter as "answer".
"""

from __future__ import annotations

import re
import string
from typing import Optional, Sequence

PROMPT = ("Answer the following multiple-choice question. Reason step by step if it helps, then give the "
          "letter of the correct option on the last line in the form \"Answer: X\".\n\n"
          "Question: {question}\n\n{options}")
# a capital letter not followed by another one ("A or B", "A, B", "A/B"), then ")" (an option's
# label: its text may follow) or only punctuation to the end of the line
_LETTER = (r"[(\[*]*([A-Z])(?![)\]*]*[ \t]*(?:,|/|&|\bor\b|\band\b)[ \t]*[(\[*]*[A-Z](?![A-Za-z]))"
           r"(?=\)|[\]*]*[ \t]*(?:[.,;:!\]]|$))")
_MARKS = (re.compile(r"\\boxed\{\s*\(?([A-Z])\)?\s*\}"),
          re.compile(r"(?i:answer)(?:\s+(?i:is)[ \t]*:?|\s*:)[ \t]*(?:(?i:option)[ \t]+)?\**[ \t]*" + _LETTER,
                     re.M),
          re.compile(r"^[ \t]*[(\[*]*([A-Z])[)\]*.]*[ \t]*$", re.M))


def option_letters(n: int) -> str:
    return string.ascii_uppercase[:n]


def format_options(options: Sequence[str]) -> str:
    return "\n".join(f"{letter}) {text}" for letter, text in zip(option_letters(len(options)), options))


def parse_choice(text: str, n_options: int) -> Optional[str]:
    """The letter a reply gives among the first n_options (module doc), or None."""
    text = text if isinstance(text, str) else str(text)
    letters = option_letters(n_options)
    found = [(m.start(1), m.group(1)) for mark in _MARKS for m in mark.finditer(text) if m.group(1) in letters]
    return max(found)[1] if found else None


class ChoiceEnv:
    """One turn per episode (module doc): reset(tasks) -> prompts; step(replies) -> rewards."""

    max_turns = 1

    def reset(self, tasks: Sequence[dict]) -> list[str]:
        for t in tasks:
            if t.get("gold") not in tuple(option_letters(len(t.get("options", ())))):
                raise ValueError(f"task {t.get('id')!r}: gold {t.get('gold')!r} is not the letter of one of its "
                                 f"{len(t.get('options', ()))} options")
        self.tasks = list(tasks)
        self.done = [False] * len(self.tasks)
        return [self.prompt(t) for t in self.tasks]

    @staticmethod
    def prompt(task: dict) -> str:
        return PROMPT.format(question=task["question"], options=format_options(task["options"]))

    def expert(self, i: int, turn: int) -> str:
        """The gold reply (SFT): the task's worked text (AQuA's rationale, GPQA's explanation)
        then "Answer: X"; the answer alone when there is none."""
        task = self.tasks[i]
        worked = (task.get("rationale") or task.get("explanation") or "").strip()
        return f"{worked}\n\nAnswer: {task['gold']}" if worked else f"Answer: {task['gold']}"

    def abort(self, i: int) -> None:
        """End episode i unanswered (reward 0), e.g. when its prompt does not fit."""
        self.done[i] = True

    def step(self, replies: Sequence[str]):
        if len(replies) != len(self.tasks):
            raise ValueError(f"{len(replies)} replies for {len(self.tasks)} tasks")
        rewards, infos = [], []
        for i, (task, reply) in enumerate(zip(self.tasks, replies)):
            pred = None if self.done[i] else parse_choice(reply, len(task["options"]))
            ok = pred == task["gold"]
            rewards.append(float(ok))
            infos.append({"id": task.get("id"), "answer": pred, "gold": task["gold"], "correct": ok,
                          "reward": float(ok)})
            self.done[i] = True
        return [""] * len(self.tasks), rewards, [True] * len(self.tasks), infos


def choice_baselines(tasks: Sequence[dict]) -> dict:
    """The rules that need no learning, on `tasks`, scored as the environment scores them:
    {"chance": the expected accuracy of a uniformly random letter (1 / options, exact, not
    sampled), "first": always "A", "majority": always the gold letter most frequent on these
    very tasks (chosen with their answers: the ceiling of every constant-letter rule, ties to
    the earlier letter), "units": {rule: {task id: score}}}."""
    golds = [t["gold"] for t in tasks]
    top = max(sorted(set(golds)), key=golds.count) if golds else "A"
    units: dict = {"chance": {}, "first": {}, "majority": {}}
    for t in tasks:
        units["chance"][t["id"]] = 1.0 / max(len(t["options"]), 1)
        units["first"][t["id"]] = float(t["gold"] == "A")
        units["majority"][t["id"]] = float(t["gold"] == top)
    n = max(len(tasks), 1)
    return {**{rule: sum(u.values()) / n for rule, u in units.items()}, "majority_letter": top, "units": units}


def choice_score(task: dict, answer: str) -> float:
    """A final answer's score (TaskSet.score): 1 when its letter (parse_choice) is the gold one."""
    return float(parse_choice(answer, len(task["options"])) == task["gold"])


__all__ = ["ChoiceEnv", "PROMPT", "choice_baselines", "choice_score", "format_options", "option_letters", "parse_choice"]
