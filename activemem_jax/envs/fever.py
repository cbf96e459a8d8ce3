"""FEVER claim verification with retrieval: MEM1's search loop (envs/multi_objective_qa.py)
with a label for an answer.

    env = FeverEnv(retriever, max_turns=4)
    obs = env.reset(tasks)      # tasks {"claim", "label", "evidence", "questions", "answers"}
    obs, rewards, dones, infos = env.step(actions)

The actions are the QA environment's: <think>...</think> then <search>query</search> or
<answer>LABEL</answer>. `parse_label` reads the answer as one of SUPPORTS, REFUTES, NOT
ENOUGH INFO: the whole answer, case and punctuation aside, is a label or one of its forms
("supports"/"supported", "refutes"/"refuted", "not enough info"/"not enough information"/
"nei"); anything else is no label. The reward is 1 for the gold label, else 0 (label
accuracy; plus format_reward for any label).

FEVER score, at the page level: the retrieval documents carry a title and a docid, not
FEVER's sentence ids, so a prediction's evidence is the set of pages its searches returned
(each document's title, else its docid), the first `evidence_limit` distinct ones in
retrieval order (5: the limit FEVER's scorer puts on predicted evidence). An episode's
FEVER score is 1 when its label is right and, for SUPPORTS / REFUTES, some gold evidence
set has every page it names among those pages (the sentence numbers are not checked); for
NOT ENOUGH INFO the label alone. Page names are compared after FEVER's escapes are undone
("-LRB-" -> "(", "_" -> " ", ...), case and spacing aside. A task without gold evidence
sets (SUPPORTS / REFUTES without evidence ids) has no FEVER score (None).
"""

from __future__ import annotations

import re
from typing import Iterable, Optional, Sequence

from activemem_jax.envs.multi_objective_qa import MultiObjectiveQAEnv

LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
_FORMS = {"supports": "SUPPORTS", "supported": "SUPPORTS", "refutes": "REFUTES", "refuted": "REFUTES",
          "not enough info": "NOT ENOUGH INFO", "not enough information": "NOT ENOUGH INFO",
          "nei": "NOT ENOUGH INFO"}
_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
            "-COLON-": ":"}
PROMPT = (
    "You will verify a claim through iterative reasoning, summarization, and web searches. At each step, you "
    "can see the claim, your previous summary in <think> ... </think>, your search query in <search> ... "
    "</search>, and the returned information in <information> ... </information> (except the first step, where "
    "you are given only the claim). Then: 1. Reason and update a concise, cumulative summary of the evidence "
    "inside <think> </think>. 2. Then choose one: - Issue a query (key words or a short phrase, e.g. the name "
    "of the page the claim is about) inside <search> </search>. - Give your verdict inside <answer> </answer>: "
    "exactly one of SUPPORTS (the evidence supports the claim), REFUTES (the evidence contradicts it) or NOT "
    "ENOUGH INFO (the evidence settles neither). Always follow the order: <think> ... </think><search> ... "
    "</search> or <think> ... </think><answer> ... </answer>. Claim: {claim}")


def parse_label(text: str) -> Optional[str]:
    """The FEVER label an answer gives (module doc), or None."""
    words = " ".join(re.sub(r"[^\w\s]", " ", str(text)).lower().split())
    return _FORMS.get(words)


def page_key(name: str) -> str:
    """A page name as compared: FEVER's escapes undone, underscores as spaces, case and
    spacing aside ("Savages_-LRB-2012_film-RRB-" and "Savages (2012 film)" are one page)."""
    name = str(name)
    for escape, char in _ESCAPES.items():
        name = name.replace(escape, char)
    return " ".join(name.replace("_", " ").split()).casefold()


def predicted_pages(docs: Iterable[dict], limit: int = 5) -> list[str]:
    """The evidence a prediction names: the pages of the retrieved documents (title, else
    docid), distinct, in retrieval order, the first `limit`."""
    pages: list[str] = []
    for d in docs:
        key = page_key(d.get("title") or d.get("docid") or "")
        if key and key not in pages:
            pages.append(key)
    return pages[:limit]


