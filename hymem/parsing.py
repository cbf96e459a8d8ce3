"""Parsers for the model's actions. They never raise on any input: a malformed output
becomes kind "invalid" with a reason. Every scan is linear in the text (tags are found
with str.find, JSON spans by one brace pass), so a 1 MB reply of unclosed tags or braces
costs milliseconds, and JSON nested past the interpreter's recursion limit is rejected,
not raised."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Optional


def as_text(text) -> str:
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "replace")
    try:
        return str(text)
    except Exception:  # a hostile __str__
        return ""


def _spans(tag: str, text: str) -> list[tuple[int, int]]:
    """(start, end) of each <tag>...</tag> body, leftmost-shortest like re's `.*?`."""
    open_, close = f"<{tag}>", f"</{tag}>"
    spans, i = [], 0
    while True:
        s = text.find(open_, i)
        if s < 0:
            return spans
        e = text.find(close, s + len(open_))
        if e < 0:  # no close after this open: none after any later open either
            return spans
        spans.append((s + len(open_), e))
        i = e + len(close)


def _all(tag: str, text: str) -> list[str]:
    return [text[s:e].strip() for s, e in _spans(tag, text)]


def _strip_think(text: str) -> str:
    """The text without <think>...</think> blocks (tags inside reasoning do not count)."""
    out, last = [], 0
    for s, e in _spans("think", text):
        out.append(text[last:s - len("<think>")])
        out.append(" ")
        last = e + len("</think>")
    out.append(text[last:])
    return "".join(out)


def loads(text: str) -> Any:
    """json.loads that raises only ValueError (deep nesting, bad numbers, ...)."""
    try:
        return json.loads(text)
    except ValueError:
        raise
    except (RecursionError, MemoryError, OverflowError, TypeError) as e:
        raise ValueError(f"unreadable JSON ({type(e).__name__})") from None


@dataclasses.dataclass
class PlannerAction:
    kind: str  # task | iso | fold | answer | invalid
    content: str = ""
    description: str = ""
    confidence: Optional[float] = None
    reason: str = ""


def parse_confidence(text: str) -> Optional[float]:
    m = re.search(r"[-+]?\d*\.?\d+", as_text(text or "")[:1000])
    if not m:
        return None
    try:
        return min(1.0, max(0.0, float(m.group(0))))
    except ValueError:
        return None


def parse_planner(text: str) -> PlannerAction:
    body = _strip_think(as_text(text))
    tasks, isos, answers = _all("task", body), _all("isoReason", body), _all("answer", body)
    fold = "<to_memory>" in body or "<to_memory/>" in body
    n = len(tasks) + len(isos) + len(answers) + int(fold)
    if n != 1:
        return PlannerAction("invalid", reason="no action" if n == 0 else "more than one action")
    if tasks:
        return (PlannerAction("task", tasks[0]) if tasks[0] else
                PlannerAction("invalid", reason="empty task"))
    if isos:
        desc, prompt = _all("description", isos[0]), _all("prompt", isos[0])
        if not prompt or not prompt[0]:
            return PlannerAction("invalid", reason="isoReason without <prompt>")
        return PlannerAction("iso", prompt[0], description=desc[0] if desc else "")
    if fold:
        return PlannerAction("fold")
    conf = _all("confidence", body)
    return PlannerAction("answer", answers[0], confidence=parse_confidence(conf[0]) if conf else None)


@dataclasses.dataclass
class ExecutorAction:
    kind: str  # tool | results | invalid
    name: str = ""
    arguments: dict = dataclasses.field(default_factory=dict)
    results: str = ""
    reason: str = ""


