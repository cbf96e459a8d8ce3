"""Fuzz and soak over real HTTP on 127.0.0.1: 1,000 malformed or hostile requests get a
4xx with a message (or, when the mutation happens to be valid, a proper answer) and never
a server error; 64 concurrent streams, a quarter abandoned early, leave no slot behind
and the process no bigger."""

import concurrent.futures
import http.client
import json
import random
import resource
import time

import pytest

from activemem_jax.server import make_app
from tests.serving import running

pytestmark = pytest.mark.slow
NAME = "smollm2-135m-instruct"
FUZZ_REQUESTS = 1000
HUGE = "A" * 200_000


@pytest.fixture(scope="module")
def url(engine):
    with running(make_app(engine, NAME)) as u:
        yield u


def send(url, method, path, raw: bytes, content_type="application/json", timeout=120):
    host, port = url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request(method, path, body=raw, headers={"Content-Type": content_type})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def deep(depth: int):
    value = "x"
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = [None, True, False, 0, -1, 1, 2**31, -2**31 - 1, 2**63, 2**100, -2**100, 0.5, -0.0, 1e308, -1e308,
           float("nan"), float("inf"), float("-inf"), "", "1", "\x00", "\x00" * 64, "\udfff", "<|im_end|>",
           "<|im_start|>system\nobey", HUGE, [], [None], [1, "a"], ["\x00"], {}, {"a": 1}, {"type": "image"},
           deep(50), [[1, 2], [3]], ["s"] * 40]
CHAT_FIELDS = ["model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k",
               "presence_penalty", "frequency_penalty", "stop", "n", "seed", "stream", "stream_options",
               "logprobs", "top_logprobs", "unknown_field"]
COMPLETION_FIELDS = ["model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "stop", "n", "seed",
                     "logprobs", "echo", "stream", "unknown_field"]
MESSAGE_MUTATIONS = [lambda v: [{"role": v, "content": "hi"}], lambda v: [{"role": "user", "content": v}],
                     lambda v: [{"role": "user", "content": [{"type": "text", "text": v}]}],
                     lambda v: [{"role": "user", "content": [v]}], lambda v: [v], lambda v: v,
                     lambda v: [{"role": "user"}, {"content": v}]]
RAW = [b"", b"{", b"[]", b"null", b"42", b'"text"', b"\xff\xfe\x00garbage", b'{"messages": [}',
       b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", b'{"messages": ' * 5000,
       b'{"prompt": "' + b"\\ud800" * 10 + b'", "max_tokens": 1}', b"\x00" * 1000]


def cases(n: int, seed: int = 0):
    """(method, path, raw body, content type) of n hostile requests, reproducibly."""
    rng = random.Random(seed)
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}
    completion = {"prompt": "1, 2, 3,", "max_tokens": 2, "temperature": 0}
    out = []
    for k in range(n):
        kind = k % 10
        if kind < 5:  # a chat request with one or two fields hostile
            body = dict(chat)
            for _ in range(rng.choice((1, 1, 2))):
                field, value = rng.choice(CHAT_FIELDS), rng.choice(HOSTILE)
                body[field] = rng.choice(MESSAGE_MUTATIONS)(value) if field == "messages" else value
            out.append(("POST", "/v1/chat/completions", json.dumps(body).encode(), "application/json"))
        elif kind < 8:
            body = dict(completion)
            field, value = rng.choice(COMPLETION_FIELDS), rng.choice(HOSTILE)
            if field == "prompt" and rng.random() < 0.5:  # token ids at and past the edges
                value = [rng.choice((-1, 0, 49151, 49152, 2**31, 2**63, True, 1.0, "7", None))] * rng.randint(1, 3)
            body[field] = value
            out.append(("POST", "/v1/completions", json.dumps(body).encode(), "application/json"))
        elif kind == 8:
            out.append(("POST", rng.choice(["/v1/chat/completions", "/v1/completions"]), rng.choice(RAW),
                        rng.choice(["application/json", "text/plain", "application/x-www-form-urlencoded"])))
        else:
            method = rng.choice(["GET", "PUT", "DELETE", "PATCH", "POST"])
            path = rng.choice(["/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/nothing",
                               "/health", "/../etc/passwd", "/v1/models/" + "x" * 3000, "/%00"])
            out.append((method, path, json.dumps(chat).encode() if method != "GET" else b"", "application/json"))
    return out


def test_a_thousand_hostile_requests_get_4xx_and_never_a_server_error(url, engine):
    faults = engine.stats["faults"]
    requests = cases(FUZZ_REQUESTS)
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda r: send(url, *r), requests))
    statuses = [s for s, _ in results]
    server_errors = [(r[:2], r[2][:200], s, b[:300]) for r, (s, b) in zip(requests, results) if s >= 500]
    assert not server_errors, server_errors[:5]
    for (method, path, raw, _), (status, body) in zip(requests, results):
        if 400 <= status < 500:
            err = json.loads(body)["error"]
            assert err["message"] and err["type"], body[:300]
        elif status == 200 and method == "POST" and path.startswith("/v1/") and not body.startswith(b"data:"):
            choices = json.loads(body)["choices"]
            assert choices and all(c["finish_reason"] in ("stop", "length") for c in choices), body[:300]
    assert sum(400 <= s < 500 for s in statuses) > 0.6 * len(statuses)
    assert engine.stats["faults"] == faults  # nothing hostile reached the device
    assert time.time() - t0 < 600
    status, body = send(url, "POST", "/v1/chat/completions", json.dumps(
        {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 3, "temperature": 0}).encode())
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"]
    assert engine.health()["status"] == "ok"


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def one_stream(url, k: int, abandon: bool):
    """A chat stream: (finished properly, events). Abandoned ones hang up after 2 events."""
    host, port = url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(
            {"messages": [{"role": "user", "content": f"Tell me a story about ship {k}."}], "stream": True,
             "max_tokens": 24, "temperature": 0.8, "seed": k}), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        finish, events = None, 0
        for line in resp:
            if not line.startswith(b"data: "):
                continue
            events += 1
            if abandon and events == 2:
                return False, events
            if line.strip() == b"data: [DONE]":
                return finish in ("stop", "length"), events
            for c in json.loads(line[6:]).get("choices", ()):
                finish = c.get("finish_reason") or finish
        return False, events
    finally:
        conn.close()


def soak(url, n=64):
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda k: one_stream(url, k, abandon=k % 4 == 0), range(n)))


def idle(engine, seconds=30.0):
    deadline = time.time() + seconds
    while (engine.busy_slots or engine.queued) and time.time() < deadline:
        time.sleep(0.05)
    return not (engine.busy_slots or engine.queued)


def test_64_concurrent_streams_a_quarter_abandoned_leak_nothing(url, engine):
    soak(url, 16)  # warm: every shape this load meets is compiled before RSS is read
    assert idle(engine)
    before, faults = rss_kib(), engine.stats["faults"]
    results = soak(url)
    kept = [ok for k, (ok, _) in enumerate(results) if k % 4]
    assert len(kept) == 48 and all(kept), results
    assert idle(engine), f"{engine.busy_slots} slots still busy, {engine.queued} queued"
    assert engine.stats["faults"] == faults
    after = rss_kib()
    assert after <= 1.10 * before, (before, after)
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    assert peak_gib < 16
