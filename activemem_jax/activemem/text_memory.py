"""Retrieval memory, the ActiveMem paper's Table 1 category (III): text experience stored
after each task and retrieved into the next tasks' prompts, with two policies.

- `memorybank` (after MemoryBank, Zhong et al. 2024): every finished episode is stored
  (its task, the agent's turns as an extractive summary, its final answer; no outcome),
  keyed by the whole entry. An entry has a strength S (1 when stored, +1 each time it is
  put into a prompt, which also resets its age) and is forgotten once its age in tasks
  passes S x `forget_tasks` (the Ebbinghaus rule R = exp(-age / S) made deterministic:
  forgotten when R < exp(-1) with age in units of `forget_tasks` tasks; 0: never).
- `expel` (after ExpeL, Zhao et al. 2024): only successful episodes (reward > 0) are
  stored, as exemplars keyed by their task; nothing is forgotten and nothing is learned
  beyond the stored text (no insights).

Before a task, the store's entries are ranked by BM25 (bm25s, tokenized as
`data.retrieval.BM25Retriever` does: English stopwords and stemming) against the task's
text; the `topk` best with a score above 0 (ties: the newer first) are written, most
similar first, under a header, as a prefix of the task's first user turn, cut to
`max_chars` characters in all (the header included). An empty store, or no entry sharing
a term with the task, leaves the prompt as it was.

    memory = TextMemory("memorybank", TextMemoryConfig(topk=3, max_chars=1500))
    prefix, telemetry = memory.prefix(task_text(task))  # "" while the store is empty
    ... roll out the task with prefix + prompt ...
    memory.record_trajectory(trajectory)             # after it finished

`rollout_with_memory` is the evaluation's loop (`evaluate.evaluate` calls it for the
variants in `POLICIES`): the tasks in order, `config.batch` at a time, each batch seeing
the store as the earlier batches left it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Optional, Sequence

import numpy as np

POLICIES = ("memorybank", "expel")
TASK_CHARS, TURN_CHARS, SUMMARY_CHARS, ANSWER_CHARS = 400, 160, 480, 200  # an entry's fields, cut at store time
MIN_ROOM = 40  # an entry cut to fit the budget keeps at least this many characters, or is left out
HEADERS = {"memorybank": "Memory of earlier tasks (the most similar first):\n",
           "expel": "Successful examples from earlier tasks (the most similar first):\n"}
TELEMETRY = ("memory_entries", "memory_retrieved", "memory_chars", "memory_stored", "memory_forgotten")


@dataclasses.dataclass(frozen=True)
class TextMemoryConfig:
    topk: int = 3             # entries retrieved per task (at most)
    max_chars: int = 1500     # characters added to a prompt, header included (about 375 tokens)
    batch: int = 1            # tasks rolled out together on one state of the store (1: each sees every earlier one)
    forget_tasks: int = 100   # memorybank: forgotten after strength x this many tasks without a recall (0: never)

    def __post_init__(self):
        if self.topk < 1 or self.max_chars < 0 or self.batch < 1 or self.forget_tasks < 0:
            raise ValueError(f"{self}: need topk >= 1, max_chars >= 0, batch >= 1, forget_tasks >= 0")

    @classmethod
    def from_eval(cls, section) -> "TextMemoryConfig":
        """From a config's eval section (schema.Eval's memory_* fields, or a ConfigDict;
        a missing field keeps its default here)."""
        get = section.get if hasattr(section, "get") else lambda k, d: getattr(section, k, d)
        d = cls()
        return cls(topk=int(get("memory_topk", d.topk)), max_chars=int(get("memory_chars", d.max_chars)),
                   batch=int(get("memory_batch", d.batch)),
                   forget_tasks=int(get("memory_forget_tasks", d.forget_tasks)))


def eval_fields() -> dict:
    """An eval config section's memory_* fields at TextMemoryConfig's defaults (what
    `TextMemoryConfig.from_eval` reads), so a config can take them as overrides."""
    d = TextMemoryConfig()
    return {"memory_topk": d.topk, "memory_chars": d.max_chars, "memory_batch": d.batch,
            "memory_forget_tasks": d.forget_tasks}


@dataclasses.dataclass
class Entry:
    uid: int                  # the order stored (0, 1, ...)
    task: str
    summary: str
    answer: str
    reward: float
    time: int                 # the store's clock when stored or last recalled
    strength: int = 1

    def block(self) -> str:
        return f"Task: {self.task}\nSteps: {self.summary}\nAnswer: {self.answer}\n"


def _one_line(text: str, n: int) -> str:
    text = re.sub(r"\s+", " ", str(text or "")).strip()
    return text if len(text) <= n else text[:n - 3] + "..."


def task_text(task: dict) -> str:
    """What a task asks, for storing and as the query: its questions, its question, claim
    or prompt ("" for none: `rollout_with_memory` then takes the environment's prompt)."""
    qs = task.get("questions")
    if isinstance(qs, (list, tuple)) and qs:
        return " ".join(str(q) for q in qs)
    for key in ("question", "claim", "prompt"):
        if task.get(key):
            return str(task[key])
    return ""


def summarize_turns(responses: Sequence[str]) -> str:
    """MemoryBank's event summary, extractive: the agent's turns, each on one line cut to
    TURN_CHARS, joined with " | ", cut to SUMMARY_CHARS."""
    return _one_line(" | ".join(_one_line(r, TURN_CHARS) for r in responses), SUMMARY_CHARS)


class TextMemory:
    """A text experience store under one of `POLICIES` (module docstring)."""

    def __init__(self, policy: str, config: TextMemoryConfig = TextMemoryConfig()):
        if policy not in POLICIES:
            raise ValueError(f"text memory policy {policy!r}: one of {POLICIES}")
        self.policy, self.config = policy, config
        self.entries: list[Entry] = []
        self.clock = 0          # tasks recorded so far (stored or not)
        self.stored = 0         # entries ever stored
        self.forgotten = 0      # entries ever forgotten
        self._index = None      # the bm25s index of the current entries (None: built at the next search)

    # ---------------------------------------------------------------- write
    def record(self, task: str, responses: Sequence[str], answer: str, reward: float) -> bool:
        """One finished episode; True when the policy stored it."""
        keep = self.policy == "memorybank" or reward > 0
        if keep:
            self.entries.append(Entry(uid=self.stored, task=_one_line(task, TASK_CHARS),
                                      summary=summarize_turns(responses), answer=_one_line(answer, ANSWER_CHARS),
                                      reward=float(reward), time=self.clock))
            self.stored += 1
            self._index = None
        self.clock += 1
        return keep

    def record_trajectory(self, trajectory, task: Optional[str] = None) -> bool:
        """A finished trajectory: its task's text (or `task`), its turns, its answer (the
        environment's "answer", else the last turn) and its reward."""
        responses = [s.text for s in trajectory.steps]
        answer = trajectory.info.get("answer") or (responses[-1] if responses else "")
        return self.record(task_text(trajectory.task) if task is None else task, responses, answer,
                           trajectory.reward)

    # ---------------------------------------------------------------- read
    def forget(self) -> int:
        """memorybank: drop the entries whose age (tasks since stored or last recalled)
        passes strength x forget_tasks; the number dropped."""
        f = self.config.forget_tasks
        if self.policy != "memorybank" or not f:
            return 0
        kept = [e for e in self.entries if self.clock - e.time <= e.strength * f]
        gone = len(self.entries) - len(kept)
        if gone:
            self.entries, self._index = kept, None
            self.forgotten += gone
        return gone

    def _key(self, e: Entry) -> str:
        return e.block() if self.policy == "memorybank" else e.task

    def scores(self, query: str) -> np.ndarray:
        """BM25 of every entry (in store order) against `query`."""
        import bm25s

        if not self.entries:
            return np.zeros((0,), np.float32)
        stem = _stemmer()
        if self._index is None:
            tokens = bm25s.tokenize([self._key(e) for e in self.entries], stopwords="en", stemmer=stem,
                                    show_progress=False)
            index = None
            if any(len(ids) for ids in tokens.ids):  # bm25s cannot index a corpus without a term
                index = bm25s.BM25(k1=1.5, b=0.75)
                index.index(tokens, show_progress=False)
            self._index = index
        q = bm25s.tokenize([query], stopwords="en", stemmer=stem, return_ids=False, show_progress=False)[0]
        q = [t for t in q if self._index is not None and t and t in self._index.vocab_dict]
        if not q:
            return np.zeros((len(self.entries),), np.float32)
        return np.asarray(self._index.get_scores(q), np.float32)

    def retrieve(self, query: str) -> list[Entry]:
        """The top-k entries with a score above 0, best first (ties: the newer first)."""
        s = self.scores(query)
        order = sorted((i for i in range(len(self.entries)) if s[i] > 0), key=lambda i: (-s[i], -i))
        return [self.entries[i] for i in order[:self.config.topk]]

    def render(self, entries: Sequence[Entry]) -> tuple[str, list[Entry]]:
        """(the prompt prefix, the entries it holds): a header, then "[i] " + each entry's
        block in order, while they fit in max_chars; the first that does not fit is cut
        (ending "...") when at least MIN_ROOM characters remain, and the rest are left out."""
        if not entries:
            return "", []
        header, budget = HEADERS[self.policy], self.config.max_chars
        text, used = header, []
        for i, e in enumerate(entries, 1):
            block = f"[{i}] {e.block()}\n"
            room = budget - len(text)
            if len(block) <= room:
                text += block
                used.append(e)
                continue
            if room >= MIN_ROOM:
                text += block[:room - 4] + "...\n"
                used.append(e)
            break
        return (text, used) if used else ("", [])

    def prefix(self, query: str) -> tuple[str, dict]:
        """(the text to put before a task's prompt, its telemetry); query: the task's text
        (`task_text`). Runs the forgetting first; the entries put into the prompt are
        recalled (strength + 1, age reset; only memorybank forgets)."""
        gone = self.forget()
        text, used = self.render(self.retrieve(query))
        for e in used:
            e.strength, e.time = e.strength + 1, self.clock
        return text, {"memory_entries": len(self.entries), "memory_retrieved": len(used),
                      "memory_chars": len(text), "memory_sources": [e.uid for e in used],
                      "memory_forgotten": gone}


_STEMMER = []


def _stemmer():
    """The English stemmer `BM25Retriever` uses (loaded once)."""
    if not _STEMMER:
        from activemem_jax.data.retrieval import BM25Retriever

        _STEMMER.append(BM25Retriever._make_stemmer(True))
    return _STEMMER[0]


class _Prefixed:
    """An environment whose reset puts the store's retrieved text before each task's
    prompt (the query: the task's text, else its prompt), keeping each task's query and
    telemetry; everything else is the wrapped environment's."""

    def __init__(self, env, memory: TextMemory):
        self._env, self._memory = env, memory
        self.queries: list = []
        self.telemetry: list = []

    def reset(self, tasks):
        prompts = self._env.reset(tasks)
        self.queries = [task_text(t) or p for t, p in zip(tasks, prompts)]
        found = [self._memory.prefix(q) for q in self.queries]
        self.telemetry = [tel for _, tel in found]
        return [text + p for (text, _), p in zip(found, prompts)]

    def __getattr__(self, name):
        return getattr(self._env, name)


def rollout_with_memory(memory: TextMemory, policy, make_env: Callable[[], object], tasks: Sequence[dict], *,
                        uids: Optional[Sequence[int]] = None, **rollout_kwargs) -> list:
    """The tasks' trajectories, rolled out `memory.config.batch` at a time in order: each
    batch's prompts get their retrieved prefix from the store as the earlier batches left
    it, then its episodes are recorded. Each trajectory's info gets the telemetry
    (`TELEMETRY`, "memory_sources": the uids of the entries in its prompt). uids: each
    task's sampling uid (default its position), so a task draws the same seeds as in one
    batch. make_env(): a fresh environment per batch."""
    uids = list(range(len(tasks))) if uids is None else list(uids)
    out = []
    b = memory.config.batch
    for i in range(0, len(tasks), b):
        part = list(tasks[i:i + b])
        env = _Prefixed(make_env(), memory)
        result = policy.rollout(env, part, uids=uids[i:i + b], **rollout_kwargs)
        for traj, tel, q in zip(result.trajectories, env.telemetry, env.queries):
            stored = memory.record_trajectory(traj, q)
            traj.info.update(tel, memory_stored=int(stored))
            out.append(traj)
    return out


def summary(rows: Sequence[dict]) -> dict:
    """The telemetry's means over rows that carry it (entries in the store, retrieved,
    characters added), the episodes stored and the entries forgotten; {} for other rows."""
    rs = [r for r in rows if "memory_retrieved" in r]
    if not rs:
        return {}
    n = len(rs)
    return {"memory_entries": sum(r["memory_entries"] for r in rs) / n,
            "memory_retrieved": sum(r["memory_retrieved"] for r in rs) / n,
            "memory_chars": sum(r["memory_chars"] for r in rs) / n,
            "memory_stored": sum(r["memory_stored"] for r in rs),
            "memory_forgotten": sum(r["memory_forgotten"] for r in rs)}


__all__ = ["Entry", "POLICIES", "eval_fields", "TELEMETRY", "TextMemory", "TextMemoryConfig", "rollout_with_memory", "summary",
           "summarize_turns", "task_text"]