def fever_score(label: Optional[str], gold_label: str, pages: Sequence[str], evidence: Sequence) -> Optional[float]:
    """FEVER score at the page level (module doc): label right and, for SUPPORTS / REFUTES,
    every page of at least one gold set among `pages` (page_key'd names); None where a
    SUPPORTS / REFUTES task has no gold set."""
    if gold_label != "NOT ENOUGH INFO" and not evidence:
        return None
    if label != gold_label:
        return 0.0
    if gold_label == "NOT ENOUGH INFO":
        return 1.0
    found = {page_key(p) for p in pages}
    return float(any({page_key(page) for page, _ in gold_set} <= found for gold_set in evidence))


class FeverEnv(MultiObjectiveQAEnv):
    """The QA environment's search loop with a label answer (module doc)."""

    def __init__(self, retriever, max_turns: int = 4, topk: int = 3, format_reward: float = 0.0,
                 evidence_limit: int = 5):
        super().__init__(retriever, max_turns=max_turns, topk=topk, format_reward=format_reward)
        self.evidence_limit = evidence_limit

    @staticmethod
    def initial_prompt(task: dict) -> str:
        return PROMPT.format(claim=task["claim"])

    @staticmethod
    def answer_score(task: dict, answer: str) -> float:
        return float(parse_label(answer) == task["label"])

    @staticmethod
    def well_formed(task: dict, answer: str) -> bool:
        return parse_label(answer) is not None

    def expert(self, i: int, turn: int) -> str:
        """A gold reply at `turn` (SFT): a search for each page of the first gold evidence
        set (the claim itself when there is none), then the gold label; a closed-book
        environment or a budget too short for the searches answers at once."""
        task = self.episodes[i].task
        queries = [page_key(p) for p, _ in task["evidence"][0]] if task.get("evidence") else [task["claim"]]
        budget = task.get("max_turns", self.max_turns)
        if self.retriever is not None and turn < len(queries) and len(queries) < budget:
            return f"<think>I look up the evidence.</think>\n<search>{queries[turn]}</search>"
        return f"<think>The evidence settles the claim.</think>\n<answer>{task['label']}</answer>"

    def info(self, ep) -> dict:
        label = parse_label(ep.answer) if ep.answer is not None else None
        pages = predicted_pages(ep.retrieved, self.evidence_limit)
        return {**super().info(ep), "answer": label or ep.answer, "raw_answer": ep.answer, "label": label,
                "gold_label": ep.task["label"], "per_question_em": [float(label == ep.task["label"])],
                "pages": pages, "fever_score": fever_score(label, ep.task["label"], pages, ep.task.get("evidence", []))}


def fever_baselines(tasks: Sequence[dict]) -> dict:
    """The rules that need no learning, on `tasks`: {"chance": 1/3 (a uniformly random
    label, expected), "majority": always the label most frequent on these very tasks (the
    ceiling of every constant-label rule, ties in LABELS order), "nei": always NOT ENOUGH
    INFO, "majority_fever_score" / "nei_fever_score": their FEVER score (no page retrieved:
    only NOT ENOUGH INFO claims can count; None where no task is scored), "units": {rule:
    {task id: label accuracy}}}."""
    labels = [t["label"] for t in tasks]
    top = max(LABELS, key=labels.count) if labels else LABELS[0]
    units: dict = {"chance": {}, "majority": {}, "nei": {}}
    fever: dict = {"majority": [], "nei": []}
    for t in tasks:
        units["chance"][t["id"]] = 1.0 / len(LABELS)
        for rule, label in (("majority", top), ("nei", "NOT ENOUGH INFO")):
            units[rule][t["id"]] = float(t["label"] == label)
            score = fever_score(label, t["label"], [], t.get("evidence", []))
            if score is not None:
                fever[rule].append(score)
    n = max(len(tasks), 1)
    out = {rule: sum(u.values()) / n for rule, u in units.items()}
    out.update({f"{rule}_fever_score": sum(v) / len(v) if v else None for rule, v in fever.items()})
    return {**out, "majority_label": top, "units": units}


def fever_summary(infos: Sequence[dict]) -> dict:
    """Label accuracy over the episodes' infos, and the FEVER score over those that have one."""
    scored = [i["fever_score"] for i in infos if i.get("fever_score") is not None]
    right = sum(i["label"] == i["gold_label"] for i in infos)
    return {"episodes": len(infos), "label_accuracy": right / max(len(infos), 1),
            "fever_score": sum(scored) / len(scored) if scored else None, "fever_scored": len(scored)}


__all__ = ["FeverEnv", "LABELS", "PROMPT", "fever_baselines", "fever_score", "fever_summary", "page_key", "parse_label",
           "predicted_pages"]
