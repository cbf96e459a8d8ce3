"""Incremental detokenization with stop strings: constant host work per generated token.

Re-decoding the whole response on every token costs O(length) per token, O(length^2)
per response, on the engine thread between decode steps. `TextStream` decodes only a
short window instead: the tokens whose text was last emitted (context, so that spaces
and merges come out as in a full decode) plus the new ones. Text is emitted only once it
is complete: a window whose decode ends in U+FFFD (bytes of a character still to come) or
adds nothing (a special token skipped) waits for the next token, up to `MAX_PENDING`
tokens, after which the replacement characters are emitted as a full decode would show
them. Stop strings are matched across token boundaries on the text not yet sent, and the
last `len(stop) - 1` characters are held back while they could still begin one.

    stream = TextStream(tokenizer, stop=("\\n\\n",))
    for token in tokens:
        piece, stopped = stream.push(token)   # piece: text safe to send now
        if stopped: break
    text = stream.finish()                    # the response's text (truncated at a stop)
"""

from __future__ import annotations

from typing import Sequence

MAX_PENDING = 8  # tokens a window may wait for a complete character before it is emitted anyway
REPLACEMENT = "\ufffd"


class TextStream:
    def __init__(self, tokenizer, stop: Sequence[str] = (), skip_special_tokens: bool = True):
        self._decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
        self._ids: list[int] = []
        self._prefix = 0  # window start: tokens [prefix, read) are context whose text is out
        self._read = 0  # tokens [0, read) have had their text emitted
        self._prefix_text = ""  # decode(ids[prefix:read])
        self._stops = tuple(stop)
        self._hold = max((len(s) - 1 for s in self._stops), default=0)
        self._sent: list[str] = []  # text already handed out, in pieces
        self._unsent = ""  # text held back (a stop string may be starting); at most `hold` chars
        self.stopped = False

    def push(self, token: int) -> tuple[str, bool]:
        """Add a generated token. Returns (text now safe to send, whether a stop string
        ended the response; the text then stops just before it)."""
        if self.stopped:
            raise RuntimeError("the response already ended at a stop string")
        self._ids.append(token)
        return self._take(self._new_text(force=len(self._ids) - self._read >= MAX_PENDING))

    def finish(self) -> str:
        """The response's whole text: any pending tokens decoded as they are (incomplete
        characters as U+FFFD), and the held-back tail, unless a stop string ended it."""
        if not self.stopped and self._read < len(self._ids):
            self._take(self._new_text(force=True))
        if not self.stopped:
            self._sent.append(self._unsent)
            self._unsent = ""
        return "".join(self._sent)

    def rest(self) -> str:
        """What finish() adds to the pieces push() already returned."""
        before = sum(map(len, self._sent))
        return self.finish()[before:]

    def _new_text(self, force: bool) -> str:
        window = self._decode(self._ids[self._prefix:])
        if not force and (len(window) <= len(self._prefix_text) or window.endswith(REPLACEMENT)):
            return ""  # nothing complete yet
        new = window[len(self._prefix_text):]
        self._prefix, self._read = self._read, len(self._ids)
        self._prefix_text = self._decode(self._ids[self._prefix:self._read])
        return new

    def _take(self, new: str) -> tuple[str, bool]:
        buf = self._unsent + new
        hits = [at for at in (buf.find(s) for s in self._stops) if at >= 0]
        if hits:
            self.stopped = True
            piece, self._unsent = buf[:min(hits)], ""
            self._sent.append(piece)
            return piece, True
        safe = max(len(buf) - self._hold, 0)
        piece, self._unsent = buf[:safe], buf[safe:]
        self._sent.append(piece)
        return piece, False


__all__ = ["MAX_PENDING", "TextStream"]
