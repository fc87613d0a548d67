"""Downloads: redirects, limits, timeouts and failures, against the loopback fixture server."""

from __future__ import annotations

import time

import pytest

from kgagents.tools.base import ToolFailure
from kgagents.tools.http import FetchError, FetchLimits, TransientFetchError, download, fetch, fetch_json
from tests.tools.conftest import TEST_LIMITS


async def test_fetch_page_and_content_type(web):
    got = await fetch(web.url("/files/article.html"), TEST_LIMITS)
    assert got.status == 200 and got.mimetype == "text/html" and got.charset == "utf-8"
    assert b"Lake Vornhal" in got.content and not got.truncated and got.filename == "article.html"


@pytest.mark.slow
async def test_redirects_are_followed_and_bounded(web):
    got = await fetch(web.url("/redirect"), TEST_LIMITS)
    assert got.url.endswith("/files/article.html")
    with pytest.raises(FetchError, match="too many redirects"):
        await fetch(web.url("/redirect-loop"), TEST_LIMITS)


@pytest.mark.slow
async def test_http_errors_are_classified(web):
    with pytest.raises(FetchError, match="HTTP 404"):
        await fetch(web.url("/status/404"), TEST_LIMITS)
    with pytest.raises(TransientFetchError, match="HTTP 503") as info:
        await fetch(web.url("/status/503"), TEST_LIMITS)
    assert info.value.status_code == 503
    assert isinstance(FetchError("x"), ToolFailure)


async def test_only_web_addresses(web):
    for url in ["file:///etc/passwd", "ftp://example.org/x", "javascript:alert(1)", "not a url"]:
        with pytest.raises(FetchError, match="not a web address"):
            await fetch(url, TEST_LIMITS)


async def test_unreachable_server_is_transient():
    from tests.fakes import closed_port

    with pytest.raises(TransientFetchError, match="cannot reach"):
        await fetch(f"http://127.0.0.1:{closed_port()}/", TEST_LIMITS)


@pytest.mark.slow
async def test_declared_50_mb_page_is_refused_without_downloading(web):
    start = time.monotonic()
    with pytest.raises(FetchError, match=r"50\.0 MB, over the download limit of 1\.0 MB"):
        await fetch(web.url("/big"), TEST_LIMITS)
    assert time.monotonic() - start < 2


async def test_undeclared_big_page_is_cut_at_the_limit(web):
    got = await fetch(web.url("/big-chunked"), TEST_LIMITS)
    assert got.truncated and len(got.content) == TEST_LIMITS.max_bytes
    assert "size limit" in got.note(TEST_LIMITS)


async def test_never_ending_page_stops_at_the_limit(web):
    start = time.monotonic()
    got = await fetch(web.url("/endless"), TEST_LIMITS)
    assert got.truncated and len(got.content) == TEST_LIMITS.max_bytes
    assert time.monotonic() - start < 5


@pytest.mark.slow
async def test_trickling_page_stops_at_the_time_limit(web):
    limits = FetchLimits(max_bytes=1024 * 1024, read_timeout_s=5, total_timeout_s=0.6)
    start = time.monotonic()
    got = await fetch(web.url("/slow"), limits)
    assert got.timed_out and not got.truncated
    assert b"first part of a slow page" in got.content
    assert "time limit" in got.note(limits)
    assert time.monotonic() - start < 3


async def test_download_refuses_cut_files(web):
    with pytest.raises(FetchError, match="incomplete"):
        await download(web.url("/endless"), TEST_LIMITS)


async def test_gzip_bodies_are_decoded(web):
    got = await fetch(web.url("/gzip"), TEST_LIMITS)
    assert b"Compressed page body" in got.content


async def test_fetch_json(web):
    data = await fetch_json(web.url("/search"), TEST_LIMITS, params={"q": "lake"})
    assert data["organic_results"][0]["title"].startswith("Lake Vornhal")
    with pytest.raises(FetchError, match="did not answer with JSON"):
        await fetch_json(web.url("/files/article.html"), TEST_LIMITS)
