"""Incremental detokenization against the plain reference: decode everything, find the stop."""

import random

import pytest

from activemem_jax.engine import SamplingParams
from activemem_jax.engine.detokenize import MAX_PENDING, TextStream

TEXTS = ["Hello, world! 你好，世界 🤖🎉 naïve café, “quotes” and — dashes ",
         "def f(x):\n    return x**2  # ok\n\n\nprint(f(3))\n",
         "Ünïcödé ñ 日本語のテキスト 😀😃😄 END. Answer: 42\n\nQ: next"]


@pytest.fixture(scope="module")
def tokenizer(embedded_model):
    return embedded_model.tokenizer


def reference(tokenizer, ids, stops):
    """(text, tokens consumed): the first prefix of `ids` whose full decode holds a stop
    string ends the text just before the earliest one."""
    for k in range(1, len(ids) + 1):
        text = tokenizer.decode(ids[:k], skip_special_tokens=True)
        hits = [at for at in (text.find(s) for s in stops) if at >= 0]
        if hits:
            return text[:min(hits)], k
    return tokenizer.decode(ids, skip_special_tokens=True), len(ids)


def cases(tokenizer, n=120, seed=0):
    rng = random.Random(seed)
    vocab = len(tokenizer)
    for i in range(n):
        if i % 2:
            text = "".join(rng.choice(TEXTS) for _ in range(3))
            ids = tokenizer(text)["input_ids"]
        else:  # arbitrary ids: split characters, special tokens, invalid byte runs
            ids = [rng.randrange(vocab) for _ in range(rng.randrange(1, 80))]
        yield rng, ids


def run(tokenizer, ids, stops):
    stream, pieces, used = TextStream(tokenizer, stops), [], 0
    for t in ids:
        used += 1
        piece, stopped = stream.push(t)
        pieces.append(piece)
        if stopped:
            break
    pieces.append(stream.rest())
    return "".join(pieces), used, stream.finish()


def test_pieces_join_to_the_full_decode(tokenizer):
    for _, ids in cases(tokenizer):
        text, used, final = run(tokenizer, ids, ())
        assert text == final == tokenizer.decode(ids, skip_special_tokens=True)
        assert used == len(ids)


def test_stop_strings_match_across_token_boundaries_where_the_reference_does(tokenizer):
    stopped = 0
    for rng, ids in cases(tokenizer, seed=1):
        full = tokenizer.decode(ids, skip_special_tokens=True)
        at = rng.randrange(max(len(full) - 3, 1))
        stops = (full[at:at + rng.randint(2, 4)] or "\n\n", "\n\n", "zzzq")
        want_text, want_used = reference(tokenizer, ids, stops)
        text, used, final = run(tokenizer, ids, stops)
        assert (text, used) == (want_text, want_used), stops
        assert final == text
        stopped += used < len(ids) or any(s in full for s in stops)
    assert stopped > 50  # the stop strings were really hit, not trivially absent


def test_held_back_text_is_only_what_could_begin_a_stop(tokenizer):
    ids = tokenizer("one two three four five six seven")["input_ids"]
    stream = TextStream(tokenizer, ("STOPPING",))
    streamed = "".join(stream.push(t)[0] for t in ids)
    full = tokenizer.decode(ids)
    assert streamed == full[: len(full) - (len("STOPPING") - 1)]
    assert stream.rest() == full[len(streamed):]


def test_work_per_token_is_a_short_window_not_the_whole_response(tokenizer):
    """The old engine decoded the whole response on every token (quadratic work)."""
    lengths = []

    class Counting:
        def decode(self, ids, **kw):
            lengths.append(len(ids))
            return tokenizer.decode(ids, **kw)

    ids = tokenizer("".join(TEXTS) * 30)["input_ids"][:1024]
    assert len(ids) == 1024
    stream = TextStream(Counting(), ("\n\nQ: never",))
    for t in ids:
        stream.push(t)
    assert stream.finish() == tokenizer.decode(ids)
    assert max(lengths) <= 2 * MAX_PENDING
    assert sum(lengths) < 6 * len(ids)


def test_engine_text_is_the_decode_of_its_tokens_and_streams_every_token(engine):
    prompt = [{"role": "user", "content": "Write a long story about a robot, with emoji."}]
    params = SamplingParams(temperature=0.9, seed=3, max_tokens=200, ignore_eos=True)
    handle = engine.submit(prompt, params)
    deltas = list(handle)
    out = deltas[-1].output
    assert out.text == engine.tokenizer.decode(out.token_ids, skip_special_tokens=True)
    assert "".join(d.text for d in deltas) == out.text
    assert [t for d in deltas for t in d.token_ids] == out.token_ids
    assert engine.stats["detokenize_s"] > 0
