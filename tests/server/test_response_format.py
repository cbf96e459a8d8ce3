"""Structured output through the server (server/structured.py) with the official openai
client over real HTTP on 127.0.0.1: response_format json_object / json_schema, vLLM's
guided_regex / guided_choice / guided_grammar, streamed too; every bad constraint is a
400 with its reason in bounded time, and the server serves on.

The model is the tiny random one of tests/engine/test_constrained.py: random weights, so
only the constraint makes the output valid."""

import json
import re
import time

import pytest

from activemem_jax.engine import Engine
from activemem_jax.server import make_app
from tests.engine.test_constrained import CHOICES, REGEX, SCHEMA, TAGS, check, tiny_bpe_model
from tests.serving import running

NAME = "tiny"
HELLO = [{"role": "user", "content": "Give me the record."}]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    import openai

    model = tiny_bpe_model(tmp_path_factory.mktemp("tiny_bpe_server"))
    with Engine(model, max_slots=8, max_len=256) as eng:  # the engine test's shapes (its compiled programs)
        with running(make_app(eng, NAME)) as url:
            yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)


def chat(client, **kw):
    kw = {"model": NAME, "messages": HELLO, "max_tokens": 120, "temperature": 1.0, "seed": 1, **kw}
    return client.chat.completions.create(**kw)


def test_response_format_and_guided_fields_give_valid_output(client):
    schema = {"type": "json_schema", "json_schema": {"name": "record", "schema": SCHEMA, "strict": True}}
    r = chat(client, response_format=schema, n=2)
    for c in r.choices:
        assert c.finish_reason == "stop"
        check("json", c.message.content)
    obj = chat(client, response_format={"type": "json_object"}, max_tokens=200, temperature=0)
    if obj.choices[0].finish_reason == "stop":  # any object may be long: valid when complete
        assert isinstance(json.loads(obj.choices[0].message.content), dict)
    assert obj.choices[0].message.content.startswith("{")
    stream = chat(client, response_format=schema, stream=True, seed=5)
    check("json", "".join(c.choices[0].delta.content or "" for c in stream if c.choices))
    check("regex", chat(client, extra_body={"guided_regex": REGEX}).choices[0].message.content)
    check("grammar", chat(client, extra_body={"guided_grammar": TAGS}).choices[0].message.content)
    gbnf = 'root ::= "<answer>" [a-z] [a-z]? [a-z]? "</answer>"'  # GBNF, as llama.cpp writes grammars
    check("grammar", chat(client, extra_body={"guided_grammar": gbnf}).choices[0].message.content)
    comp = client.completions.create(model=NAME, prompt="Answer:", max_tokens=20, seed=2,
                                     extra_body={"guided_choice": CHOICES})
    check("choice", comp.choices[0].text)
    check("regex", chat(client, extra_body={"structured_outputs": {"regex": REGEX}}).choices[0].message.content)
    plain = chat(client, response_format={"type": "text"}, max_tokens=5)
    assert plain.choices[0].finish_reason in ("stop", "length")


BAD = {
    "unsatisfiable schema": ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "string", "minLength": 5, "maxLength": 2}}}}, "Unsatisfiable"),
    "strict unimplemented keyword": ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "strict": True, "schema": {"type": "object", "not": {}}}}}, "strict"),
    "unsupported type": ({"response_format": {"type": "xml"}}, "not supported"),
    "too large": ({"extra_body": {"guided_json": {"enum": ["x" * 70_000]}}}, "too large"),
    "invalid regex": ({"extra_body": {"guided_regex": "[a-"}}, "regex"),
    "exploding regex": ({"extra_body": {"guided_regex": "(a{1000}){1000}"}}, "too many"),
    "grammar with no base case": ({"extra_body": {"guided_grammar": 'start: a\na: a "x"'}}, "no string"),
    "GBNF syntax error": ({"extra_body": {"guided_grammar": 'root ::= ("a"'}}, "grammar"),
    "two constraints": ({"response_format": {"type": "json_object"}, "extra_body": {"guided_regex": "a+"}},
                        "at most one"),
    "empty choice list": ({"extra_body": {"guided_choice": []}}, "choice"),
}


def test_bad_constraints_are_400_with_the_reason_and_the_server_serves_on(client):
    import openai

    for name, (kw, reason) in BAD.items():
        t0 = time.perf_counter()
        with pytest.raises(openai.BadRequestError) as e:
            chat(client, max_tokens=4, **kw)
        assert time.perf_counter() - t0 < 20, name
        assert reason in e.value.message, (name, e.value.message)
    with pytest.raises(openai.BadRequestError):  # streaming: refused before the stream starts
        chat(client, stream=True, extra_body={"guided_regex": "[a-"})
    assert re.fullmatch(REGEX, chat(client, extra_body={"guided_regex": REGEX}).choices[0].message.content)
    assert chat(client, max_tokens=3).choices[0].finish_reason in ("stop", "length")
