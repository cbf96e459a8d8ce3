"""The Serper-style web search client against a server on 127.0.0.1 that speaks the API:
results, the key header, retries (5xx yes, 4xx no), timeouts, the disk cache."""

import contextlib
import http.server
import json
import os
import socket
import time

import pytest

from activemem_jax.data.web_search import MissingAPIKey, WebError, WebSearch
from tests.serving import handler_server

KEY_ENV = "ACTIVEMEM_TEST_SEARCH_KEY"
ORGANIC = [{"title": "Quillan Works", "link": "https://quillan.example/about", "snippet": "Robots.", "position": 1},
           {"title": "Lumen Institute", "link": "https://lumen.example/", "snippet": "Telescopes.", "position": 2},
           {"title": "Third", "link": "https://third.example/", "snippet": "More.", "position": 3}]


@contextlib.contextmanager
def serving(replies):
    """A local HTTP server answering each request with `replies[i]` (the last repeats):
    (status, content type, body bytes[, seconds to wait first[, send a Content-Length]]).
    Yields (url, requests), requests being (method, path, headers, body) as received."""
    requests = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            reply = replies[min(len(requests), len(replies) - 1)]
            status, ctype, payload, wait, length = reply + (0, True)[len(reply) - 3:]
            requests.append((self.command, self.path, self.headers, body))
            time.sleep(wait)
            try:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                if length:  # else the body ends when the connection closes (HTTP/1.0)
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout or size-cap test)

        do_GET = do_POST = _answer

        def log_message(self, *args):
            pass

    with handler_server(Handler) as url:
        yield url, requests


def ok(organic=ORGANIC):
    return 200, "application/json", json.dumps({"searchParameters": {}, "organic": organic}).encode()


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sekret-123")
    return "sekret-123"


def _client(url, **kw):
    return WebSearch(url + "/search", api_key_env=KEY_ENV, backoff=0.001, **kw)


def test_results_parsed_and_the_key_sent(key):
    with serving([ok()]) as (url, requests):
        hits = _client(url).batch_search(["quillan works", "lumen"], k=2)
    assert hits[0] == [{"docid": "https://quillan.example/about", "title": "Quillan Works", "text": "Robots.",
                        "score": 1.0},
                       {"docid": "https://lumen.example/", "title": "Lumen Institute", "text": "Telescopes.",
                        "score": 0.5}]
    assert len(hits[1]) == 2
    method, path, headers, body = requests[0]
    assert (method, path, headers["X-API-KEY"], headers["Content-Type"]) == \
        ("POST", "/search", key, "application/json")
    assert [json.loads(r[3]) for r in requests] == [{"q": "quillan works", "num": 2}, {"q": "lumen", "num": 2}]


def test_a_503_is_retried_and_a_401_is_not(key):
    with serving([(503, "text/plain", b"busy"), ok()]) as (url, requests):
        assert len(_client(url).search("q", k=3)) == 3
    assert len(requests) == 2
    with serving([(401, "application/json", b'{"message": "Unauthorized."}')]) as (url, requests):
        with pytest.raises(WebError, match=rf"401 Unauthorized.*Unauthorized\..*API key in \${KEY_ENV} was refused"):
            _client(url, retries=3).search("q")
    assert len(requests) == 1


def test_an_endpoint_that_keeps_failing_or_is_down_names_the_attempts(key):
    with serving([(500, "text/plain", b"boom")]) as (url, requests):
        with pytest.raises(WebError, match=r"failed 3 times \(last: 500 .*boom\).*endpoint is up"):
            _client(url, retries=2).search("q")
    assert len(requests) == 3
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()  # nothing listens there now
    with pytest.raises(WebError, match="failed 2 times.*refused"):
        _client(dead, retries=1).search("q")


def test_a_slow_endpoint_times_out_and_is_retried(key):
    with serving([ok() + (0.5,)]) as (url, requests):
        with pytest.raises(WebError, match="failed 2 times.*timed out"):
            _client(url, timeout=0.1, retries=1).search("q")
    assert len(requests) == 2


def test_a_missing_key_says_which_variable_and_sends_nothing(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with serving([ok()]) as (url, requests):
        with pytest.raises(MissingAPIKey, match=f"{KEY_ENV}.*export {KEY_ENV}="):
            _client(url).search("q")
    assert requests == []


def test_a_non_serper_answer_is_an_error(key):
    with serving([(200, "text/html", b"<html>hello</html>")]) as (url, _):
        with pytest.raises(WebError, match="not a Serper-style result"):
            _client(url).search("q")


def test_disk_cache_hits_and_a_corrupt_entry_is_rewritten(key, tmp_path):
    cache = str(tmp_path / "cache")
    with serving([ok()]) as (url, requests):
        first = _client(url, cache_dir=cache).search("q", k=2)
        assert _client(url, cache_dir=cache).search("q", k=2) == first  # a new client, the same directory
        assert len(requests) == 1
        _client(url, cache_dir=cache).search("q", k=3)  # another k: another entry
        assert len(requests) == 2
        files = sorted(os.listdir(cache))
        assert len(files) == 2 and all(f.endswith(".json") for f in files)
        for f in files:
            (tmp_path / "cache" / f).write_text('{"key": ["trunc')
        assert _client(url, cache_dir=cache).search("q", k=2) == first  # ignored: asked again
        assert len(requests) == 3
        assert _client(url, cache_dir=cache).search("q", k=2) == first  # and rewritten
        assert len(requests) == 3
