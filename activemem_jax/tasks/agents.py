"""The agent benchmarks of the HyMem paper: gaia and browsecomp_plus (the synthetic world,
registered in synthetic.py, serves both papers).

ActiveMem runs them as a search agent (envs/search_agent.py: search and open over the
family's search backend, at most 100 tool calls, the answer scored by the family's scorer)
where the family has a search backend: BrowseComp-Plus's `corpus` (BM25) or a
`retrieval_url`; GAIA ships no corpus, so only with `retrieval_url`. Without one,
`make_env` is None and ActiveMem's trainer and evaluator refuse the family.

Benchmark hygiene (docs/design_hymem.md#benchmark-hygiene): a GAIA task's question names its
attachment and `files` is all its parse_file may read (never the benchmark directory and
its metadata). `text_only` filters GAIA as the paper's A.1 does ("text-only instances"):
"no_attachment" keeps tasks without a file, "readable_attachment" also keeps tasks whose
file parse_file can read (PDF, DOCX, XLSX, CSV, HTML, TXT, ...); "" keeps all.
`balance` picks BrowseComp-Plus tasks 1:1:1 by difficulty (A.1's 150 tasks;
`select_balanced`). `bad_rows=skip` drops the bad rows of a GAIA metadata or
BrowseComp-Plus queries file (one summary line per reason) instead of stopping at the
first (strict, the default).
"""

from __future__ import annotations

import os
import random
from typing import Callable

from activemem_jax.tasks._registry import TaskSet, answer_score, register
from activemem_jax.tasks.qa import corpus_search

ATTACHMENT_NOTE = "\n\nThe task comes with an attached file: {name} (read it with parse_file)."
# the attachment types HyMem's parse_file reads (hymem/tools.py; "" is a file with no extension)
READABLE_EXTENSIONS = (".pdf", ".docx", ".xlsx", ".xlsm", ".csv", ".html", ".htm", ".txt", ".md", ".json",
                       ".jsonl", "")


def level(task: dict):
    """The agent benchmarks' grouping: a task's difficulty level (None where unknown)."""
    return task.get("level")


def gaia_score(task: dict, answer: str) -> float:
    from activemem_jax import metrics

    return float(metrics.gaia_score(answer, task["gold"]))


def gaia_keeps(row: dict, text_only: str) -> bool:
    """The A.1 text-only filter (see the module docstring)."""
    if text_only not in ("", "no_attachment", "readable_attachment"):
        raise ValueError(f"data.text_only={text_only!r}: '', no_attachment or readable_attachment")
    path = row.get("file_path")
    if not text_only or not path:
        return True
    return text_only == "readable_attachment" and os.path.splitext(path)[1].lower() in READABLE_EXTENSIONS


def gaia_task(row: dict) -> dict:
    """One GAIA task: the question names its attachment; `files` is all parse_file may read."""
    path = row.get("file_path")
    question = row["question"] + (ATTACHMENT_NOTE.format(name=os.path.basename(path)) if path else "")
    return {"id": row["id"], "question": question, "answers": [[row["answer"]]], "gold": row["answer"],
            "files": [path] if path else [], "level": row.get("level")}


@register("gaia")
def gaia(d, model=None) -> TaskSet:
    """GAIA from the directory `path` (metadata.jsonl or .parquet); the first `n_tasks`
    that `text_only` keeps. No corpus: search only through `retrieval_url`."""
    from activemem_jax.data.loaders import load_gaia

    rows = [r for r in load_gaia(d.path, bad_rows=d.bad_rows)
            if gaia_keeps(r, d.text_only)][: d.n_tasks]
    search = corpus_search(d, ())
    return TaskSet([gaia_task(r) for r in rows], search_agent_env(d, search, (), gaia_score), search,
                   score=gaia_score, group=level)


