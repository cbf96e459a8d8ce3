"""ActiveMem as a search agent (the paper's Table 10 protocol): MEM1's search loop
(envs/multi_objective_qa.py) with a second tool, <open>, a cap on tool calls and the task
family's own scorer.

    env = SearchAgentEnv(retriever, score, documents=corpus, max_turns=101)
    obs = env.reset(tasks)      # tasks {"id", "question", "answers", ...}: one question each
    obs, rewards, dones, infos = env.step(actions)

An action is <think>...</think> then one of:
- <search>query</search>: the retriever's top-k (`batch_search(queries, k)`, batched over the
  episodes), each hit as its docid, title and the first `snippet_chars` of its text;
- <open>docid</open>: that document's text, its first `open_chars` characters (with a note of
  the full length when cut). A docid is looked up in `documents` (the family's corpus), then
  in this episode's search hits (a backend with no corpus here: the text the hit carried);
  an unknown docid gets an observation saying so and still counts as a tool call;
- <answer>text</answer>: the episode ends; reward = `score(task, text)` (gaia_score for GAIA,
  the registry's exact match for BrowseComp-Plus), 0 if a tag is left unbalanced, plus
  format_reward for a non-empty answer.

Searches and opens are tool calls: at most `max_tool_calls` per episode (100, the paper's
cap). The last one's observation says no call is left; a tool call after it is not served
and ends the episode unanswered (reward 0, `capped` in its info). The turn budget
(`max_turns`, a task's own "max_turns") bounds the episode as in the QA environment; by
default it is the cap plus one turn to answer. Anything else is an invalid turn (a format
hint as its observation). The info carries the telemetry: searches, opens, unknown_opens,
tool_calls, invalid, capped.

`expert` (SFT) searches with the question, opens each of the task's gold documents the
corpus holds (`gold_docs`, else `evidence_docs`: BrowseComp-Plus's) and answers the gold
answer; a task with no such document (GAIA) has no expert turns: it raises.

No live web: the retriever is a local corpus (BM25 over BrowseComp-Plus's corpus) or a
retrieval server; any backend with the same `batch_search` plugs in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Callable, Optional, Sequence, Union

from activemem_jax.envs import prompts
from activemem_jax.envs.multi_objective_qa import Action, Episode, MultiObjectiveQAEnv, action_regex, parse_action

TOOLS = ("search", "open")
PROMPT = (
    "You will answer a question by searching a document collection, through iterative reasoning and "
    "summarization. At each step you see the question, your previous summary in <think> ... </think>, your "
    "last action and its result in <information> ... </information> (except the first step, where you see only "
    "the question). Then: 1. Reason and update a concise, cumulative summary of what you have found inside "
    "<think> </think>; it is your memory. 2. Then choose one action: - <search> query </search>: search the "
    "collection with key words or a short phrase; each result shows its docid, title and the start of its "
    "text. - <open> docid </open>: read a document from the results (up to {open_chars} characters of it). - "
    "<answer> answer </answer>: your final answer, concise, without explanations. You have at most "
    "{max_tool_calls} searches and opens in all. Always follow the order: <think> ... </think> then one of "
    "<search> ... </search>, <open> ... </open> or <answer> ... </answer>. Question: {question}")
FORMAT_HINT = (
    "Your previous response was not valid. Reply with <think> ... </think> followed by exactly one of "
    "<search> query </search>, <open> docid </open> or <answer> answer </answer>, with every tag closed.")


@dataclasses.dataclass
class SearchEpisode(Episode):
    opens: int = 0
    unknown_opens: int = 0
    capped: bool = False  # a tool call came after the last one allowed
    seen: dict = dataclasses.field(default_factory=dict)  # docid -> document, every search hit so far

    @property
    def tool_calls(self) -> int:
        return self.searches + self.opens


def clip(text: str, limit: int) -> str:
    """`text`'s first `limit` characters, with "..." where it was cut."""
    return text if len(text) <= limit else text[:limit].rstrip() + "..."


