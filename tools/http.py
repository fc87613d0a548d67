"""Downloading a URL the way every web tool does: redirects followed (bounded), timeouts, a size limit, and
public addresses only.

Every request — the first and each redirect — is checked before it is sent: a host that resolves to a loopback,
private, link-local, multicast or otherwise non-global address (``localhost``, ``10.0.0.5``, ``169.254.169.254``,
``[::1]``, ``0.0.0.0``, …) is refused with a :class:`FetchError`, so a model steered by a web page cannot reach
the machine's own services (a graph database's HTTP port, a cloud metadata endpoint) through the web tools.
``KGAGENTS_ALLOW_PRIVATE_URLS=1`` lifts the check, ``KGAGENTS_ALLOWED_HOSTS`` lifts it for some hosts, and the
hosts of the API bases the user configured are always allowed (:class:`FetchLimits`). The address is resolved
for the check and again by the connection, so a DNS server that changes its answer in between is not stopped.
Where a proxy is configured (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``: httpx uses them), the proxy
resolves the name itself, to addresses the check never saw: a host that does not resolve here is then refused
(:func:`unresolved_refusal`) instead of being left to the connection, which would hand it to the proxy.

A page larger than the limit is refused when the server says so up front (``Content-Length``) and cut at the
limit otherwise; a page that never ends stops at the limit or at the total time limit, keeping what arrived.
Failures that retrying may fix (connection errors, 429 and 5xx answers, a server that sends nothing) raise
:class:`TransientFetchError`; the others raise :class:`FetchError`, a :class:`~kgagents.tools.base.ToolFailure`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
import socket
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.message import Message
from typing import Any
from urllib.parse import unquote, urlparse
from urllib.request import getproxies

import httpx

from kgagents.core.config import get_settings
from kgagents.core.errors import KGAgentsError
from kgagents.core.retry import TRANSIENT_STATUS
from kgagents.tools.base import ToolFailure

DEFAULT_USER_AGENT = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
                      "Chrome/124.0 Safari/537.36 kgagents/0.1")


@dataclass(frozen=True)
class FetchLimits:
    """Limits of one download. Tools read them from ``ToolEnv.extra["fetch_limits"]`` (else these defaults)."""

    max_bytes: int = 10 * 1024 * 1024
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 30.0
    total_timeout_s: float = 60.0
    max_redirects: int = 10
    user_agent: str = DEFAULT_USER_AGENT
    headers: dict[str, str] = field(default_factory=dict)
    allow_private: bool = field(default_factory=lambda: get_settings().allow_private_urls)
    """Fetch loopback, private and link-local addresses too (``KGAGENTS_ALLOW_PRIVATE_URLS``)."""
    allowed_hosts: tuple[str, ...] = field(default_factory=lambda: get_settings().allowed_hosts)
    """``host`` or ``host:port`` entries fetched whatever their address (``KGAGENTS_ALLOWED_HOSTS`` and the
    configured API bases)."""


def limits_of(extra: dict[str, Any] | None) -> FetchLimits:
    """The fetch limits of a run (``extra["fetch_limits"]``, a :class:`FetchLimits` or a mapping)."""
    given = (extra or {}).get("fetch_limits")
    if isinstance(given, FetchLimits):
        return given
    if isinstance(given, dict):
        return FetchLimits(**given)
    return FetchLimits()


class FetchError(ToolFailure):
    """A download failed in a way that retrying will not fix (404, too large, not a web address)."""


class TransientFetchError(KGAgentsError, RuntimeError):
    """A download failed in a way that may pass (connection refused, 429, 5xx); tools retry these."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


@dataclass
class Fetched:
    """What a download gave."""

    url: str
    """The final address, after redirects."""
    status: int
    mimetype: str
    """The content type without parameters, lower case (``""`` when the server sent none)."""
    charset: str | None
    content: bytes
    filename: str | None = None
    truncated: bool = False
    """The body was cut at :attr:`FetchLimits.max_bytes`."""
    timed_out: bool = False
    """The body was cut at :attr:`FetchLimits.total_timeout_s`."""

    def note(self, limits: FetchLimits) -> str:
        """A one-line remark about a cut body (empty when the body is complete)."""
        if self.truncated:
            return f"[Note: only the first {_mb(limits.max_bytes)} of this resource were downloaded (size limit).]"
        if self.timed_out:
            return (f"[Note: the download stopped after {limits.total_timeout_s:g} s (time limit); "
                    f"{_mb(len(self.content))} arrived.]")
        return ""


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


def check_web_url(url: str) -> str:
    """``url`` stripped, if it is an http(s) address; :class:`FetchError` otherwise."""
    url = (url or "").strip()
    parsed = urlparse(url)
    if parsed.scheme.lower() not in {"http", "https"} or not parsed.netloc:
        raise FetchError(f"not a web address (http/https): {url!r}")
    return url


