"""A-MEM (Xu et al., 2025, "A-MEM: Agentic Memory for LLM Agents") as a baseline in
HyMem's harness: same client, tools, accounting and scorer.

What is built, after the paper's Zettelkasten memory:
- Note construction: every tool observation becomes a note (the action and the clipped
  observation as its content); one model call ("amem:note") writes its keywords, tags and
  a one-sentence context.
- Link generation and memory evolution: the new note's nearest notes are shown to the
  model in one call ("amem:evolve", as A-MEM's own evolution step does it), which names
  the notes to link and may rewrite those neighbours' context and tags.
- Retrieval: every turn the top-k notes for the question and the last thought, with the
  notes linked to them, are put in the prompt.
- The agent: a ReAct loop (the same action format and tools as the ReAct baseline)
  whose working context holds the question, the retrieved notes and only the last
  `window` turns; older turns live in memory as notes.

Where it differs: A-MEM ranks notes by sentence-embedding cosine similarity; with no
embedding model on disk here, neighbours and retrieval are BM25 (bm25s) over each note's
keywords, tags, context and content. Invalid JSON from the note or evolution call leaves
the note without keywords, or without links, and is recorded; it never ends the run.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from hymem.baselines import REACT_SYSTEM
from hymem.events import Answer, InvalidAction, MemoryFailure, MemoryWrite, PlannerTurn
from hymem.parsing import as_text, extract_json, parse_answer, parse_executor
from hymem.protocol import Result, RunState, agent_fields, register
from hymem.tools import Toolbox

NOTE_PROMPT = """Generate a structured analysis of this memory content. Identify the most important keywords (nouns, names, numbers, key concepts; at least three), one sentence of context (the topic, the key points and what it is evidence for), and broad tags that classify it (at least three). Output only this JSON:
{{"keywords": ["..."], "context": "...", "tags": ["..."]}}

Content:
{content}"""

EVOLVE_PROMPT = """You are an AI memory evolution agent for a Zettelkasten of notes. A new note arrived; decide how it relates to its nearest existing notes.
1. links: the numbers of the notes that are meaningfully related to the new note (same entity, same question, supporting or contradicting evidence).
2. updates: for neighbours whose context or tags should change in light of the new note, their new context and tags.
Output only this JSON:
{{"links": [1], "updates": [{{"note": 1, "context": "...", "tags": ["..."]}}]}}

New note:
context: {context}
keywords: {keywords}
content: {content}

