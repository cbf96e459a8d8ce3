"""phi: distill a raw tool observation before the executor model sees it again.

Strips navigation/boilerplate lines, duplicates, markup and tool-error noise; keeps
sentences with entities, dates, numbers, sources, evidence and answer candidates."""

from __future__ import annotations

import re

_BOILERPLATE = re.compile(r"^(home|menu|login|log in|sign up|subscribe|cookie|privacy policy|terms|"
                          r"share|skip to|navigation|advertisement|all rights reserved|copyright)\b", re.I)
_ERROR = re.compile(r"(traceback|exception|error:|errno|stack trace|http \d{3})", re.I)
_INFORMATIVE = re.compile(r"(\d|[A-Z][a-z]+|doc|source|title|http)")


def distill(raw: str, max_chars: int = 4000) -> str:
    text = re.sub(r"<[^>]{1,200}>", " ", str(raw))  # markup
    text = re.sub(r"[ \t]+", " ", text)
    seen, kept = set(), []
    for line in text.splitlines():
        line = line.strip(" -*•|#")
        if not line or _BOILERPLATE.match(line) or _ERROR.search(line):
            continue
        for sentence in re.split(r"(?<=[.!?])\s+", line):
            key = sentence.lower().strip()
            if len(key) < 3 or key in seen or not _INFORMATIVE.search(sentence):
                continue
            seen.add(key)
            kept.append(sentence.strip())
    out = "\n".join(kept)
    return out[:max_chars]
