"""Security review of the SSRF guard behind a proxy (branch review-sandbox): reproductions. A FAILING test is a
finding; the recording proxy of tests/tools/test_url_guard.py shows what reached it."""

from __future__ import annotations

import pytest

from kgagents.tools.http import FetchError, fetch
from tests.tools.test_url_guard import proxy  # noqa: F401 - the fixture

#: IPv6 literals that carry a private, link-local or loopback IPv4 address in a translation prefix that
#: ``ipaddress`` calls global: NAT64's well-known prefix (RFC 6052; an IPv6-only VPC with a NAT64 gateway routes
#: 64:ff9b::a00:5 to 10.0.0.5), 6to4 (RFC 3056), and SIIT's IPv4-translated form (RFC 2765).
EMBEDDED_IPV4 = ["http://[64:ff9b::a00:5]/admin", "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
                 "http://[2002:a9fe:a9fe::]/latest/meta-data/", "http://[::ffff:0:a9fe:a9fe]/"]


@pytest.mark.parametrize("url", EMBEDDED_IPV4)
async def test_ipv6_literals_that_embed_a_private_ipv4_address_never_reach_the_proxy(proxy, url):  # noqa: F811
    """docs/security.md: "Private and loopback addresses, literal or resolved here, are refused as without a proxy,
    so the proxy is never asked for them". ``_non_global`` unwraps only ``::ffff:a.b.c.d``; these spellings of
    10.0.0.5 and 169.254.169.254 pass and are sent to the proxy (and, without a proxy, to the connection)."""
    try:
        await fetch(url)
    except FetchError as exc:
        assert "refused to fetch" in str(exc)
    assert proxy.requests == [], f"reached the proxy: {proxy.requests}"


async def test_a_socks_proxy_gives_a_clear_tool_error(monkeypatch):
    """``ALL_PROXY=socks5://…`` (httpx without ``socksio``): every web tool call fails with a bare ImportError
    from inside httpx instead of a :class:`FetchError` the model can read. Nothing is sent (no SSRF)."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1")
    with pytest.raises(FetchError):
        await fetch("http://93.184.216.34/")
