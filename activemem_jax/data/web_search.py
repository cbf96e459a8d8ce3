"""Live web search behind the retrievers' interface: a client of a Serper-style search API.

    search = WebSearch("https://google.serper.dev/search", cache_dir="cache/web_search")
    search.batch_search(["who founded quillan works"], k=5)
    # [[{"docid": link, "title", "text": snippet, "score": 1 / rank}, ...]]

The request is what Serper takes: `POST url` with the JSON body {"q": query, "num": k}
and the key in the `X-API-KEY` header, read from the environment variable `api_key_env`
(never from a config file) when a request is made (cached queries need no key). The
answer's "organic" list gives the hits (link, title, snippet), in the API's order; the
rest of the answer (answer box, knowledge graph, ads) is dropped.

- Retries (`http_call`, shared with `page_fetch`): a 5xx, a 408 or 429, a refused or
  dropped connection, or a timeout is tried again after `backoff * 2**i` seconds (i = 0,
  1, ...), `retries` times; any other 4xx is final at once (the request itself is wrong:
  retrying cannot help; a 401 or 403 says the key was refused).
- Cache (`DiskCache`): one JSON file per (url, query, k), named by the SHA-256 of the
  three; a hit is served without a request. A file that is unreadable or not the shape
  written here is ignored and rewritten. Entries never expire: delete the directory to
  refresh.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import tempfile
import time
import urllib.error
import urllib.request
from typing import Optional, Sequence

TRANSIENT_4XX = (408, 429)  # request timeout, rate limited: worth another try


class WebError(RuntimeError):
    """A web request that failed for good (refused, or still failing after the retries)."""


class MissingAPIKey(WebError):
    """The environment variable that should hold the search API key is unset or empty."""


def http_call(request: urllib.request.Request, timeout: float, retries: int, backoff: float,
              max_bytes: Optional[int] = None, refused: str = "the server refused access") -> tuple[dict, bytes]:
    """(headers with lowercased names, body) of a 2xx answer to `request`, retrying
    transient failures (module docstring). A body over `max_bytes` raises WebError;
    `refused` says what a 401 or 403 means for the caller."""
    what = f"{request.get_method()} {request.full_url}"
    last = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:
                headers = {k.lower(): v for k, v in resp.headers.items()}
                if max_bytes is not None and int(headers.get("content-length") or 0) > max_bytes:
                    raise WebError(f"{what}: the answer is {headers['content-length']} bytes, over "
                                   f"max_bytes={max_bytes}; raise max_bytes to read it")
                body = resp.read() if max_bytes is None else resp.read(max_bytes + 1)
                if max_bytes is not None and len(body) > max_bytes:
                    raise WebError(f"{what}: the answer is over max_bytes={max_bytes} bytes; "
                                   "raise max_bytes to read it")
                return headers, body
        except urllib.error.HTTPError as e:
            detail = e.read(300).decode("utf-8", "replace").strip()
            if 400 <= e.code < 500 and e.code not in TRANSIENT_4XX:
                hint = refused if e.code in (401, 403) else "the request was refused: check the url and the query"
                raise WebError(f"{what} answered {e.code} {e.reason}: {detail or '(no body)'}; {hint}") from e
            last = f"{e.code} {e.reason}: {detail or '(no body)'}"
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, socket.timeout,
                TimeoutError) as e:
            last = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
    raise WebError(f"{what} failed {retries + 1} times (last: {last}); check that the endpoint is up "
                   f"and reachable, or raise retries (now {retries}) or timeout (now {timeout} s)")


class DiskCache:
    """JSON values in files under `directory`, one per key (any JSON-able value)."""

    def __init__(self, directory: str):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    def path(self, key) -> str:
        digest = hashlib.sha256(json.dumps(key, ensure_ascii=False).encode()).hexdigest()
        return os.path.join(self.directory, digest + ".json")

    def get(self, key):
        """The value stored under `key`, or None (absent, or a file that is not this
        cache's: unreadable JSON, or written for another key)."""
        try:
            with open(self.path(key), encoding="utf-8") as f:
                entry = json.load(f)
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("key") != key or "value" not in entry:
            return None
        return entry["value"]

    def put(self, key, value) -> None:
        """Store atomically (a reader never sees half a file)."""
        fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"key": key, "value": value}, f, ensure_ascii=False)
        os.replace(tmp, self.path(key))


class WebSearch:
    """`batch_search(queries, k)` over a Serper-style API (module docstring); each hit is
    {"docid": its link, "title", "text": its snippet, "score": 1 / its rank (1, 1/2, ...)}."""

    def __init__(self, url: str = "https://google.serper.dev/search", api_key_env: str = "SERPER_API_KEY",
                 cache_dir: Optional[str] = None, timeout: float = 20.0, retries: int = 3,
                 backoff: float = 1.0):
        self.url, self.api_key_env = url, api_key_env
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.cache = DiskCache(cache_dir) if cache_dir else None

    def _api_key(self) -> str:
        key = os.environ.get(self.api_key_env, "").strip()
        if not key:
            raise MissingAPIKey(f"web search needs an API key in the environment variable {self.api_key_env}, "
                                f"which is unset or empty: export {self.api_key_env}=<your key> (or name "
                                "another variable with api_key_env)")
        return key

    def search(self, query: str, k: int = 3) -> list[dict]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[dict]]:
        """One list of at most k hits per query (one request per query not cached)."""
        return [self._one(q, k) for q in queries]

    def _one(self, query: str, k: int) -> list[dict]:
        key = [self.url, query, k]
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return hit
        request = urllib.request.Request(
            self.url, data=json.dumps({"q": query, "num": k}).encode(), method="POST",
            headers={"Content-Type": "application/json", "X-API-KEY": self._api_key()})
        _, body = http_call(request, self.timeout, self.retries, self.backoff,
                            refused=f"the API key in ${self.api_key_env} was refused: check it")
        try:
            organic = json.loads(body).get("organic", [])
            hits = [{"docid": r["link"], "title": r.get("title", ""), "text": r.get("snippet", ""),
                     "score": 1.0 / i} for i, r in enumerate(organic, 1)][:k]
        except (ValueError, AttributeError, TypeError, KeyError) as e:
            raise WebError(f"POST {self.url}: the answer is not a Serper-style result ({type(e).__name__}: {e}; "
                           f"starts {body[:200]!r}); is the url a search endpoint?") from e
        if self.cache is not None:
            self.cache.put(key, hits)
        return hits


__all__ = ["DiskCache", "MissingAPIKey", "WebError", "WebSearch", "http_call"]