#: IPv6 prefixes whose last 32 bits are an IPv4 address the packet goes to: IPv4-mapped (``::ffff:a.b.c.d``),
#: IPv4-translated (SIIT, RFC 2765: ``::ffff:0:a.b.c.d``), NAT64's well-known prefix (RFC 6052:
#: ``64:ff9b::a.b.c.d``, which a NAT64 gateway sends on to that IPv4 address) and the deprecated IPv4-compatible
#: form (``::a.b.c.d``).
_IPV4_IN_LAST_32_BITS = tuple(ipaddress.IPv6Network(net) for net in
                              ("::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96", "::/96"))
#: NAT64's local-use prefix (RFC 8215): where the IPv4 address sits depends on the network's own prefix length,
#: and it is local by definition.
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries to (:data:`_IPV4_IN_LAST_32_BITS`, and 6to4's ``2002:a.b.c.d::``,
    RFC 3056), or ``None``. ``ipaddress`` calls most of these global whatever they carry: ``64:ff9b::a00:5``
    reaches 10.0.0.5 through a NAT64 gateway."""
    if ip.sixtofour is not None:
        return ip.sixtofour
    for network in _IPV4_IN_LAST_32_BITS:
        if ip in network:
            return ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
    return None


def _non_global(address: str) -> bool:
    """Whether a resolved or literal address is one the web tools refuse: loopback, private, link-local,
    multicast or otherwise not global, also when an IPv6 address carries such an IPv4 address
    (:func:`embedded_ipv4`) or lies in NAT64's local-use prefix."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _LOCAL_NAT64:
            return True
        inner = embedded_ipv4(ip)
        if inner is not None:
            return not inner.is_global or inner.is_multicast
    return not ip.is_global or ip.is_multicast


def proxy_for(scheme: str, proxies: Mapping[str, str]) -> str | None:
    """The proxy a request of ``scheme`` may be sent through, from the environment's proxy settings as
    :func:`urllib.request.getproxies` reads them (httpx reads the same): ``<scheme>_proxy``, else
    ``all_proxy``; ``None`` when there is none. ``no_proxy`` is not consulted: a host it names goes to the
    connection directly, where a name that does not resolve fails anyway."""
    return proxies.get(scheme.lower()) or proxies.get("all") or None


def unresolved_refusal(url: str, host: str, proxy: str | None) -> str | None:
    """Why a request to ``host``, which does not resolve here, is refused: only when it would go to ``proxy``,
    which resolves names itself (possibly to the loopback or private addresses the check exists to refuse).
    ``None``: no proxy, so the connection fails on the name and nothing is sent."""
    if proxy is None:
        return None
    shown = httpx.URL(proxy if "://" in proxy else f"http://{proxy}").host or proxy
    return (f"refused to fetch {url}: {host} does not resolve here, and the request would go to the proxy at "
            f"{shown}, which could resolve it to a loopback or private address; the web tools fetch public "
            "addresses only (KGAGENTS_ALLOWED_HOSTS or KGAGENTS_ALLOW_PRIVATE_URLS=1 allow more)")


async def check_public(url: httpx.URL, limits: FetchLimits) -> None:
    """Refuse (:class:`FetchError`) a request to a host that resolves to a non-public address, unless the limits
    allow it (see the module docstring). A host that does not resolve is left to the connection to report, unless
    a proxy is configured (:func:`unresolved_refusal`)."""
    host = (url.host or "").lower()
    port = url.port or (443 if url.scheme == "https" else 80)
    if limits.allow_private or host in limits.allowed_hosts or f"{host}:{port}" in limits.allowed_hosts:
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        refusal = unresolved_refusal(str(url), host, proxy_for(url.scheme, getproxies()))
        if refusal is not None:
            raise FetchError(refusal) from None
        return
    blocked = sorted({str(info[4][0]) for info in infos if _non_global(str(info[4][0]))})
    if blocked:
        raise FetchError(f"refused to fetch {url}: {host} is a loopback, private or link-local address "
                         f"({', '.join(blocked)}); the web tools fetch public addresses only "
                         "(KGAGENTS_ALLOWED_HOSTS or KGAGENTS_ALLOW_PRIVATE_URLS=1 allow more)")


def _content_type(headers: httpx.Headers) -> tuple[str, str | None]:
    raw = headers.get("content-type", "")
    if not raw:
        return "", None
    msg = Message()
    msg["content-type"] = raw
    mimetype = msg.get_content_type().lower() if "/" in raw else raw.split(";")[0].strip().lower()
    charset = msg.get_param("charset")
    return mimetype, (str(charset) if charset else None)


def _filename(headers: httpx.Headers, url: str) -> str | None:
    disposition = headers.get("content-disposition", "")
    match = re.search(r"filename\*?=(?:UTF-8'')?\"?([^\";]+)\"?", disposition, re.IGNORECASE)
    if match:
        return unquote(match.group(1)).strip() or None
    name = unquote(urlparse(url).path.rsplit("/", 1)[-1])
    return name or None


