"""Executor tools, called as JSON tool calls (never by running model-written code).

Each tool declares its inputs; arguments are validated before the call. Tools return
text; raw text is distilled (`hymem.distill`) before the executor model sees it and
never leaves the executor.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import re
from typing import Callable, Optional, Sequence


class ToolError(RuntimeError):
    """A tool call that cannot be carried out (bad path, missing document, ...)."""


@dataclasses.dataclass
class Tool:
    name: str
    description: str
    inputs: dict[str, str]  # argument -> description (all strings)
    fn: Callable[..., str]

    def validate(self, args: dict) -> Optional[str]:
        missing = [k for k in self.inputs if k not in args]
        extra = [k for k in args if k not in self.inputs]
        wrong = [k for k in self.inputs if k in args and not isinstance(args[k], str)]
        problems = []
        if missing:
            problems.append(f"missing argument(s) {missing}")
        if extra:
            problems.append(f"unknown argument(s) {extra}")
        if wrong:
            problems.append(f"argument(s) {wrong} must be strings")
        return "; ".join(problems) or None

    def signature(self) -> str:
        args = ", ".join(self.inputs)
        return f"- {self.name}({args}): {self.description}"


class Toolbox:
    def __init__(self, tools: Sequence[Tool]):
        self.tools = {t.name: t for t in tools}

    def describe(self) -> str:
        return "\n".join(t.signature() for t in self.tools.values())

    def call(self, name: str, args: dict) -> tuple[bool, str]:
        """(ok, text): unknown tools, bad arguments and tool failures give ok=False."""
        tool = self.tools.get(name)
        if tool is None:
            return False, f"unknown tool {name!r}; available: {sorted(self.tools)}"
        problem = tool.validate(args)
        if problem:
            return False, f"{name}: {problem}"
        try:
            return True, tool.fn(**args)
        except ToolError as e:
            return False, f"{name}: {e}"
        except Exception as e:  # a tool bug must not end the run
            return False, f"{name} failed: {type(e).__name__}: {e}"


def _format_hits(hits, snippet: int) -> str:
    if not hits:
        return "No results."
    return "\n".join(f"[{h['docid']}] {h['title']}: {h['text'][:snippet]}" for h in hits)


def search_tools(retriever, documents: Optional[Sequence[dict]] = None,
                 extract: Optional[Callable[[str, str], str]] = None, k: int = 5) -> list[Tool]:
    """web_search, batch_search_and_filter and web_parse over a local corpus.
    `retriever` has `search(query, k)`; `documents` is the document store for web_parse
    (docid or doc://docid links); `extract(query, text)` is the LLM extraction (else the
    most query-relevant sentences are returned)."""
    store = {str(d["docid"]): d for d in (documents or getattr(retriever, "documents", []))}

    def web_search(keywords: str) -> str:
        return _format_hits(retriever.search(keywords, k), 300)

    def batch_search_and_filter(keyword: str) -> str:
        terms = [t for t in re.findall(r"\w+", keyword.lower()) if len(t) > 2]
        queries = [keyword] + ([" ".join(terms[:3])] if len(terms) > 3 else [])
        seen, hits = set(), []
        for q in queries:
            for h in retriever.search(q, 2 * k):
                if h["docid"] in seen:
                    continue
                seen.add(h["docid"])
                text = f"{h['title']} {h['text']}".lower()
                if not terms or sum(t in text for t in terms) >= max(1, len(terms) // 2):
                    hits.append(h)
        return _format_hits(hits[:k], 600)

    def web_parse(link: str, query: str) -> str:
        docid = link.split("://", 1)[-1].strip().strip("/")
        doc = store.get(docid) or store.get(link)
        if doc is None:
            raise ToolError(f"no document {link!r} in the local store (use a docid from a search)")
        if extract is not None:
            return extract(query, f"{doc['title']}\n{doc['text']}")
        terms = set(re.findall(r"\w+", query.lower()))
        sentences = re.split(r"(?<=[.!?])\s+", doc["text"])
        ranked = sorted(sentences, key=lambda s: -len(terms & set(re.findall(r"\w+", s.lower()))))
        return f"{doc['title']} ({doc['docid']}): " + " ".join(ranked[:5])

    return [
        Tool("web_search", "Keyword search over the corpus; returns docids, titles, snippets.",
             {"keywords": "search keywords"}, web_search),
        Tool("batch_search_and_filter", "Several related searches; keeps results matching the keyword.",
             {"keyword": "keyword or phrase"}, batch_search_and_filter),
        Tool("web_parse", "Read one document (docid or link) and extract what answers the query.",
             {"link": "docid or doc://docid", "query": "what to extract"}, web_parse),
    ]


def file_tool(paths: Sequence[str], max_chars: int = 20000) -> Tool:
    """parse_file for PDF, CSV, XLSX, DOCX, TXT, HTML, confined to `paths`: files (read by
    their path or their bare name) or directories (anything beneath). A benchmark passes
    the task's attachment files only (docs/design_hymem.md#benchmark-hygiene), never the
    benchmark directory, whose metadata holds the gold answers. The tool's description
    names the readable files."""
    real = [os.path.realpath(p) for p in paths]
    files = [r for r in real if os.path.isfile(r)]
    dirs = [r for r in real if os.path.isdir(r)]
    by_name = {os.path.basename(f): f for f in files}

    def resolve(file_path: str) -> str:
        if not files and not dirs:
            raise ToolError("no files are provided for this task")
        if file_path in by_name:
            return by_name[file_path]
        if os.path.isabs(file_path) or not dirs:
            return os.path.realpath(file_path)
        return os.path.realpath(os.path.join(dirs[0], file_path))

    def parse_file(file_path: str) -> str:
        path = resolve(file_path)
        if not (path in files or any(path.startswith(d + os.sep) for d in dirs)):
            raise ToolError(f"{file_path!r} is outside the readable directories"
                            + (f"; the provided files are {sorted(by_name)}" if by_name else ""))
        if not os.path.isfile(path):
            raise ToolError(f"{file_path!r} does not exist")
        return read_file(path)[:max_chars]

    provided = f" Provided files: {', '.join(sorted(by_name))}." if by_name else ""
    return Tool("parse_file", "Extract the text of a file (PDF, CSV, XLSX, DOCX, TXT, HTML)." + provided,
                {"file_path": "path of a provided file"}, parse_file)


def clip_arguments(arguments: dict, max_chars: int = 500) -> dict:
    """Tool arguments as traced: at most 20 keys, keys and string values clipped."""
    return {str(k)[:100]: (v[:max_chars] if isinstance(v, str) else v) for k, v in list(arguments.items())[:20]}


def task_toolbox(task: dict, search: Sequence = ()) -> "Toolbox":
    """HyMem's tools for one task of a task family: the shared search tools, and
    parse_file over the task's own attachment files only (docs/design_hymem.md#benchmark-hygiene)."""
    files = list(task.get("files") or [])
    return Toolbox(list(search) + ([file_tool(files)] if files else []))


