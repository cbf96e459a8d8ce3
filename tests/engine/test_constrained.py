"""Constrained decoding (engine/constraints.py): every output of a random-weight model
decoded under a JSON schema, a regex, a choice list or a Lark grammar is valid; bad
constraints are a ValueError in bounded time, and the engine keeps serving.

The model is a tiny random Llama over a small byte-level BPE tokenizer trained here (it
can spell any text, in tokens of several bytes), so the masks meet real token boundaries
at a small compile cost."""

import json
import re
import time

import jax
import numpy as np
import pytest

from activemem_jax.engine import Engine, SamplingParams
from activemem_jax.engine.constraints import Constraint
from activemem_jax.engine.sampling import apply_mask
from activemem_jax.models import load_pretrained
from activemem_jax.sharding import make_mesh
from tests.models.tiny_hf import make_tiny

VOCAB = 384
CORPUS = ['{"name": "Ada", "age": 36, "ok": true}', '{"color": "red", "items": [1, 2, 3]}',
          "yes no maybe 0123456789 - abc def", "<answer>Paris</answer> <search>query</search>"]

SCHEMA = {"type": "object", "properties": {
    "n": {"type": "integer", "minimum": 0, "maximum": 999},
    "ok": {"type": "boolean"},
    "color": {"enum": ["red", "green", "blue"]},
    "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{1,4}$"}, "maxItems": 2}},
    "required": ["n", "ok", "color", "tags"], "additionalProperties": False}
REGEX = r"[0-9]{3}-[a-z]{2,5}"
CHOICES = ["yes", "no", "maybe not"]
TAGS = 'start: "<answer>" /[a-z]{1,8}/ "</answer>"'