async def fetch(url: str, limits: FetchLimits | None = None, *, params: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> Fetched:
    """Download ``url`` (GET) within ``limits``; see the module docstring for what fails how."""
    limits = limits or FetchLimits()
    url = check_web_url(url)
    timeout = httpx.Timeout(limits.read_timeout_s, connect=limits.connect_timeout_s)
    all_headers = {"User-Agent": limits.user_agent, "Accept-Encoding": "gzip, deflate", **limits.headers,
                   **(headers or {})}

    async def guard(request: httpx.Request) -> None:  # the first request and every redirect
        await check_public(request.url, limits)

    try:
        client = httpx.AsyncClient(follow_redirects=True, max_redirects=limits.max_redirects, timeout=timeout,
                                   headers=all_headers, event_hooks={"request": [guard]})
    except ImportError as exc:  # a proxy of the environment that needs a package (socks5:// needs socksio)
        raise FetchError(f"cannot fetch {url} through the proxy set in the environment (HTTP_PROXY, HTTPS_PROXY, "
                         f"ALL_PROXY): {exc}") from exc
    try:
        async with client, client.stream("GET", url, params=params) as response:
            return await _read(response, limits)
    except httpx.TooManyRedirects as exc:
        raise FetchError(f"too many redirects (more than {limits.max_redirects}) from {url}") from exc
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise FetchError(f"cannot fetch {url}: {exc}") from exc
    except httpx.TimeoutException as exc:
        raise TransientFetchError(f"timed out fetching {url} ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise TransientFetchError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from exc


async def _read(response: httpx.Response, limits: FetchLimits) -> Fetched:
    final_url = str(response.url)
    status = response.status_code
    if status >= 400:
        reason = response.reason_phrase or ""
        if status in TRANSIENT_STATUS:
            raise TransientFetchError(f"HTTP {status} {reason} from {final_url}", status)
        raise FetchError(f"HTTP {status} {reason} from {final_url}")
    mimetype, charset = _content_type(response.headers)
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limits.max_bytes:
        raise FetchError(f"{final_url} is {_mb(int(declared))}, over the download limit of "
                         f"{_mb(limits.max_bytes)}; it was not downloaded")
    chunks: list[bytes] = []
    size = 0
    truncated = timed_out = False
    deadline = time.monotonic() + limits.total_timeout_s

    async def consume() -> None:
        nonlocal size, truncated
        async for chunk in response.aiter_raw():
            if size + len(chunk) > limits.max_bytes:
                chunks.append(chunk[: limits.max_bytes - size])
                size = limits.max_bytes
                truncated = True
                return
            chunks.append(chunk)
            size += len(chunk)
            if time.monotonic() > deadline:
                raise TimeoutError

    try:
        await asyncio.wait_for(consume(), timeout=max(0.01, deadline - time.monotonic()))
    except TimeoutError:
        timed_out = True
    except httpx.ReadTimeout:
        if not chunks:
            raise
        timed_out = True
    if timed_out and not chunks:
        raise TransientFetchError(f"{final_url} sent nothing within {limits.total_timeout_s:g} s")
    content = b"".join(chunks)
    encoding = response.headers.get("content-encoding", "").lower()
    if encoding and encoding != "identity":
        content = _decode_content(content, encoding, limits.max_bytes)
    return Fetched(url=final_url, status=status, mimetype=mimetype, charset=charset, content=content,
                   filename=_filename(response.headers, final_url), truncated=truncated, timed_out=timed_out)


def _decode_content(data: bytes, encoding: str, max_bytes: int) -> bytes:
    """Undo gzip/deflate on a (possibly cut) body, without letting it grow past ``max_bytes``."""

    if encoding in {"gzip", "x-gzip", "deflate"}:
        wbits = 16 + zlib.MAX_WBITS if "gzip" in encoding else zlib.MAX_WBITS
        try:
            decoder = zlib.decompressobj(wbits)
            out = decoder.decompress(data, max_bytes)
        except zlib.error:
            try:
                out = zlib.decompressobj(-zlib.MAX_WBITS).decompress(data, max_bytes)
            except zlib.error as exc:
                raise FetchError(f"cannot decode the {encoding} response: {exc}") from exc
        return out
    raise FetchError(f"the server answered with an unsupported content encoding {encoding!r}")


async def download(url: str, limits: FetchLimits | None = None) -> Fetched:
    """Download a whole file (for the file tools): a download cut by a limit is a :class:`FetchError`,
    because a partial file would be read wrongly."""
    limits = limits or FetchLimits()
    got = await fetch(url, limits)
    if got.truncated or got.timed_out:
        raise FetchError(f"{url}: {got.note(limits)} The file is incomplete and was not read.")
    return got


async def fetch_json(url: str, limits: FetchLimits | None = None, *, params: dict[str, Any] | None = None) -> Any:
    """Download ``url`` and parse it as JSON (:class:`FetchError` when it is not JSON)."""

    got = await fetch(url, limits, params=params, headers={"Accept": "application/json"})
    if got.truncated:
        raise FetchError(f"the JSON answer of {got.url} is larger than the download limit")
    try:
        return json.loads(got.content.decode(got.charset or "utf-8", errors="replace"))
    except ValueError as exc:
        raise FetchError(f"{got.url} did not answer with JSON: {got.content[:200]!r}") from exc