@register("browsecomp_plus")
def browsecomp_plus(d, model=None) -> TaskSet:
    """BrowseComp-Plus: `queries` (decrypted with `canary` where encrypted) and its
    `corpus`; `n_tasks` picked by `balance` (`select_balanced`). A task keeps the docids of
    its gold and evidence documents (the search agent's expert opens them)."""
    from activemem_jax.data.loaders import load_browsecomp_plus

    data = load_browsecomp_plus(d.queries, d.corpus, canary=d.canary or None, bad_rows=d.bad_rows)
    balance = d.balance
    level_of = levels(data["queries"], balance)
    rows = select_balanced(data["queries"], balance, d.n_tasks, d.seed)
    tasks = [{"id": r["id"], "question": r["question"], "answers": [r["answers"]], "level": level_of(r),
              "gold_docs": docids(r["gold_docs"]), "evidence_docs": docids(r["evidence_docs"])} for r in rows]
    docs = data.get("corpus", [])
    search = corpus_search(d, docs)
    return TaskSet(tasks, search_agent_env(d, search, docs, answer_score), search, documents=docs, group=level)


def docids(entries) -> list[str]:
    """The docids of a BrowseComp-Plus document list (rows {"docid", ...}, or bare ids)."""
    return [str(e["docid"]) if isinstance(e, dict) else str(e) for e in entries or []]


def search_agent_env(d, search, documents, score):
    """A factory of ActiveMem's search-agent environment over `search` (`open` reads
    `documents`, indexed once here), the final answer scored by `score`; None without a
    search backend. data.max_turns bounds its turns (Table 10's protocol: 101 or more, so
    the 100-tool-call cap is what binds)."""
    if search is None:
        return None
    from activemem_jax.envs.search_agent import SearchAgentEnv

    by_docid = {str(doc["docid"]): doc for doc in documents}
    return lambda max_turns=None: SearchAgentEnv(search, score, by_docid, max_turns=max_turns or d.max_turns,
                                                 topk=d.retrieval_topk, format_reward=d.format_reward)


def levels(rows: list, balance: str) -> Callable[[dict], object]:
    """A row's level under `balance` (see `select_balanced`); balance "": its
    `difficulty`, where the file has one."""
    if not balance:
        return lambda r: r.get("difficulty")
    if balance == "evidence_terciles":
        counts = sorted(len(r.get("evidence_docs") or []) for r in rows)
        cuts = [counts[len(counts) // 3], counts[2 * len(counts) // 3]] if counts else [0, 0]
        return lambda r: "easy" if len(r.get("evidence_docs") or []) < cuts[0] else (
            "medium" if len(r.get("evidence_docs") or []) < cuts[1] else "hard")
    missing = [r["id"] for r in rows if r.get(balance) in (None, "")]
    if missing:
        raise ValueError(f"data.balance={balance!r}: {len(missing)} queries have no {balance!r} field "
                         f"(first: {missing[0]}); add it to the queries file, or use balance="
                         f"'evidence_terciles' or ''")
    return lambda r: str(r[balance])


def select_balanced(rows: list, balance: str, n: int, seed: int = 0) -> list:
    """n tasks. balance "": the first n. balance "<field>": n / levels of every level of
    that row field (the paper's A.1: 150 BrowseComp-Plus tasks, easy:medium:hard 1:1:1),
    drawn with `seed`. balance "evidence_terciles": levels by the number of evidence
    documents (terciles; more evidence, harder), for query files that carry no level (the
    paper does not say how its levels were assigned)."""
    if not balance:
        return rows[:n]
    level_of = levels(rows, balance)
    by_level: dict = {}
    for r in rows:
        by_level.setdefault(level_of(r), []).append(r)
    per = n // len(by_level)
    rng = random.Random(seed)
    short = {k: len(v) for k, v in by_level.items() if len(v) < per}
    if short:
        raise ValueError(f"data.balance={balance!r}: {n} tasks need {per} per level; levels {short} "
                         f"have fewer")
    out = []
    for k in sorted(by_level):
        out += rng.sample(by_level[k], per)
    return out
