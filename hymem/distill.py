"""phi: distill a raw tool observation before the executor model sees it (paper Eq. 8,
o' = phi(o | d), docs/design_hymem.md#distillation).

Two stages. `rule_filter(o)`, the pre-filter, strips markup, navigation and boilerplate
lines, duplicates and tool noise (tracebacks, bare status lines) and keeps lines with
entities, dates, numbers and sources. `Distiller(aux)` then asks the auxiliary model
(paper A.2; config `aux`, by default the main endpoint) to keep, from what is left, only
what serves the directive d: entities, dates, numbers, sources, evidence snippets and
answer candidates. When the auxiliary call fails, or returns nothing usable, the rule
filter's text is what the executor sees (the fallback).
"""

from __future__ import annotations

import re
from typing import Optional

from hymem.llm import traced_complete

_BOILERPLATE = re.compile(r"^(home|menu|login|log in|sign up|subscribe|cookie|privacy policy|terms|"
                          r"share|skip to|navigation|advertisement|all rights reserved|copyright)\b", re.I)
# tool noise, not content: a traceback and its frames, an exception line as a program
# prints it, an HTTP status line standing alone ("HTTP/1.1 404 Not Found", "503 Service
# Unavailable"). A sentence that merely mentions an error or an HTTP code is kept.
_NOISE = re.compile(r"^(traceback \(most recent call last\):?|file \".*\", line \d+.*|"
                    r"(http/\d(\.\d)? )?[1-5]\d\d( [a-z-]+){0,4}|\[?errno \d+\]?.*|stack trace:?)$", re.I)
_EXCEPTION = re.compile(r"^(\w+\.)*[A-Z][A-Za-z]*(Error|Exception)(: .*)?$")  # "ValueError: ...", not "Error: 5%"
_INFORMATIVE = re.compile(r"(\d|[A-Z][a-z]+|doc|source|title|http)")
NOTHING = "No content relevant to the search target."

DISTILL_SYSTEM = ("You distill tool observations for a search agent. From the observation, keep only what "
                  "serves the search target: entities, dates, numbers, sources (URLs, doc ids, titles), "
                  "evidence snippets quoted exactly, and candidate answers. Drop navigation, boilerplate, "
                  "repetition and anything unrelated. Output the kept facts as short lines, nothing else; "
                  "if nothing in the observation serves the target, output NONE.")


def rule_filter(raw: str, max_chars: int = 4000) -> str:
    """The rule-based phi: the pre-filter and the fallback."""
    text = re.sub(r"<[^>]{1,200}>", " ", str(raw))  # markup
    text = re.sub(r"[ \t]+", " ", text)
    seen, kept = set(), []
    for line in text.splitlines():
        line = line.strip(" -*•|#")
        if not line or _BOILERPLATE.match(line) or _NOISE.match(line) or _EXCEPTION.match(line):
            continue
        for sentence in re.split(r"(?<=[.!?])\s+", line):
            key = sentence.lower().strip()
            if len(key) < 3 or key in seen or not _INFORMATIVE.search(sentence):
                continue
            seen.add(key)
            kept.append(sentence.strip())
    return "\n".join(kept)[:max_chars]


distill = rule_filter  # the name the first version had


class Distiller:
    """phi(o | d): the rule pre-filter, then the auxiliary model conditioned on the
    directive. `aux` None: the rule filter alone."""

    def __init__(self, aux=None, max_chars: int = 4000, sampling: Optional[dict] = None):
        self.aux, self.max_chars = aux, max_chars
        self.sampling = {"temperature": 0.0, "max_tokens": 512, **(sampling or {})}

    def __call__(self, raw: str, directive: str, usage: dict, trace: list) -> str:
        pre = rule_filter(raw, self.max_chars)
        if self.aux is None or not pre:
            return pre
        messages = [{"role": "system", "content": DISTILL_SYSTEM},
                    {"role": "user", "content": f"Search target: {directive}\n\nObservation:\n{pre}"}]
        text = traced_complete(self.aux, messages, "distill", self.sampling, usage, trace).text.strip()
        if text.upper().strip(" .") == "NONE":
            return NOTHING
        if not text:  # the call failed or said nothing: the rule filter's text stands
            trace.append({"type": "distill_fallback", "chars": len(pre)})
            return pre
        return text[:self.max_chars]


__all__ = ["DISTILL_SYSTEM", "Distiller", "NOTHING", "distill", "rule_filter"]