class SearchAgentEnv(MultiObjectiveQAEnv):
    """The QA environment's loop with search, open and a tool-call cap (module doc)."""

    format_hint = FORMAT_HINT

    @staticmethod
    def action_pattern(max_chars: int = 400) -> str:
        """The regex policy.action_format="tags" decodes turns under: a search, an open or
        an answer (`action_regex` with TOOLS)."""
        return action_regex(max_chars, TOOLS)

    def __init__(self, retriever, score: Callable[[dict, str], float],
                 documents: Union[Mapping[str, dict], Sequence[dict]] = (), max_turns: Optional[int] = None,
                 topk: int = 5, format_reward: float = 0.0, max_tool_calls: int = 100, open_chars: int = 4000,
                 snippet_chars: int = 300):
        """score: the family's scorer of a final answer (TaskSet.score); documents: the
        corpus `open` reads (docid -> document, or the documents); max_turns: None for
        max_tool_calls + 1."""
        if max_tool_calls < 1 or open_chars < 1 or snippet_chars < 1:
            raise ValueError(f"max_tool_calls={max_tool_calls}, open_chars={open_chars}, snippet_chars="
                             f"{snippet_chars}: each must be >= 1")
        super().__init__(retriever, max_turns=max_turns or max_tool_calls + 1, topk=topk,
                         format_reward=format_reward)
        self.score, self.max_tool_calls = score, max_tool_calls
        self.open_chars, self.snippet_chars = open_chars, snippet_chars
        self.documents = (documents if isinstance(documents, Mapping)
                          else {str(d["docid"]): d for d in documents})

    def initial_prompt(self, task: dict) -> str:
        return PROMPT.format(question=task["question"], open_chars=self.open_chars,
                             max_tool_calls=self.max_tool_calls)

    def reset(self, tasks: Sequence[dict]) -> list[str]:
        for t in tasks:
            if not t.get("question") or not t.get("answers"):
                raise ValueError(f"task {t.get('id')!r}: a search-agent task needs a question and its answers")
            if t.get("files"):
                raise ValueError(f"task {t.get('id')!r} has attached files, which the search agent cannot read "
                                 "(it has search and open only): keep tasks without one (GAIA: "
                                 "data.text_only='no_attachment')")
        self.episodes = [SearchEpisode(task=t) for t in tasks]
        return [self.initial_prompt(t) for t in tasks]

    def parse(self, i: int, text: str) -> Action:
        """A search, an open or an answer; a tool call past the cap is "over_cap"."""
        act = parse_action(text, TOOLS)
        if act.kind in TOOLS and self.episodes[i].tool_calls >= self.max_tool_calls:
            return dataclasses.replace(act, kind="over_cap")
        return act

    def call_tool(self, ep: SearchEpisode, act: Action, docs: Optional[list], left: int) -> str:
        if act.kind == "over_cap":
            ep.done = ep.capped = True
            return f"No tool calls left (at most {self.max_tool_calls}): the episode ends unanswered."
        if act.kind == "search":
            ep.searches += 1
            ep.retrieved += [{"docid": d.get("docid"), "title": d.get("title", "")} for d in docs]
            ep.seen.update({str(d.get("docid")): d for d in docs})
            text = "\n".join(f"Doc {k} [docid: {d.get('docid')}] (Title: {d.get('title', '')}) "
                             f"{clip(d.get('text', ''), self.snippet_chars)}" for k, d in enumerate(docs, 1))
            return f"<information>{text or 'No results.'}</information>\n\n" + self.hint(ep, left)
        ep.opens += 1
        doc = self.documents.get(act.content) or ep.seen.get(act.content)
        if doc is None:
            ep.unknown_opens += 1
            return (f"<information>No document with docid {act.content!r}: open a docid from the search "
                    "results.</information>\n\n" + self.hint(ep, left))
        body = doc.get("text", "")
        cut = f" [cut at {self.open_chars} of {len(body)} characters]" if len(body) > self.open_chars else ""
        return (f"<information>[docid: {act.content}] (Title: {doc.get('title', '')}) "
                f"{body[:self.open_chars]}{cut}</information>\n\n" + self.hint(ep, left))

    def hint(self, ep: SearchEpisode, left: int) -> str:
        """The turns left and the tool calls left; with none left, to answer now."""
        calls = self.max_tool_calls - ep.tool_calls
        if left <= 1:
            return prompts.turns_left_hint(left)
        if calls <= 0:
            return "No tool calls left: give your final answer inside <answer> </answer>."
        return f"{prompts.turns_left_hint(left)} You have {calls} tool calls left."

    def answer_score(self, task: dict, answer: str) -> float:
        return float(self.score(task, answer))

    @staticmethod
    def well_formed(task: dict, answer: str) -> bool:
        """Any non-empty answer earns format_reward."""
        return bool(answer.strip())

    def gold_docs(self, task: dict) -> list[str]:
        """The docids of the task's gold documents (`gold_docs`, else `evidence_docs`) that
        the corpus holds, in order."""
        ids = task.get("gold_docs") or task.get("evidence_docs") or []
        return [d for d in map(str, ids) if d in self.documents]

    def expert(self, i: int, turn: int) -> str:
        """A gold reply at `turn` (SFT): a search with the question, an open of each gold
        document, then the gold answer (at once when the turn budget or the cap is too
        short for the tool calls). A task with no gold document in the corpus is a
        ValueError: no evidence to imitate."""
        task = self.episodes[i].task
        docs = self.gold_docs(task)
        if not docs:
            raise ValueError(f"task {task.get('id')!r}: no gold document in the corpus (gold_docs / evidence_docs), "
                             "so the search agent has no expert turns; set train.sft_steps=0 (GAIA has none)")
        script = [f"<search>{task['question']}</search>"] + [f"<open>{d}</open>" for d in docs]
        budget = task.get("max_turns", self.max_turns)
        if turn < len(script) and len(script) < budget and len(script) <= self.max_tool_calls:
            return f"<think>I look for the documents that answer the question.</think>\n{script[turn]}"
        gold = task.get("gold") or task["answers"][0][0]
        return f"<think>The documents I opened answer the question.</think>\n<answer>{gold}</answer>"

    def info(self, ep: SearchEpisode) -> dict:
        score = self.answer_score(ep.task, ep.answer) if ep.answer is not None else 0.0
        return {**super().info(ep), "per_question_em": [score], "opens": ep.opens, "unknown_opens": ep.unknown_opens,
                "tool_calls": ep.tool_calls, "capped": ep.capped}


__all__ = ["FORMAT_HINT", "PROMPT", "SearchAgentEnv", "TOOLS"]
