"""The web tools fetch public addresses only: a URL (or a redirect) to a loopback, private, link-local or
otherwise non-global address is refused before anything is sent, unless the user allows it."""

from __future__ import annotations

import httpx
import pytest

from kgagents.core.config import allowed_hosts
from kgagents.tools.http import FetchError, FetchLimits, check_public, fetch
from tests.tools.server import FixtureServer


@pytest.fixture(autouse=True)
def public_only(monkeypatch):
    monkeypatch.delenv("KGAGENTS_ALLOW_PRIVATE_URLS", raising=False)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:9/x", "http://localhost:9/", "http://[::1]:9/", "http://0.0.0.0:9/", "http://10.1.2.3/",
    "http://192.168.0.1/admin", "http://172.16.5.4/", "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:127.0.0.1]:9/", "http://2130706433:9/", "http://100.64.0.1/", "http://224.0.0.1/",
])
async def test_non_public_addresses_are_refused(url):
    with pytest.raises(FetchError, match=r"refused to fetch .* public addresses only"):
        await check_public(httpx.URL(url), FetchLimits())


async def test_public_addresses_pass_the_check():
    await check_public(httpx.URL("http://93.184.216.34/"), FetchLimits())  # an address literal: no DNS lookup


@pytest.mark.slow
async def test_a_redirect_to_a_private_address_is_refused_before_it_is_followed():
    server = FixtureServer().start()
    other = FixtureServer().start()
    try:
        host = server.base.split("//", 1)[1]
        limits = FetchLimits(allowed_hosts=(host,))  # the first server only
        assert b"<h1>" in (await fetch(server.url("/files/article.html"), limits)).content
        with pytest.raises(FetchError, match=r"refused to fetch http://127.0.0.1"):
            await fetch(server.url(f"/redirect-to?url={other.url('/files/article.html')}"), limits)
        assert other.requests == []  # nothing reached the second server
    finally:
        server.stop()
        other.stop()


@pytest.mark.slow
async def test_the_user_opens_loopback_or_some_hosts(monkeypatch):
    server = FixtureServer().start()
    try:
        with pytest.raises(FetchError, match="refused"):
            await fetch(server.url("/files/article.html"))
        monkeypatch.setenv("KGAGENTS_ALLOWED_HOSTS", server.base.split("//", 1)[1])
        assert (await fetch(server.url("/files/article.html"))).status == 200
        monkeypatch.delenv("KGAGENTS_ALLOWED_HOSTS")
        monkeypatch.setenv("KGAGENTS_ALLOW_PRIVATE_URLS", "1")
        assert (await fetch(server.url("/files/article.html"))).status == 200
    finally:
        server.stop()


def test_configured_api_bases_are_allowed_hosts():
    assert allowed_hosts("Wiki.local:8080, mirror", "http://127.0.0.1:5000/search", None, "https://api.x") == (
        "wiki.local:8080", "mirror", "127.0.0.1:5000", "api.x:443")