def parse_executor(text: str) -> ExecutorAction:
    body = _strip_think(as_text(text))
    calls, results = _all("tool_call", body), _all("results", body)
    if len(calls) + len(results) != 1:
        return ExecutorAction("invalid", reason="expected exactly one <tool_call> or <results>")
    if results:
        return ExecutorAction("results", results=results[0])
    try:
        call = loads(calls[0])
    except ValueError as e:
        return ExecutorAction("invalid", reason=f"tool call is not JSON ({str(e)[:200]})")
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return ExecutorAction("invalid", reason='tool call needs {"name": ..., "arguments": {...}}')
    args = call.get("arguments", {})
    if not isinstance(args, dict):
        return ExecutorAction("invalid", reason="arguments must be a JSON object")
    if not all(isinstance(v, (str, int, float, bool)) or v is None for v in args.values()):
        return ExecutorAction("invalid", reason="argument values must be strings")
    return ExecutorAction("tool", name=call["name"], arguments=args)


_FIELDS = ("FINDINGS", "EVIDENCE", "SOURCES", "STATUS", "GAPS")


def labeled_fields(text: str, labels) -> dict[str, str]:
    """'LABEL: value' sections (a value runs to the next label)."""
    pattern = "|".join(re.escape(l) for l in labels)
    parts = re.split(rf"(?:^|\s)({pattern}):", text)
    out = {}
    for label, value in zip(parts[1::2], parts[2::2]):
        out[label] = value.strip()
    return out


def parse_results(text: str) -> dict[str, Any]:
    """Executor <results> as typed fields; unlabeled text is all findings."""
    text = as_text(text)
    fields = labeled_fields(text, _FIELDS)
    if not fields:
        fields = {"FINDINGS": text.strip()}
    status = fields.get("STATUS", "").lower()
    status = next((s for s in ("success", "partial", "failed") if s in status), "partial")
    return {"findings": fields.get("FINDINGS", ""), "evidence": fields.get("EVIDENCE", ""),
            "sources": fields.get("SOURCES", ""), "status": status, "gaps": fields.get("GAPS", "")}


def parse_iso(text: str):
    """('task', directive) | ('return', fields) | ('invalid', reason)."""
    body = _strip_think(as_text(text))
    tasks, returns = _all("task", body), _all("return", body)
    if len(tasks) + len(returns) != 1:
        return "invalid", "expected exactly one <task> or <return>"
    if tasks:
        return "task", tasks[0]
    f = labeled_fields(returns[0], ("CONCLUSION", "KEY EVIDENCE", "CONFIDENCE", "NOTES"))
    return "return", {"conclusion": f.get("CONCLUSION", returns[0].strip()),
                      "key_evidence": f.get("KEY EVIDENCE", ""),
                      "confidence": parse_confidence(f.get("CONFIDENCE", "")) or 0.0,
                      "notes": f.get("NOTES", "")}


_JSON_SPECIAL = re.compile(r'[{}"\\]')


def extract_json(text: str, max_attempts: int = 64) -> Optional[Any]:
    """The first JSON object in a text (fenced or bare), or None. One pass over the text:
    each balanced {...} span (braces inside JSON strings ignored) is tried once; a span
    that does not load is skipped whole."""
    text = as_text(text)
    start = text.find("{")
    attempts = 0
    while start >= 0 and attempts < max_attempts:
        depth, in_string, escaped_at, end = 0, False, -1, -1
        for m in _JSON_SPECIAL.finditer(text, start):
            i, c = m.start(), m.group()
            if i == escaped_at:
                continue
            if in_string:
                if c == "\\":
                    escaped_at = i + 1
                elif c == '"':
                    in_string = False
            elif c == '"':
                in_string = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    end = i
                    break
        if end < 0:
            return None  # unbalanced to the end of the text
        attempts += 1
        try:
            value = loads(text[start:end + 1])
            if isinstance(value, dict):
                return value
        except ValueError:
            pass
        start = text.find("{", end + 1)
    return None


def tagged(tag: str, text) -> list[str]:
    """The bodies of every <tag>...</tag> outside <think> blocks."""
    return _all(tag, _strip_think(as_text(text)))


def parse_answer(text) -> Optional[tuple[str, Optional[float]]]:
    """(answer, confidence) of a reply with <answer>...</answer> outside <think>, else None."""
    answers = tagged("answer", text)
    if not answers:
        return None
    confidence = tagged("confidence", text)
    return answers[0], parse_confidence(confidence[0]) if confidence else None
