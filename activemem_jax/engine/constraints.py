"""Constrained decoding: a request's JSON schema, regex, choice list or Lark grammar as a
token mask the jitted sampler applies (`sampling.apply_mask`).

`Constraint` is what a request carries (in `SamplingParams.constraint`); `Constraints`
(one per engine) compiles it with llguidance against the engine's tokenizer, checks it,
and starts a `Matcher` per request. The matcher lives on the host: after each sampled
token it advances and fills the slot's next mask, a packed bitmask int32 [ceil(V/32)]
(bit t of word t // 32 set = token t allowed), which the next jitted step takes as an
argument, so no request ever changes a compiled shape. See docs/engine.md#structured-output.

Bad input is a ValueError before anything reaches a slot, in bounded time: a spec too
large (`MAX_SPEC_CHARS`, `MAX_CHOICES`), a schema no value satisfies, an invalid regex or
grammar, or one whose first token the vocabulary cannot spell. llguidance's own limits
(`LIMITS`: lexer fuel per step, lexer states, grammar size) bound every compile and every
mask; a constraint that runs into them while decoding (an automaton that explodes on the
text actually generated) finishes that request with an error, never the engine.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import threading
from typing import Any, Optional, Sequence

import numpy as np

MAX_SPEC_CHARS = 64 * 1024  # a schema's JSON text, a regex or a grammar
MAX_CHOICES = 1024
CACHE = 64  # compiled constraints kept per engine (a template matcher each, copied per request)
LIMITS = dict(max_items_in_row=2000, initial_lexer_fuel=1_000_000, step_lexer_fuel=200_000,
              step_max_items=50_000, max_lexer_states=50_000, max_grammar_size=200_000)
JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
KINDS = ("json", "regex", "choice", "grammar")
FAILED = "the constraint failed: "  # how every error met while decoding under a constraint begins


@dataclasses.dataclass(frozen=True)
class Constraint:
    """kind "json" (spec: the schema's JSON text), "regex", "choice" (spec: the options as
    a JSON list) or "grammar" (Lark, llguidance's dialect, or GBNF: one with "::="). strict (json only): False lets
    keywords the compiler does not implement pass unenforced (OpenAI's non-strict mode);
    True refuses them. Build with the class methods."""
    kind: str
    spec: str
    strict: bool = True

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"constraint kind {self.kind!r}: use one of {', '.join(KINDS)}")
        if not isinstance(self.spec, str):
            raise ValueError(f"a {self.kind} constraint's spec must be a string")
        if len(self.spec) > MAX_SPEC_CHARS:
            raise ValueError(f"the {self.kind} constraint is too large: {len(self.spec)} characters "
                             f"(at most {MAX_SPEC_CHARS})")

    @classmethod
    def json_schema(cls, schema: Any, strict: bool = True) -> "Constraint":
        """schema: a dict (or bool) or its JSON text."""
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError as e:
                raise ValueError(f"the JSON schema is not valid JSON: {e}") from None
        if not isinstance(schema, (dict, bool)):
            raise ValueError(f"a JSON schema must be an object or a boolean (got {type(schema).__name__})")
        try:
            text = json.dumps(schema)
        except (TypeError, ValueError, RecursionError) as e:
            raise ValueError(f"the JSON schema cannot be written as JSON: {e}") from None
        return cls("json", text, bool(strict))

    @classmethod
    def json_object(cls) -> "Constraint":
        """Any JSON object (OpenAI's response_format json_object)."""
        return cls.json_schema({"type": "object"})

    @classmethod
    def regex(cls, pattern: str) -> "Constraint":
        if not isinstance(pattern, str) or not pattern:
            raise ValueError("a regex constraint needs a non-empty pattern")
        return cls("regex", pattern)

    @classmethod
    def choice(cls, options: Sequence[str]) -> "Constraint":
        options = list(options) if not isinstance(options, str) else None
        if not options or not all(isinstance(o, str) for o in options):
            raise ValueError("a choice constraint needs a non-empty list of strings")
        if len(options) > MAX_CHOICES:
            raise ValueError(f"a choice constraint takes at most {MAX_CHOICES} options (got {len(options)})")
        return cls("choice", json.dumps(options))

    @classmethod
    def grammar(cls, lark: str) -> "Constraint":
        if not isinstance(lark, str) or not lark.strip():
            raise ValueError("a grammar constraint needs a non-empty Lark grammar")
        return cls("grammar", lark)

    def grammar_text(self) -> str:
        """llguidance's grammar for this constraint."""
        from llguidance import LLMatcher

        if self.kind == "json":
            overrides = None if self.strict else {"lenient": True}
            return LLMatcher.grammar_from_json_schema(self.spec, defaults=JSON_OPTIONS, overrides=overrides)
        if self.kind == "regex":
            return LLMatcher.grammar_from_regex(self.spec)
        if self.kind == "choice":  # Lark string literals take JSON escapes
            return LLMatcher.grammar_from_lark("start: " + " | ".join(json.dumps(o) for o in json.loads(self.spec)))
        if "::=" in self.spec:  # GBNF (llama.cpp's, as vLLM's guided_grammar often is): to Lark
            from llguidance.gbnf_to_lark import gbnf_to_lark

            return LLMatcher.grammar_from_lark(gbnf_to_lark(self.spec))
        return LLMatcher.grammar_from_lark(self.spec)


def _short(message: str) -> str:
    """llguidance's error without the parser-state dump it appends."""
    head = message.split("\n<state>")[0].strip()
    if head.startswith("NoExtension"):
        return "no string satisfies it, or this model's vocabulary cannot spell what it requires next"
    return head[:2000]


class Matcher:
    """One request's automaton: `mask` is the packed next-token mask; `advance(token)`
    consumes a sampled token and fills the next mask. EOS is allowed only where the
    constraint is complete (never with ignore_eos, unless nothing else is)."""

    def __init__(self, matcher, eos_mask: np.ndarray, ignore_eos: bool):
        self._m, self._eos, self._ignore_eos = matcher, eos_mask, ignore_eos
        self.mask = np.zeros(eos_mask.shape, np.int32)

    def _fill(self) -> Optional[str]:
        """Next mask; returns "done" (only EOS may follow: the mask allows just EOS), an
        error message (the mask is then meaningless), or None."""
        from llguidance.numpy import fill_next_token_bitmask

        if self._m.is_stopped() and not self._m.is_error():
            self.mask[:] = self._eos
            return "done"
        fill_next_token_bitmask(self._m, self.mask[None], 0)
        if self._m.is_error():
            return FAILED + _short(self._m.get_error())
        eos = self.mask & self._eos
        self.mask &= ~self._eos
        if not self.mask.any():  # only EOS (or nothing) may follow
            self.mask[:] = self._eos
            if eos.any() or self._m.is_accepting():
                return "done"
            return FAILED + "this model's vocabulary cannot spell what it requires next"
        if not self._ignore_eos:
            self.mask |= eos
        return None

    def start(self) -> Optional[str]:
        return self._fill()

    def advance(self, token: int) -> Optional[str]:
        """After `token` was sampled: None (go on), "done" (the constraint is complete), or
        an error message (the request cannot go on)."""
        if not self._m.consume_token(int(token)):
            return FAILED + _short(self._m.get_error())
        return self._fill()


class Constraints:
    """Compiles constraints against one tokenizer (llguidance's view of it is built on the
    first constrained request, about 0.5 s for a 49k vocabulary) and starts matchers."""

    def __init__(self, tokenizer, vocab_size: int, eos_ids: Sequence[int]):
        self._tokenizer, self.vocab_size = tokenizer, vocab_size
        self.eos_ids = sorted(eos_ids)
        self.words = (vocab_size + 31) // 32
        bits = np.zeros((self.words,), np.uint32)
        for t in self.eos_ids:
            bits[t // 32] |= np.uint32(1 << (t % 32))
        self.eos_mask = bits.view(np.int32)
        self._ll = None
        self._lock = threading.Lock()
        self._cache: "collections.OrderedDict[Constraint, Any]" = collections.OrderedDict()

    def _lltokenizer(self):
        if not self.eos_ids:
            raise ValueError("this model has no EOS token: a constrained request could not end")
        if self._ll is None:
            import llguidance
            import llguidance.hf

            try:
                self._ll = llguidance.hf.from_tokenizer(self._tokenizer, n_vocab=self.vocab_size,
                                                        eos_token=self.eos_ids)
            except Exception:  # not a byte-level/sentencepiece fast tokenizer: spell tokens by decoding them
                self._ll = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Spelled(self._tokenizer,
                                                                                        self.vocab_size,
                                                                                        self.eos_ids)),
                                                  n_vocab=self.vocab_size, eos_token=self.eos_ids)
        return self._ll

    def compile(self, constraint: Constraint):
        """The template matcher of `constraint` (cached), or a ValueError saying why not."""
        if not isinstance(constraint, Constraint):
            raise ValueError(f"constraint must be a Constraint (got {type(constraint).__name__})")
        with self._lock:
            hit = self._cache.get(constraint)
            if hit is not None:
                self._cache.move_to_end(constraint)
        if hit is None:
            hit = self._build(constraint)
            with self._lock:
                self._cache[constraint] = hit
                while len(self._cache) > CACHE:
                    self._cache.popitem(last=False)
        if isinstance(hit, str):
            raise ValueError(hit)
        return hit

    def _build(self, constraint: Constraint):
        """A template matcher that has a first token, or the error message (cached too)."""
        import llguidance

        what = f"invalid {constraint.kind} constraint"
        tok = self._lltokenizer()
        try:
            grammar = constraint.grammar_text()
        except Exception as e:
            return f"{what}: {e}"
        m = llguidance.LLMatcher(tok, grammar, log_level=0, limits=llguidance.LLParserLimits(**LIMITS))
        if m.is_error():
            why = _short(m.get_error())
            if constraint.kind == "json" and constraint.strict and why.startswith("Unimplemented"):
                why += " (strict: with strict false such keywords pass unenforced)"
            return f"{what}: {why}"
        for _ in range(2):  # copies share the lexer's states: a first mask that spends them all
            probe = Matcher(m.deep_copy(), self.eos_mask, ignore_eos=False)  # leaves none to the next
            status = probe.start()
            if status not in (None, "done"):
                return f"{what}: {status.removeprefix(FAILED)}"
            if status == "done" and not probe._m.is_accepting():
                return f"{what}: no string satisfies it"
        return m

    def start(self, constraint: Constraint, ignore_eos: bool = False) -> Matcher:
        """A fresh matcher for one request, its first mask filled (ValueError if none)."""
        for _ in range(2):
            matcher = Matcher(self.compile(constraint).deep_copy(), self.eos_mask, ignore_eos)
            status = matcher.start()
            if status in (None, "done"):
                return matcher
            with self._lock:  # earlier requests spent the template's lexer states: build it afresh once
                self._cache.pop(constraint, None)
        raise ValueError(status)


class _Spelled:
    """llguidance's TokenizerWrapper input for a tokenizer it cannot read (e.g. word-level):
    each token's bytes are its decoded text, and text is tokenized greedily (longest token
    first) over those bytes, stopping where no token spells what follows."""

    def __init__(self, tokenizer, vocab_size: int, eos_ids: Sequence[int]):
        n = min(len(tokenizer), vocab_size)
        self.eos_token_id = eos_ids[0] if eos_ids else None
        self.bos_token_id = getattr(tokenizer, "bos_token_id", None)
        self.special_token_ids = sorted(set(getattr(tokenizer, "all_special_ids", [])) | set(eos_ids))
        self.tokens = [tokenizer.decode([i]).encode() if i < n else b"" for i in range(vocab_size)]
        special = set(self.special_token_ids)
        self._ids = {b: i for i, b in reversed(list(enumerate(self.tokens))) if b and i not in special}
        self._longest = max(map(len, self._ids), default=1)

    def __call__(self, text):
        data = text if isinstance(text, bytes) else text.encode()
        out, at = [], 0
        while at < len(data):
            for k in range(min(self._longest, len(data) - at), 0, -1):
                i = self._ids.get(data[at:at + k])
                if i is not None:
                    out.append(i)
                    at += k
                    break
            else:
                break
        return out


__all__ = ["CACHE", "FAILED", "Constraint", "Constraints", "JSON_OPTIONS", "LIMITS", "MAX_CHOICES", "MAX_SPEC_CHARS",
           "Matcher"]