Nearest notes:
{neighbours}"""


@dataclasses.dataclass
class Note:
    id: int
    content: str
    keywords: list
    tags: list
    context: str
    turn: int
    links: set = dataclasses.field(default_factory=set)

    def text(self) -> str:
        return " ".join([" ".join(self.keywords), " ".join(self.tags), self.context, self.content])

    def render(self, chars: int = 600) -> str:
        return (f"[note {self.id}] tags: {', '.join(self.tags[:6])}; context: {self.context[:300]}\n"
                f"{self.content[:chars]}")


@dataclasses.dataclass
class AMemConfig:
    max_turns: int = 100
    window: int = 4  # turns (assistant + observation) kept verbatim in the working context
    retrieve_k: int = 5  # notes retrieved for every turn
    neighbours: int = 5  # nearest notes shown to the evolution step
    note_chars: int = 1500  # observation characters a note keeps
    sampling: dict = dataclasses.field(default_factory=lambda: {"temperature": 0.0, "max_tokens": 1024})


class NoteStore:
    """The notes and a BM25 index over them (rebuilt when a note changes)."""

    def __init__(self):
        self.notes: list[Note] = []
        self._index = None

    def add(self, note: Note):
        self.notes.append(note)
        self._index = None

    def touched(self):
        self._index = None

    def nearest(self, query: str, k: int, exclude: Optional[int] = None) -> list[Note]:
        pool = [n for n in self.notes if n.id != exclude]
        if not pool or k <= 0:
            return []
        from activemem_jax.data.retrieval import BM25Retriever

        if self._index is None:
            self._index = BM25Retriever([{"docid": str(n.id), "title": "", "text": n.text()} for n in self.notes])
        try:
            hits = self._index.search(query or "note", min(k + 1, len(self.notes)))
        except Exception:  # a query with no indexable word
            return []
        by_id = {n.id: n for n in pool}
        return [by_id[int(h["docid"])] for h in hits if h.get("score", 0) > 0 and int(h["docid"]) in by_id][:k]


class AMemAgent:
    persistent_space = "amem"

    def __init__(self, client, tools: Toolbox, config: Optional[AMemConfig] = None):
        self.client, self.tools, self.config = client, tools, config or AMemConfig()

    def _json(self, run: RunState, prompt: str, space: str) -> Optional[dict]:
        text = run.call(self.client, [{"role": "user", "content": prompt}], space, self.config.sampling).text
        value = extract_json(as_text(text))
        if not isinstance(value, dict):
            run.emit(MemoryFailure(space, "no JSON object in the reply"))
            return None
        return value

    @staticmethod
    def _strings(value, limit: int = 12) -> list:
        return [as_text(v)[:80] for v in value[:limit]] if isinstance(value, list) else []

    def _write(self, run: RunState, store: NoteStore, content: str, turn: int) -> None:
        """Note construction, then link generation and memory evolution."""
        meta = self._json(run, NOTE_PROMPT.format(content=content), "amem:note") or {}
        note = Note(len(store.notes) + 1, content, self._strings(meta.get("keywords")),
                    self._strings(meta.get("tags")), as_text(meta.get("context", ""))[:500], turn)
        near = store.nearest(note.text(), self.config.neighbours)
        store.add(note)
        evolved = 0
        if near:
            listing = "\n".join(f"{n.id}: context: {n.context[:200]}; tags: {', '.join(n.tags[:6])}; "
                                f"content: {n.content[:200]}" for n in near)
            plan = self._json(run, EVOLVE_PROMPT.format(context=note.context, keywords=", ".join(note.keywords),
                                                        content=content[:800], neighbours=listing),
                              "amem:evolve") or {}
            by_id = {n.id: n for n in near}
            for i in plan.get("links", []) if isinstance(plan.get("links"), list) else []:
                if isinstance(i, int) and i in by_id:
                    note.links.add(i)
                    by_id[i].links.add(note.id)
            for update in plan.get("updates", []) if isinstance(plan.get("updates"), list) else []:
                target = by_id.get(update.get("note")) if isinstance(update, dict) else None
                if target is None:
                    continue
                if isinstance(update.get("context"), str) and update["context"].strip():
                    target.context = update["context"][:500]
                tags = self._strings(update.get("tags"))
                target.tags = tags or target.tags
                evolved += 1
            store.touched()
        run.emit(MemoryWrite(note.id, len(note.links), evolved))

    def _memory_block(self, store: NoteStore, query: str) -> str:
        hits = store.nearest(query, self.config.retrieve_k)
        if not hits:
            return ""
        shown, lines = {n.id for n in hits}, []
        by_id = {n.id: n for n in store.notes}
        for n in hits:
            lines.append(n.render())
            for j in sorted(n.links - shown)[:2]:  # a retrieved note brings its links along
                shown.add(j)
                lines.append("  linked " + by_id[j].render(300))
        return "Relevant memory notes:\n" + "\n".join(lines)

    def run(self, question: str) -> Result:
        cfg = self.config
        run, store = RunState(question), NoteStore()
        system = {"role": "system", "content": REACT_SYSTEM.format(tools=self.tools.describe())}
        history: list[dict] = []
        answer, confidence, turn, thought = "", None, 0, ""
        for turn in range(1, cfg.max_turns + 1):
            memory = self._memory_block(store, f"{question} {thought}")
            head = {"role": "user", "content": f"Question: {question}" + (f"\n\n{memory}" if memory else "")}
            out = run.call(self.client, [system, head] + history[-2 * cfg.window:], "amem", cfg.sampling)
            text = out.text
            history.append({"role": "assistant", "content": text})
            thought = text.split("</think>")[0][-500:]  # the next retrieval's query, with the question
            done = parse_answer(text)
            if done is not None:
                answer, confidence = done
                run.emit(PlannerTurn(turn, out.prompt_tokens + out.completion_tokens, run.total_tokens(),
                                     len(history)))
                break
            action = parse_executor(text)
            if action.kind == "tool":
                _, raw, args = run.tool(self.tools, action)
                history.append({"role": "user", "content": f"<observation>{raw}</observation>"})
                self._write(run, store, f"{action.name}({args}) -> {raw[:cfg.note_chars]}", turn)
            else:
                run.emit(InvalidAction("amem", action.reason[:200]))
                history.append({"role": "user", "content": "No valid action. Call one tool with "
                                                           "<tool_call>{...}</tool_call> or answer with <answer>."})
            run.emit(PlannerTurn(turn, out.prompt_tokens + out.completion_tokens, run.total_tokens(), len(history)))
        run.emit(Answer(answer, confidence, turn))
        return run.result(answer, confidence)


@register("amem", section=("amem", AMemConfig))
def _build(name, client, tools, config, aux):
    """A-MEM; config section `amem` (AMemConfig fields)."""
    fields = agent_fields(config, "amem")
    return AMemAgent(client, tools, AMemConfig(**fields))
