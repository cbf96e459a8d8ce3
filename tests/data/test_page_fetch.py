"""The page fetcher against a server on 127.0.0.1: HTML to text through HyMem's parser
(parse_file's reader), charsets, the size cap, other content types, retries and the disk
cache."""

import os

import pytest

from activemem_jax.data.page_fetch import PageFetcher
from activemem_jax.data.web_search import WebError
from hymem.tools import read_file
from tests.data.test_web_search import serving

PAGE = ("<html><head><title>Quillan</title><style>p {color: red}</style>"
        "<script>var secret = 42;</script></head><body><nav>Home | About</nav>"
        "<h1>Quillan Works</h1><p>Quillan Works builds robots for warehouses.</p>"
        "<footer>Copyright</footer></body></html>").encode()


def _fetcher(**kw):
    return PageFetcher(read_file, backoff=0.001, **kw)


def test_html_becomes_text_without_scripts_or_navigation():
    with serving([(200, "text/html", PAGE)]) as (url, requests):
        text = _fetcher().fetch(url + "/about")
    assert "Quillan Works builds robots for warehouses." in text and "Quillan Works\n" in text
    assert not any(s in text for s in ("secret", "color", "Home", "Copyright"))
    assert requests[0][:2] == ("GET", "/about")


def test_the_charset_declared_in_the_header_or_a_meta_tag_is_honoured():
    page = "<html><head>{}</head><body><p>北京大学成立于1898年。</p></body></html>"
    with serving([(200, "text/html; charset=GBK", page.format("").encode("gbk")),
                  (200, "text/html", page.format('<meta charset="gb2312">').encode("gbk"))]) as (url, _):
        assert "北京大学成立于1898年。" in _fetcher().fetch(url + "/header")
        assert "北京大学成立于1898年。" in _fetcher().fetch(url + "/meta")


def test_size_cap_with_and_without_a_content_length():
    big = b"<p>" + b"x" * 5000 + b"</p>"
    with serving([(200, "text/html", big), (200, "text/html", big, 0, False)]) as (url, requests):
        with pytest.raises(WebError, match=r"5007 bytes, over max_bytes=1000"):
            _fetcher(max_bytes=1000).fetch(url + "/big")
        with pytest.raises(WebError, match=r"over max_bytes=1000 bytes"):
            _fetcher(max_bytes=1000).fetch(url + "/big")
        assert len(requests) == 2  # neither retried
        assert _fetcher(max_bytes=10_000).fetch(url + "/big") == "x" * 5000


def test_plain_text_is_returned_and_an_image_is_refused():
    with serving([(200, "text/plain; charset=utf-8", b"line one\nline two"),
                  (200, "image/png", b"\x89PNG\r\n")]) as (url, requests):
        assert _fetcher(max_chars=12).fetch(url + "/a.txt") == "line one\nlin"
        with pytest.raises(WebError, match="content type 'image/png' has no text to read"):
            _fetcher().fetch(url + "/b.png")
    assert len(requests) == 2


def test_only_http_urls_and_4xx_not_retried():
    with pytest.raises(WebError, match="only http and https.*'file'"):
        _fetcher().fetch("file:///etc/passwd")
    with serving([(404, "text/html", b"gone")]) as (url, requests):
        with pytest.raises(WebError, match="404 Not Found: gone"):
            _fetcher(retries=3).fetch(url + "/missing")
    assert len(requests) == 1


def test_a_5xx_is_retried_and_the_cache_serves_the_second_fetch(tmp_path):
    cache = str(tmp_path / "pages")
    with serving([(502, "text/plain", b"bad gateway"), (200, "text/html", PAGE)]) as (url, requests):
        first = _fetcher(cache_dir=cache).fetch(url + "/about")
        assert len(requests) == 2 and "builds robots" in first
        assert _fetcher(cache_dir=cache).fetch(url + "/about") == first
        assert len(requests) == 2
    [saved] = os.listdir(cache)
    assert saved.endswith(".html") and (tmp_path / "pages" / saved).read_bytes() == PAGE
