"""The web tools fetch public addresses only: a URL (or a redirect) to a loopback, private, link-local or
otherwise non-global address is refused before anything is sent, unless the user allows it."""

from __future__ import annotations

import ipaddress
import socketserver
import threading

import httpx
import pytest

from kgagents.core.config import allowed_hosts
from kgagents.tools.http import (
    FetchError,
    FetchLimits,
    _non_global,
    check_public,
    embedded_ipv4,
    fetch,
    proxy_for,
    unresolved_refusal,
)
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


class RecordingProxy:
    """A forward proxy on loopback that records the request line of every request it gets and answers each
    with a page of its own (it connects nowhere): a request that reached it is one the guard let through."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline(65536).decode("latin-1").strip()
                while self.rfile.readline(65536).strip():
                    pass
                proxy.requests.append(line)
                body = b"via the proxy"
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(monkeypatch):
    server = RecordingProxy()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "no_proxy", "KGAGENTS_ALLOWED_HOSTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url)
    monkeypatch.setenv("HTTPS_PROXY", server.url)
    yield server
    server.stop()


#: A name no resolver knows (RFC 2606): only the proxy would make something of it.
UNRESOLVABLE = "kgagents-internal.invalid"


@pytest.mark.parametrize("url", [f"http://{UNRESOLVABLE}/admin", f"https://{UNRESOLVABLE}:8443/admin",
                                 "http://10.0.0.5/", "http://localhost:9/", "http://[::1]:9/"])
async def test_behind_a_proxy_names_that_do_not_resolve_here_and_private_addresses_never_reach_it(proxy, url):
    with pytest.raises(FetchError, match=r"refused to fetch .* public addresses only") as refused:
        await fetch(url)
    if UNRESOLVABLE in url:
        assert "does not resolve here" in str(refused.value) and "the proxy at 127.0.0.1" in str(refused.value)
    assert proxy.requests == []


async def test_the_proxy_is_used_for_what_the_guard_lets_through(proxy, monkeypatch):
    """The refusals above are no accident of a proxy that was never used: a public address (a literal: no DNS)
    goes to it, and so does the unresolvable name once the user allows that host."""
    got = await fetch("http://93.184.216.34/page")
    assert got.content == b"via the proxy" and proxy.requests == ["GET http://93.184.216.34/page HTTP/1.1"]
    monkeypatch.setenv("KGAGENTS_ALLOWED_HOSTS", UNRESOLVABLE)
    assert (await fetch(f"http://{UNRESOLVABLE}/admin")).content == b"via the proxy"
    assert proxy.requests[-1] == f"GET http://{UNRESOLVABLE}/admin HTTP/1.1"


async def test_no_proxy_and_all_proxy_do_not_open_a_way_round_the_guard(proxy, monkeypatch):
    monkeypatch.setenv("NO_PROXY", f"{UNRESOLVABLE},localhost")  # these would go direct: still nothing is sent
    for url in (f"http://{UNRESOLVABLE}/", "http://localhost:9/"):
        with pytest.raises(FetchError, match="refused to fetch"):
            await fetch(url)
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.setenv("ALL_PROXY", proxy.url)  # the proxy for every scheme
    with pytest.raises(FetchError, match="does not resolve here"):
        await fetch(f"http://{UNRESOLVABLE}/")
    assert proxy.requests == []


def test_which_proxy_a_request_goes_to_and_when_an_unresolved_name_is_refused():
    assert proxy_for("https", {"https": "http://p:1", "all": "http://a:2"}) == "http://p:1"
    assert proxy_for("HTTP", {"https": "http://p:1", "all": "http://a:2"}) == "http://a:2"
    assert proxy_for("http", {"https": "http://p:1", "no": "x"}) is None
    assert unresolved_refusal("http://x.invalid/", "x.invalid", None) is None  # the connection fails on the name
    refusal = unresolved_refusal("http://x.invalid/", "x.invalid", "http://user:pw@proxy.corp:3128")
    assert refusal is not None and "proxy at proxy.corp" in refusal and "pw" not in refusal
    assert "x.invalid does not resolve here" in (unresolved_refusal("u", "x.invalid", "proxy.corp:3128") or "")


#: IPv6 literals that carry a private, link-local or loopback IPv4 address in a prefix that ``ipaddress`` calls
#: global: NAT64's well-known prefix (RFC 6052: a NAT64 gateway sends 64:ff9b::a00:5 on to 10.0.0.5), 6to4
#: (RFC 3056), SIIT's IPv4-translated form (RFC 2765), the IPv4-compatible form, and NAT64's local-use prefix.
EMBEDDED_IPV4 = ["http://[64:ff9b::a00:5]/admin", "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
                 "http://[2002:a9fe:a9fe::]/latest/meta-data/", "http://[::ffff:0:a9fe:a9fe]/",
                 "http://[::7f00:1]:9/", "http://[64:ff9b:1::a00:5]/"]


@pytest.mark.parametrize("url", EMBEDDED_IPV4)
async def test_ipv6_literals_that_carry_a_private_ipv4_address_never_reach_the_proxy(proxy, url):
    with pytest.raises(FetchError, match=r"refused to fetch .* public addresses only"):
        await fetch(url)
    assert proxy.requests == []


def test_the_ipv4_address_an_ipv6_address_carries():
    """The IPv4 address is judged, not the IPv6 prefix around it: a public one passes (an IPv6-only network
    reaches public IPv4 hosts through NAT64)."""
    cases = {"64:ff9b::a00:5": "10.0.0.5", "2002:a9fe:a9fe::1": "169.254.169.254", "::ffff:0:7f00:1": "127.0.0.1",
             "::ffff:8.8.8.8": "8.8.8.8", "::7f00:1": "127.0.0.1", "2001:db8::1": None, "2606:4700::1111": None}
    for address, inner in cases.items():
        got = embedded_ipv4(ipaddress.IPv6Address(address))
        assert (str(got) if got is not None else None) == inner, address
    assert not _non_global("64:ff9b::808:808") and not _non_global("2002:808:808::")
    assert not _non_global("::ffff:8.8.8.8") and not _non_global("2606:4700::1111")
    assert _non_global("64:ff9b::a00:5") and _non_global("64:ff9b:1::808:808") and _non_global("::ffff:0:a00:5")


async def test_a_socks_proxy_without_its_package_is_a_clear_tool_error(monkeypatch):
    """``ALL_PROXY=socks5://…`` needs httpx's ``socksio``: without it a web tool fails with a
    :class:`FetchError` the model reads, not an ImportError from inside httpx; nothing is sent."""
    try:
        import socksio  # noqa: F401  # pyright: ignore[reportMissingImports]  (only its absence is tested)
        pytest.skip("socksio is installed: httpx speaks SOCKS here")
    except ImportError:
        pass
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1")
    with pytest.raises(FetchError, match=r"cannot fetch http://93.184.216.34/ through the proxy set in the "
                                         r"environment .*socksio"):
        await fetch("http://93.184.216.34/")
