"""MEM1's multi-objective multi-hop QA environment, batched and plain Python.

    env = MultiObjectiveQAEnv(retriever, max_turns=8)
    obs = env.reset(tasks)                       # one prompt per task
    obs, rewards, dones, infos = env.step(actions)

An action is the model's text: <think>...</think> then <search>query</search> (the next
observation is <information> with the top-k docs as 'Doc i(Title: ...) text' and a
turns-left hint) or <answer>a1; a2; ...</answer> (the episode ends; reward = sum of
per-question EM, 0 if the answer count differs from the questions' or a tag is left
unbalanced). Anything else gets a format hint as the observation and uses a turn. No
string makes it raise.

A subclass adds tools (envs/search_agent.py: <open>docid</open>) through `parse` (its
`tools` for `parse_action` and `action_regex`) and `call_tool` (a tool call's observation).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional, Sequence

from activemem_jax.data.retrieval import format_docs
from activemem_jax.envs import prompts
from activemem_jax.metrics import exact_match, multi_objective_score, split_answers

TAGS = ("think", "search", "answer", "information")


def action_regex(max_chars: int = 400, tools: Sequence[str] = ("search",)) -> str:
    """The action format as one regex (policy.action_format="tags" decodes every turn under
    it, activemem/rollout.py): an optional <think> block, then one tool call (<search> by
    default; each of `tools`) or one <answer>, their texts without "<" and at most
    `max_chars` in all (half each), so a small model ends its turn. Every full match parses
    as a tool call or an answer (`parse_action` with the same `tools`)."""
    think, act = max(1, max_chars // 2), max(2, max_chars - max_chars // 2)
    calls = "".join(rf"<{tool}>[ ]?[^<\s][^<]{{0,{act - 1}}}</{tool}>|" for tool in tools)
    return (rf"(<think>[^<]{{1,{think}}}</think>\n?)?"
            rf"({calls}<answer>[^<]{{1,{act}}}</answer>)")


def tags_balanced(text: str, tags: Sequence[str] = TAGS) -> bool:
    for tag in tags:
        opens = [m.start() for m in re.finditer(f"<{tag}>", text)]
        closes = [m.start() for m in re.finditer(f"</{tag}>", text)]
        if len(opens) != len(closes) or any(c < o for o, c in zip(opens, closes)):
            return False
    return True


@dataclasses.dataclass
class Action:
    kind: str  # "search" (a tool's name) | "answer" | "invalid"
    content: str = ""
    think: str = ""
    balanced: bool = True


def parse_action(text: str, tools: Sequence[str] = ("search",)) -> Action:
    """A reply as one action: exactly one tool call (<search> by default; each of `tools`,
    kind = its tag) with a non-empty text and every tag balanced, or one <answer> (its
    balance kept in `balanced`, which the reward reads); anything else is "invalid"."""
    text = text if isinstance(text, str) else str(text)
    balanced = tags_balanced(text, TAGS + tuple(t for t in tools if t not in TAGS))
    think = re.search(r"<think>(.*?)</think>", text, re.S)
    calls = [(tool, c) for tool in tools for c in re.findall(rf"<{tool}>(.*?)</{tool}>", text, re.S)]
    answers = re.findall(r"<answer>(.*?)</answer>", text, re.S)
    think_text = think.group(1).strip() if think else ""
    if len(calls) + len(answers) != 1 or "<information>" in text:
        return Action("invalid", think=think_text, balanced=balanced)
    if answers:
        return Action("answer", answers[0].strip(), think_text, balanced)
    tool, content = calls[0][0], calls[0][1].strip()
    if not content or not balanced:
        return Action("invalid", think=think_text, balanced=balanced)
    return Action(tool, content, think_text, balanced)


@dataclasses.dataclass
class Episode:
    task: dict
    turn: int = 0
    done: bool = False
    reward: float = 0.0
    searches: int = 0
    answer: Optional[str] = None
    invalid: int = 0
    retrieved: list = dataclasses.field(default_factory=list)  # {"docid", "title"} of each search's hits, in order


class MultiObjectiveQAEnv:
    """MEM1's environment (module doc). `expert` gives gold replies for SFT; the synthetic
    family's trainer uses its own oracle (`data.oracle`), which searches hop by hop."""

    format_hint = prompts.FORMAT_HINT  # the observation after an invalid reply

    @staticmethod
    def action_pattern(max_chars: int = 400) -> str:
        """The regex policy.action_format="tags" decodes turns under (`action_regex`)."""
        return action_regex(max_chars)

    def __init__(self, retriever, max_turns: int = 8, topk: int = 3, format_reward: float = 0.0):
        """format_reward: added to the reward of an episode that ends with a well-formed
        answer holding one item per question (0 by default, as MEM1; a small value gives
        tiny models a learning signal before they answer anything right)."""
        if max_turns < 1:
            raise ValueError("max_turns must be >= 1")
        self.retriever, self.max_turns, self.topk = retriever, max_turns, topk
        self.format_reward = format_reward
        self.episodes: list[Episode] = []

    @staticmethod
    def initial_prompt(task: dict) -> str:
        questions = task["questions"]
        if len(questions) == 1:
            return prompts.SINGLE_OBJECTIVE_QA.format(question=questions[0])
        listed = "".join(f"\n{i}. {q}" for i, q in enumerate(questions, 1))
        return prompts.MULTI_OBJECTIVE_QA.format(questions=listed)

    def reset(self, tasks: Sequence[dict]) -> list[str]:
        for t in tasks:
            if len(t.get("questions", [])) != len(t.get("answers", [])) or not t.get("questions"):
                raise ValueError(f"task {t.get('id')!r}: needs as many answers as questions (>= 1)")
        self.episodes = [Episode(task=t) for t in tasks]
        return [self.initial_prompt(t) for t in tasks]

    def step(self, actions: Sequence[str]):
        if len(actions) != len(self.episodes):
            raise ValueError(f"{len(actions)} actions for {len(self.episodes)} episodes")
        parsed = [self.parse(i, a) for i, a in enumerate(actions)]
        live = [i for i, ep in enumerate(self.episodes) if not ep.done]
        search_ids = [i for i in live if parsed[i].kind == "search"]
        results = dict(zip(search_ids, self.retriever.batch_search(
            [parsed[i].content for i in search_ids], self.topk))) if search_ids else {}
        obs, rewards, dones, infos = [], [], [], []
        for i, ep in enumerate(self.episodes):
            reward, text = 0.0, ""
            if not ep.done:
                act = parsed[i]
                ep.turn += 1
                left = ep.task.get("max_turns", self.max_turns) - ep.turn  # a task may set its own budget
                if act.kind == "answer":
                    ep.answer = act.content
                    reward = self.answer_score(ep.task, act.content) if act.balanced else 0.0
                    if act.balanced and self.well_formed(ep.task, act.content):
                        reward += self.format_reward
                    ep.done, ep.reward = True, reward
                elif act.kind == "invalid":
                    ep.invalid += 1
                    text = self.format_hint + "\n\n" + prompts.turns_left_hint(left)
                else:
                    text = self.call_tool(ep, act, results.get(i), left)
                if not ep.done and left <= 0:
                    ep.done = True  # out of turns without an answer: reward 0
            obs.append(text)
            rewards.append(reward)
            dones.append(ep.done)
            infos.append(self.info(ep))
        return obs, rewards, dones, infos

    def parse(self, i: int, text: str) -> Action:
        """Episode i's reply as an action (`parse_action`); a subclass with more tools
        parses them here, and may read the episode's state (envs/search_agent.py: a tool
        call past its cap)."""
        return parse_action(text)

    def call_tool(self, ep: Episode, act: Action, docs: Optional[list], left: int) -> str:
        """Serve a tool call (a kind `parse` gives other than answer and invalid) and return
        its observation; `docs`: a search's hits (the retriever's, batched over the
        episodes), `left`: the turns left. Here the one tool, search: MEM1's
        <information> and the turns-left hint."""
        ep.searches += 1
        ep.retrieved += [{"docid": d.get("docid"), "title": d.get("title", "")} for d in docs]
        return f"<information>{format_docs(docs)}</information>\n\n" + prompts.turns_left_hint(left)

    @staticmethod
    def answer_score(task: dict, answer: str) -> float:
        """The reward of a final answer (tags balanced): MEM1's sum of per-question EM. A
        subclass with another answer (envs/fever.py: a label) overrides it."""
        return multi_objective_score(answer, task["answers"])

    @staticmethod
    def well_formed(task: dict, answer: str) -> bool:
        """Whether a final answer earns format_reward: one item per question."""
        return len(split_answers(answer)) == len(task["answers"])

    def abort(self, i: int) -> None:
        """End episode i unanswered (reward 0), e.g. when its context no longer fits."""
        self.episodes[i].done = True

    def expert(self, i: int, turn: int) -> str:
        """A gold reply at `turn` of episode i (SFT on QA files, which hold answers but no
        trajectories): one search per question, with the question as the query, then the
        first gold answer of each; a closed-book environment (no retriever) or a budget too
        short for the searches answers at once."""
        task = self.episodes[i].task
        questions = task["questions"]
        budget = task.get("max_turns", self.max_turns)
        if self.retriever is not None and turn < len(questions) and len(questions) < budget:
            return f"<think>I look up question {turn + 1}.</think>\n<search>{questions[turn]}</search>"
        golds = "; ".join(str(g[0]) if isinstance(g, (list, tuple)) and g else str(g) for g in task["answers"])
        return f"<think>I have what the questions ask.</think>\n<answer>{golds}</answer>"

    @staticmethod
    def info(ep: Episode) -> dict:
        golds = ep.task["answers"]
        answers = split_answers(ep.answer) if ep.answer is not None else []
        per_q = ([exact_match(a, g) for a, g in zip(answers, golds)]
                 if len(answers) == len(golds) else [0.0] * len(golds))
        return {"id": ep.task.get("id"), "turns": ep.turn, "searches": ep.searches,
                "invalid": ep.invalid, "answer": ep.answer, "per_question_em": per_q,
                "reward": ep.reward, "done": ep.done}