def read_file(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext == ".pdf":
        from pypdf import PdfReader

        return "\n".join(page.extract_text() or "" for page in PdfReader(path).pages)
    if ext == ".docx":
        import docx

        return "\n".join(p.text for p in docx.Document(path).paragraphs)
    if ext in (".xlsx", ".xlsm"):
        import openpyxl

        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
        lines = []
        for sheet in book.worksheets:
            lines.append(f"# sheet {sheet.title}")
            for row in sheet.iter_rows(values_only=True):
                lines.append("\t".join("" if v is None else str(v) for v in row))
        return "\n".join(lines)
    if ext == ".csv":
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            return "\n".join("\t".join(row) for row in csv.reader(f))
    if ext in (".html", ".htm"):
        from bs4 import BeautifulSoup

        with open(path, encoding="utf-8", errors="replace") as f:
            soup = BeautifulSoup(f.read(), "html.parser")
        for tag in soup(["script", "style", "nav", "header", "footer"]):
            tag.decompose()
        return re.sub(r"\n\s*\n+", "\n", soup.get_text("\n"))
    if ext in (".txt", ".md", ".json", ".jsonl", ""):
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    raise ToolError(f"unsupported file type {ext!r} (PDF, CSV, XLSX, DOCX, TXT, HTML)")

