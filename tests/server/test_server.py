"""The OpenAI-compatible server over real HTTP on 127.0.0.1."""

import concurrent.futures
import http.client
import json
import time
import urllib.error
import urllib.request

import pytest

from activemem_jax.engine import Engine, SamplingParams
from activemem_jax.server import make_app
from tests.serving import running

pytestmark = pytest.mark.slow
NAME = "smollm2-135m-instruct"
QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]


@pytest.fixture(scope="module")
def url(engine):
    with running(make_app(engine, NAME)) as u:
        yield u


def post(url, path, body, headers=None, raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), dict(e.headers)


def test_openai_client_chat_stream_n_and_usage(url):
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="unused")
    assert [m.id for m in client.models.list().data] == [NAME]
    r = client.chat.completions.create(model=NAME, messages=QUESTION, temperature=0, max_tokens=16)
    assert "Paris" in r.choices[0].message.content and r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens == 42 and r.usage.completion_tokens >= 2
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    chunks = list(client.chat.completions.create(model=NAME, messages=QUESTION, temperature=0,
                                                 max_tokens=16, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == r.choices[0].message.content
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == r.usage.completion_tokens
    two = client.chat.completions.create(model=NAME, messages=QUESTION, n=2, temperature=1.0, seed=3,
                                         max_tokens=8, logprobs=True, top_logprobs=2)
    assert [c.index for c in two.choices] == [0, 1]
    assert two.usage.completion_tokens == sum(len(c.logprobs.content) for c in two.choices)
    assert len(two.choices[0].logprobs.content[0].top_logprobs) == 2
    comp = client.completions.create(model=NAME, prompt="1, 2, 3,", max_tokens=6, temperature=0, logprobs=1)
    assert comp.choices[0].text.startswith(" 4") and len(comp.choices[0].logprobs.token_logprobs) == 6


def test_32_concurrent_clients_get_complete_answers(url, engine):
    prompts = [f"Count from {i} to {i + 3}, separated by commas." for i in range(32)]
    expected = {p: o.text for p, o in zip(prompts, engine.generate(
        [[{"role": "user", "content": p}] for p in prompts], SamplingParams(temperature=0, max_tokens=12)))}

    def ask(p):
        status, body, _ = post(url, "/v1/chat/completions", {
            "model": NAME, "messages": [{"role": "user", "content": p}], "temperature": 0, "max_tokens": 12})
        return p, status, body

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        results = list(pool.map(ask, prompts))
    for p, status, body in results:
        assert status == 200
        assert body["choices"][0]["message"]["content"] == expected[p]


@pytest.mark.parametrize("body,raw,status,needle", [
    (None, b"{not json", 400, "invalid request"),
    ({"messages": "hello"}, None, 400, "messages"),
    ({"messages": QUESTION, "model": "gpt-9"}, None, 404, "does not exist"),
    ({"messages": QUESTION, "n": 0}, None, 400, "n must be"),
    ({"messages": QUESTION, "max_tokens": -5}, None, 400, "max_tokens"),
    ({"messages": QUESTION, "temperature": "hot"}, None, 400, "temperature"),
    ({"messages": [{"role": "user", "content": "word " * 1200}]}, None, 400, "context"),
])
def test_bad_requests_get_4xx_and_the_server_keeps_serving(url, body, raw, status, needle):
    got, err, _ = post(url, "/v1/chat/completions", body, raw=raw)
    assert got == status and needle in err["error"]["message"]
    ok, good, _ = post(url, "/v1/chat/completions", {"messages": QUESTION, "temperature": 0, "max_tokens": 4})
    assert ok == 200 and good["choices"][0]["message"]["content"]


def test_api_key_full_queue_and_disconnect(embedded_model):
    with Engine(embedded_model, max_slots=1, max_len=1024, max_queue=1) as eng, \
            running(make_app(eng, NAME, api_key="sekret")) as u:
        status, err, _ = post(u, "/v1/chat/completions", {"messages": QUESTION})
        assert status == 401 and "API key" in err["error"]["message"]
        auth = {"Authorization": "Bearer sekret"}
        long = eng.submit(QUESTION, SamplingParams(max_tokens=1000, ignore_eos=True))
        for _ in range(200):
            if eng.busy_slots == 1:
                break
            time.sleep(0.05)
        queued = eng.submit(QUESTION, SamplingParams(max_tokens=4))
        status, err, headers = post(u, "/v1/chat/completions", {"messages": QUESTION}, headers=auth)
        assert status == 503 and headers.get("retry-after") == "1"
        long.cancel()
        queued.cancel()
        assert long.result(60).finish_reason == "cancelled"
        # a streaming client that disconnects frees its slot
        host, port = u.split("//")[1].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        conn.request("POST", "/v1/chat/completions", body=json.dumps(
            {"messages": QUESTION, "stream": True, "max_tokens": 1000, "temperature": 0}),
            headers={"Content-Type": "application/json", **auth})
        resp = conn.getresponse()
        assert resp.status == 200 and resp.readline().startswith(b"data: ")
        deadline = time.time() + 30
        while eng.busy_slots == 0 and time.time() < deadline:
            time.sleep(0.02)
        assert eng.busy_slots == 1
        conn.close()
        while eng.busy_slots and time.time() < deadline:
            time.sleep(0.05)
        assert eng.busy_slots == 0, "the disconnected stream still holds its slot"
        status, body, _ = post(u, "/v1/chat/completions", {"messages": QUESTION, "max_tokens": 4,
                                                           "temperature": 0}, headers=auth)
        assert status == 200
