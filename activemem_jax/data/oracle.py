"""An oracle solver for the synthetic world: it follows a question's hop chain with
entity-name searches only, reading each fact from the retrieved document's text.

It proves the benchmark solvable and writes expert trajectories (MEM1 action format)
for SFT.
"""

from __future__ import annotations

from typing import Callable, Optional

from activemem_jax.data.synthetic_world import FACT_PATTERNS

Search = Callable[[str, int], list]


def read_fact(doc: dict, entity: str, relation: str) -> Optional[str]:
    """The value of `relation` for `entity` as stated in the document text, or None."""
    pattern = FACT_PATTERNS[relation]
    for sentence in doc["text"].split(". "):
        m = pattern.match(sentence if sentence.endswith(".") else sentence + ".")
        if m and m.group("n") == entity:
            return m.group("v")
    return None


def solve_chain(hops: list[dict], search: Search, k: int = 3) -> dict:
    """Follow `hops` (a question's hop list) from its first entity. Returns
    {"answer", "queries", "found": [bool per hop], "docids"}; answer None on failure."""
    entity = hops[0]["entity"]
    queries, found, docids = [], [], []
    value = None
    for hop in hops:
        queries.append(entity)
        docs = search(entity, k)
        doc = next((d for d in docs if d["title"] == entity), None)
        found.append(doc is not None)
        docids.append(doc["docid"] if doc else None)
        if doc is None:
            return {"answer": None, "queries": queries, "found": found, "docids": docids}
        if hop["relation"] is None:  # constraint question: the entity itself is the answer
            value = entity
            break
        value = read_fact(doc, entity, hop["relation"])
        if value is None:
            return {"answer": None, "queries": queries, "found": found, "docids": docids}
        entity = value
    return {"answer": value, "queries": queries, "found": found, "docids": docids}


def expert_actions(task: dict, search: Search, k: int = 3) -> list[str]:
    """MEM1-format actions solving a task: one search per hop, then the answers."""
    actions, answers, notes = [], [], []
    for qi, hops in enumerate(task["hops"]):
        result = solve_chain(hops, search, k)
        for query in result["queries"]:
            summary = "; ".join(notes) or "nothing found yet"
            actions.append(f"<think>Known so far: {summary}. Next I look up {query} "
                           f"for question {qi + 1}.</think>\n<search>{query}</search>")
        answers.append(result["answer"] or "unknown")
        notes.append(f"Q{qi + 1}: {answers[-1]}")
    actions.append(f"<think>Known so far: {'; '.join(notes)}.</think>\n"
                   f"<answer>{'; '.join(answers)}</answer>")
    return actions