def save_bpe_tokenizer(directory, vocab_size: int = VOCAB):
    """A byte-level BPE tokenizer (specials <pad> <s> </s> = 0, 1, 2) trained on a few lines, with
    a plain chat template."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS * 4, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                                pad_token="<pad>")
    fast.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant: "
    fast.save_pretrained(directory)
    return fast


def tiny_bpe_model(directory):
    """The tiny random model the constrained tests (engine and server) decode with."""
    save_bpe_tokenizer(directory)
    make_tiny(directory, "llama_tied_mha", vocab_size=VOCAB, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    return load_pretrained(str(directory), mesh=make_mesh(devices=jax.devices()[:1]))


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    with Engine(tiny_bpe_model(tmp_path_factory.mktemp("tiny_bpe")), max_slots=8, max_len=256) as eng:
        yield eng


def test_apply_mask_unpacks_bits():
    logits = np.zeros((2, 70), np.float32)
    mask = np.zeros((2, 3), np.int32)
    mask[0, 0], mask[0, 2] = 1 << 3, 1 << 1  # tokens 3 and 65
    mask[1] = -1  # all allowed
    out = np.asarray(apply_mask(logits, mask))
    assert np.isfinite(out[0]).nonzero()[0].tolist() == [3, 65]
    assert np.isfinite(out[1]).all()


def check(kind, text):
    """text is a complete match of the constraint of `kind` (raises otherwise)."""
    if kind == "json":
        v = json.loads(text)
        assert set(v) == {"n", "ok", "color", "tags"} and type(v["n"]) is int and 0 <= v["n"] <= 999
        assert type(v["ok"]) is bool and v["color"] in ("red", "green", "blue") and len(v["tags"]) <= 2
        assert all(re.fullmatch("[a-z]{1,4}", t) for t in v["tags"])
    elif kind == "regex":
        assert re.fullmatch(REGEX, text), text
    elif kind == "choice":
        assert text in CHOICES, text
    else:
        assert re.fullmatch(r"<answer>[a-z]{1,8}</answer>", text), text


CONSTRAINTS = {"json": Constraint.json_schema(SCHEMA), "regex": Constraint.regex(REGEX),
               "choice": Constraint.choice(CHOICES), "grammar": Constraint.grammar(TAGS)}


def test_random_weights_decode_only_valid_output_and_unconstrained_slots_are_unaffected(engine):
    prompts = [[5 + i, 40 + 3 * i, 90] for i in range(12)]
    free = SamplingParams(temperature=1.0, seed=7, max_tokens=24, ignore_eos=True)
    alone = engine.generate(prompts[:2], free)  # the same requests without constrained neighbours
    jobs = []
    with engine.batch():
        handles = [engine.submit(prompts[i], free) for i in range(2)]
        for i in range(2, 12):
            kind = list(CONSTRAINTS)[i % 4]
            temperature = 0.0 if i < 4 else 1.0  # greedy and sampled
            params = SamplingParams(temperature=temperature, seed=i, max_tokens=120,
                                    constraint=CONSTRAINTS[kind])
            jobs.append((kind, engine.submit(prompts[i], params)))
    assert [h.result(300).token_ids for h in handles] == [o.token_ids for o in alone]
    for kind, h in jobs:
        out = h.result(300)
        assert out.finish_reason == "stop", (kind, out.finish_reason, out.error, out.text)
        check(kind, out.text)
    # ignore_eos under a constraint: EOS stays masked until the constraint is complete
    out = engine.generate([prompts[0]], SamplingParams(temperature=1.0, seed=3, max_tokens=60, ignore_eos=True,
                                                       constraint=CONSTRAINTS["regex"]))[0]
    assert out.finish_reason == "stop" and re.fullmatch(REGEX, out.text)


BAD = {
    "unsatisfiable schema": Constraint.json_schema({"type": "integer", "minimum": 5, "maximum": 3}),
    "schema is false": Constraint.json_schema(False),
    "unknown type": Constraint.json_schema({"type": "strin"}),
    "invalid regex": Constraint.regex("[a-z"),
    "look-around regex": Constraint.regex("a(?=b)"),
    "grammar with no base case": Constraint.grammar('start: a\na: a "x"'),
    "grammar syntax": Constraint.grammar("start: ("),
}


def test_bad_constraints_are_value_errors_in_bounded_time_and_the_engine_serves_on(engine):
    for name, c in BAD.items():
        t0 = time.perf_counter()
        with pytest.raises(ValueError) as e:
            engine.submit([5, 6], SamplingParams(max_tokens=4, constraint=c))
        assert time.perf_counter() - t0 < 5, name
        assert "invalid" in str(e.value), (name, str(e.value))
    with pytest.raises(ValueError, match="too large"):
        Constraint.json_schema({"enum": ["x" * 70_000]})
    with pytest.raises(ValueError, match="strict"):  # an unimplemented keyword in strict mode
        engine.check_constraint(Constraint.json_schema({"type": "object", "not": {"type": "string"}}))
    engine.check_constraint(Constraint.json_schema({"type": "object", "not": {"type": "string"}}, strict=False))
    # left recursion is fine for llguidance's Earley parser: valid output, not an error
    out = engine.generate([[5, 6]], SamplingParams(temperature=1.0, seed=1, max_tokens=40, constraint=
                                                   Constraint.grammar('start: a\na: a "x" | "y"')))[0]
    assert re.fullmatch("yx*", out.text) and out.finish_reason in ("stop", "length")
    # a regex built to explode the automaton: refused once its first mask spends the lexer's limits
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="too many|limit|complex"):
        engine.submit([5, 6], SamplingParams(max_tokens=4, constraint=Constraint.regex("(a{1000}){1000}")))
    assert time.perf_counter() - t0 < 20
    assert engine.health()["status"] == "ok"
    out = engine.generate([[5, 6]], SamplingParams(temperature=0, max_tokens=3, ignore_eos=True))[0]
    assert out.completion_tokens == 3


def test_a_vocabulary_that_cannot_spell_the_constraint_is_a_value_error(tmp_path):
    from tests.models.tiny_hf import save_word_tokenizer

    make_tiny(tmp_path, "llama_tied_mha", vocab_size=512)
    save_word_tokenizer(tmp_path, 512)  # tokens "t0".."t511": no digit can start a token
    model = load_pretrained(str(tmp_path), mesh=make_mesh(devices=jax.devices()[:1]))
    with Engine(model, max_slots=2, max_len=256) as eng:
        with pytest.raises(ValueError, match="cannot spell|no string"):
            eng.submit([5], SamplingParams(constraint=Constraint.regex("[0-9]+")))
        out = eng.generate([[5]], SamplingParams(temperature=0, max_tokens=8, constraint=Constraint.regex("t5(t6)*")))
        assert out[0].token_ids[:1] == [5] and set(out[0].token_ids[1:]) <= {6}
        # a dead end met while decoding ("t5" spelled, then no token starts with "x"): that request fails
        out = eng.generate([[5]], SamplingParams(temperature=0, max_tokens=8, constraint=Constraint.regex("t5x")))[0]
        assert out.finish_reason == "error" and "cannot spell" in out.error, out
        out = eng.generate([[5]], SamplingParams(temperature=0, max_tokens=2, ignore_eos=True))[0]
        assert out.completion_tokens == 2
