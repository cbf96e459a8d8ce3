"""Fetch a web page and read it as text with a file parser: HyMem's parse_file reader.

    from hymem.tools import read_file
    pages = PageFetcher(read_file, cache_dir="cache/pages")
    pages.fetch("https://example.org/a")   # the page's text
    pages.save("https://example.org/a")    # the saved file's path (.html, .pdf, ...)

`GET url` (http and https only: an agent-chosen file:// or ftp:// address is refused) with
the timeout, retries and backoff of `web_search.http_call` (a 4xx other than 408 and 429
is final at once); a body over `max_bytes` is an error, not a truncated page. The
Content-Type picks the parser: the body is saved under the extension HyMem's parse_file
reads for that type (`hymem.tools.read_file`: HTML without its script, style, nav, header
and footer; PDF, DOCX, XLSX, CSV, plain text, Markdown, JSON) and read back with `read`,
which the caller passes in (this library never imports hymem, which builds on it:
tests/test_package_layout.py). Any other content type (images, archives, ...), or none,
raises WebError naming it. HTML and text bodies are decoded with the charset their
Content-Type names, else (HTML) the one a <meta> tag in the first 4 KB names, else UTF-8
(also for a charset Python does not know; undecodable bytes replaced), and saved as UTF-8.
The text returned is clipped to `max_chars`.

The saved file is the cache: `cache_dir/<SHA-256 of the url><extension>`, written
atomically; a later fetch of the url reads it without a request (entries never expire).
Without cache_dir the body goes to a temporary directory, deleted after reading.
"""

from __future__ import annotations

import codecs
import glob
import hashlib
import os
import re
import tempfile
import urllib.parse
import urllib.request
from typing import Callable, Optional

from activemem_jax.data.web_search import WebError, http_call

EXTENSIONS = {  # Content-Type (without parameters) -> the extension read_file parses
    "text/html": ".html", "application/xhtml+xml": ".html", "text/plain": ".txt", "text/markdown": ".md",
    "text/csv": ".csv", "application/json": ".json", "application/pdf": ".pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
}
DECODED = (".html", ".txt", ".md", ".csv", ".json")  # saved re-encoded as UTF-8
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)


class PageFetcher:
    """`fetch(url) -> text`, `save(url) -> path` (module docstring); `read(path) -> text`
    parses a saved file."""

    def __init__(self, read: Callable[[str], str], cache_dir: Optional[str] = None, timeout: float = 20.0,
                 retries: int = 3, backoff: float = 1.0, max_bytes: int = 5_000_000, max_chars: int = 20_000,
                 user_agent: str = "activemem-jax page fetcher"):
        self.read, self.cache_dir = read, cache_dir
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.max_bytes, self.max_chars, self.user_agent = max_bytes, max_chars, user_agent
        if cache_dir:
            os.makedirs(cache_dir, exist_ok=True)

    def fetch(self, url: str) -> str:
        """The page's text, at most max_chars."""
        if self.cache_dir:
            return self.read(self.save(url))[:self.max_chars]
        with tempfile.TemporaryDirectory() as tmp:
            return self.read(self._download(url, tmp))[:self.max_chars]

    def save(self, url: str) -> str:
        """The path of the page's body in cache_dir (fetched unless already there)."""
        if not self.cache_dir:
            raise ValueError("PageFetcher.save needs a cache_dir to save pages in")
        cached = glob.glob(os.path.join(self.cache_dir, _stem(url) + ".*"))
        return cached[0] if cached else self._download(url, self.cache_dir)

    def _download(self, url: str, directory: str) -> str:
        """The path the page's body is saved under (its extension from its Content-Type)."""
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        if scheme not in ("http", "https"):
            raise WebError(f"{url!r}: only http and https pages are fetched (not {scheme or 'a bare path'!r})")
        request = urllib.request.Request(url, headers={"User-Agent": self.user_agent})
        headers, body = http_call(request, self.timeout, self.retries, self.backoff, self.max_bytes,
                                  refused="the page needs a login or refuses automated clients")
        mime, _, params = headers.get("content-type", "").partition(";")
        ext = EXTENSIONS.get(mime.strip().lower())
        if ext is None:
            raise WebError(f"GET {url}: content type {mime.strip() or '(none)'!r} has no text to read "
                           f"(readable: {', '.join(sorted(EXTENSIONS))})")
        if ext in DECODED:
            body = body.decode(_charset(params, body if ext == ".html" else b""), "replace").encode("utf-8")
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        path = os.path.join(directory, _stem(url) + ext)
        os.replace(tmp, path)
        return path


def _stem(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()


def _charset(params: str, html: bytes) -> str:
    """The charset the Content-Type names, else the one an HTML <meta> names in the first
    4 KB of `html`, if Python knows it; else UTF-8."""
    named = [v.strip().strip('"') for n, _, v in (p.partition("=") for p in params.split(";"))
             if n.strip().lower() == "charset"]
    named += [m.decode("ascii") for m in _META_CHARSET.findall(html[:4096])]
    try:
        return codecs.lookup(named[0]).name if named else "utf-8"
    except LookupError:
        return "utf-8"


__all__ = ["EXTENSIONS", "PageFetcher"]
