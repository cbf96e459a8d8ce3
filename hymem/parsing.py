"""Parsers for the model's actions. They never raise on any string: a malformed
output becomes kind "invalid" with a reason."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Optional


def _all(tag: str, text: str) -> list[str]:
    return [m.strip() for m in re.findall(rf"<{tag}>(.*?)</{tag}>", text, re.S)]


@dataclasses.dataclass
class PlannerAction:
    kind: str  # task | iso | fold | answer | invalid
    content: str = ""
    description: str = ""
    confidence: Optional[float] = None
    reason: str = ""


def parse_confidence(text: str) -> Optional[float]:
    m = re.search(r"[-+]?\d*\.?\d+", text or "")
    if not m:
        return None
    try:
        return min(1.0, max(0.0, float(m.group(0))))
    except ValueError:
        return None


def parse_planner(text: str) -> PlannerAction:
    text = text if isinstance(text, str) else str(text)
    body = re.sub(r"<think>.*?</think>", " ", text, flags=re.S)  # tags inside reasoning do not count
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
    text = text if isinstance(text, str) else str(text)
    body = re.sub(r"<think>.*?</think>", " ", text, flags=re.S)
    calls, results = _all("tool_call", body), _all("results", body)
    if len(calls) + len(results) != 1:
        return ExecutorAction("invalid", reason="expected exactly one <tool_call> or <results>")
    if results:
        return ExecutorAction("results", results=results[0])
    try:
        call = json.loads(calls[0])
    except ValueError as e:
        return ExecutorAction("invalid", reason=f"tool call is not JSON ({e})")
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return ExecutorAction("invalid", reason='tool call needs {"name": ..., "arguments": {...}}')
    args = call.get("arguments", {})
    if not isinstance(args, dict):
        return ExecutorAction("invalid", reason="arguments must be a JSON object")
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
    fields = labeled_fields(text, _FIELDS)
    if not fields:
        fields = {"FINDINGS": text.strip()}
    status = fields.get("STATUS", "").lower()
    status = next((s for s in ("success", "partial", "failed") if s in status), "partial")
    return {"findings": fields.get("FINDINGS", ""), "evidence": fields.get("EVIDENCE", ""),
            "sources": fields.get("SOURCES", ""), "status": status, "gaps": fields.get("GAPS", "")}


def parse_iso(text: str):
    """('task', directive) | ('return', fields) | ('invalid', reason)."""
    text = text if isinstance(text, str) else str(text)
    body = re.sub(r"<think>.*?</think>", " ", text, flags=re.S)
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


def extract_json(text: str) -> Optional[Any]:
    """The first JSON object in a text (fenced or bare), or None."""
    text = text if isinstance(text, str) else str(text)
    start = text.find("{")
    while start >= 0:
        depth = 0
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    try:
                        return json.loads(text[start:i + 1])
                    except ValueError:
                        break
        start = text.find("{", start + 1)
    return None
