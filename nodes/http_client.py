"""The HTTP client of the OpenAI-compatible chat models: the OpenAI SDK's aiohttp backend, one pool per event loop.

The SDK's default async client (httpx) walks every pooled connection, probing its socket, whenever a request
starts or ends; with the tens to hundreds of calls a batch evaluation keeps in flight that walk costs more CPU
than the rest of the call's HTTP work (``kgagents.evals.bench_batch``: 1.3 ms of a 3.2 ms call at 320 calls in flight).
The SDK's aiohttp backend (``openai.DefaultAioHttpClient``, documented by the SDK for high concurrency) takes an
idle connection in constant time. Requests, responses and errors reach the SDK as httpx objects either way
(aiohttp's errors mapped to httpx's), so the SDK's error classes, and our retries, stay the same.

An aiohttp session belongs to the event loop that opened it, while a chat model is cached per process and may
serve several loops (one per CLI command, per test, per worker thread): :class:`LoopLocalTransport` keeps one
transport per running loop and closes the ones whose loop has ended. Proxies from the environment
(``HTTPS_PROXY`` ...) are honoured as by the default client.

The per-loop pools rest on private parts of httpx (the client's ``_init_transport``, ``_init_proxy_transport`` and
``_transport``) and of aiohttp (a connector's ``_close``), listed in docs/dependencies.md. Each falls back to the
public path where it fails, when the model is built or at call time, and says so once
(:mod:`kgagents.core.third_party`): a client built otherwise is the SDK's default client over httpx's own
transport (``httpx2.AsyncHTTPTransport``), given through public API as a :class:`LoopLocalTransport`, so a cached
model still keeps one pool per loop; a loop whose aiohttp transport cannot be made gets httpx's own transport
(``httpx2.AsyncHTTPTransport``, what the SDK's default client uses) with the same settings, as does a loop whose
aiohttp transport fails its first request with a programming error (a library under it changed), that request
sent again once; a pool that cannot be closed at once is left to the garbage collector.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import urllib.request
import weakref
from collections.abc import Callable
from typing import Any

import httpx2
from openai import DEFAULT_CONNECTION_LIMITS, DefaultAioHttpClient, DefaultAsyncHttpxClient, DefaultHttpxClient

from kgagents.core.scripted import CALL_STAGE, STAGE_HEADER, STAGE_HEADER_VARIABLE
from kgagents.core.third_party import PrivatePart, fell_back, private_part

_HTTPX = "2.16.2"
INIT_TRANSPORT = private_part(
    "httpx2", "AsyncClient._init_transport", tested=_HTTPX,
    fallback="the SDK's default client over httpx's own transport, one pool per event loop, when a model "
             "is built; at call time httpx's own transport (httpx2.AsyncHTTPTransport) with the same settings")
INIT_PROXY_TRANSPORT = private_part(
    "httpx2", "AsyncClient._init_proxy_transport", tested=_HTTPX,
    fallback="the SDK's default client over httpx's own transport, one pool per event loop, when a model "
             "is built; at call time httpx's own proxy transport (httpx2.AsyncHTTPTransport(proxy=...)) with "
             "the same settings")
TRANSPORT = private_part("httpx2", "AsyncClient._transport", tested=_HTTPX,
                         fallback="the SDK's default client over httpx's own transport, one pool per event loop")
CONNECTOR_CLOSE = private_part(
    "aiohttp", "BaseConnector._close", tested="3.14.5",
    fallback="the pool of an ended event loop is left to the garbage collector (its sockets close when collected)")


#: Whether a chat model's client follows a redirect: never. The SDK's clients follow them, to any host: a
#: completion answered with a redirect elsewhere would post the whole prompt to a host nobody configured (httpx
#: keeps the key back, not the prompt). Unfollowed, a redirect is an error that names where it points
#: (:class:`kgagents.core.failures.FailureKind` ``REDIRECT``): the base URL to set instead.
FOLLOW_REDIRECTS = False

#: What a private transport raises on a loop's first request when a library under it changed (a renamed keyword or
#: attribute): a programming error, never an HTTP or network error (those reach the SDK as they are).
DRIFT_ERRORS = (TypeError, AttributeError)


class LoopLocalTransport(httpx2.AsyncBaseTransport):
    """A transport per running event loop, each made by ``factory`` on the loop's first request.

    ``factory`` rests on the private ``part`` of a library; where it fails, the loop gets the transport ``public``
    makes (the public path) and the fallback is said once."""

    def __init__(self, factory: Callable[[], httpx2.AsyncBaseTransport],
                 public: Callable[[], httpx2.AsyncBaseTransport] | None = None,
                 part: PrivatePart = INIT_TRANSPORT) -> None:
        self._factory = factory
        self._public = public
        self._part = part
        self._transports: dict[asyncio.AbstractEventLoop, httpx2.AsyncBaseTransport] = {}
        #: The loops whose transport has answered a request, or is the public one: no fallback is tried there.
        self._settled: set[asyncio.AbstractEventLoop] = set()
        self._lock = threading.Lock()
        # A model that is let go (or the process ending) closes its pools, so that aiohttp has no unclosed
        # session to report on a loop that may have ended.
        weakref.finalize(self, _discard_all, self._transports)

    def current(self) -> httpx2.AsyncBaseTransport:
        """The running loop's transport (made now if it has none); ended loops' transports are let go."""
        loop = asyncio.get_running_loop()
        transport = self._transports.get(loop)
        if transport is not None:
            return transport
        with self._lock:
            for old in [old for old in self._transports if old.is_closed()]:
                _discard(self._transports.pop(old))
                self._settled.discard(old)
            transport = self._transports.get(loop)
            if transport is None:
                transport = self._transports[loop] = self._made()
        return transport

    def _made(self) -> httpx2.AsyncBaseTransport:
        """A new transport from the factory, or from the public path where the factory fails."""
        if self._public is None:
            return self._factory()
        try:
            made = self._factory()
        except Exception as exc:  # noqa: BLE001 - a drifted private part: the public transport serves the loop
            fell_back(self._part, exc)
        else:
            if isinstance(made, httpx2.AsyncBaseTransport):
                return made
            fell_back(self._part, f"it made a {type(made).__name__}, not an httpx transport")
        return self._public_for(asyncio.get_running_loop())

    def _public_for(self, loop: asyncio.AbstractEventLoop) -> httpx2.AsyncBaseTransport:
        assert self._public is not None
        self._settled.add(loop)
        return self._public()

    def _instead(self, loop: asyncio.AbstractEventLoop, failed: httpx2.AsyncBaseTransport,
                 exc: Exception) -> httpx2.AsyncBaseTransport:
        """The public transport for ``loop`` in place of ``failed``, whose first request raised ``exc`` (said
        once); a transport another request put in its place already is kept."""
        with self._lock:
            transport = self._transports.get(loop)
            if transport is failed or transport is None:
                fell_back(self._part, exc)
                transport = self._transports[loop] = self._public_for(loop)
                _discard(failed)
        return transport

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if os.environ.get(STAGE_HEADER_VARIABLE) == "1":  # scripted test servers only (kgagents.core.scripted)
            stage = CALL_STAGE.get()
            if stage:
                request.headers[STAGE_HEADER] = stage
        transport = self.current()
        loop = asyncio.get_running_loop()
        if self._public is None or loop in self._settled:
            return await transport.handle_async_request(request)
        try:
            response = await transport.handle_async_request(request)
        except DRIFT_ERRORS as exc:
            # Before a loop's first answer, a programming error (not an HTTP or network error) is the private
            # transport's: a library under it that changed (an aiohttp keyword renamed). The public transport
            # serves the loop from now on, and this request is sent again through it, once.
            return await self._instead(loop, transport, exc).handle_async_request(request)
        self._settled.add(loop)
        return response

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            transport = self._transports.pop(loop, None)
            self._settled.discard(loop)
        if transport is not None:
            await transport.aclose()

    @property
    def loops(self) -> int:
        """How many event loops hold a transport now (for tests)."""
        return len(self._transports)


def _discard_all(transports: dict[Any, Any]) -> None:
    while transports:
        _discard(transports.popitem()[1])


def _discard(transport: Any) -> None:
    """Let go of a transport without awaiting anything (its loop may have ended): its pool closed at once."""
    session = getattr(transport, "client", None)
    connector = getattr(session, "connector", None)
    if connector is None:
        return
    close = getattr(connector, "_close", None)
    try:
        if not callable(close):
            raise AttributeError(f"{type(connector).__name__} has no method _close")
        close()  # the synchronous part of aiohttp's close(): the sockets, no awaiting on a dead loop
    except Exception as exc:  # noqa: BLE001 - a transport of a dead loop is dropped however its close goes
        with contextlib.suppress(Exception):  # a finalizer at the process's end: nothing to raise to
            fell_back(CONNECTOR_CLOSE, exc)


class LoopLocalAioHttpClient(DefaultAioHttpClient):
    """``openai.DefaultAioHttpClient`` (the SDK's defaults: timeouts, limits) with one aiohttp pool per event loop,
    so that a cached chat model works on any loop, and no redirect followed (:data:`FOLLOW_REDIRECTS`)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("follow_redirects", FOLLOW_REDIRECTS)
        super().__init__(**kwargs)

    # The SDK's methods are looked up at each loop's first request (``parent`` is a ``super()`` proxy), so that a
    # method that fails then (another httpx or openai) takes the public path then. httpx's transport takes the
    # settings in the same order as the client's methods.
    def _init_transport(self, *args: Any, transport: httpx2.AsyncBaseTransport | None = None,
                        **kwargs: Any) -> httpx2.AsyncBaseTransport:
        if transport is not None:
            return transport
        parent: Any = super()
        return LoopLocalTransport(lambda: parent._init_transport(*args, **kwargs),
                                  lambda: httpx2.AsyncHTTPTransport(*args, **kwargs), INIT_TRANSPORT)

    def _init_proxy_transport(self, proxy: httpx2.Proxy, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        parent: Any = super()
        public: Any = httpx2.AsyncHTTPTransport  # the settings before ``proxy`` in its signature come positional
        return LoopLocalTransport(lambda: parent._init_proxy_transport(proxy, *args, **kwargs),
                                  lambda: public(*args, proxy=proxy, **kwargs),
                                  INIT_PROXY_TRANSPORT)


def async_http_client() -> httpx2.AsyncClient:
    """The async HTTP client for one OpenAI-compatible chat model (see the module docstring); the model's own
    timeout still applies to each request.

    The per-loop aiohttp pools rest on two private methods of httpx's client (``_init_transport``,
    ``_init_proxy_transport``; docs/dependencies.md): where a client does not get its transports through them,
    :func:`public_async_http_client` (said once)."""
    try:
        client = LoopLocalAioHttpClient()
    except Exception as exc:  # noqa: BLE001 - another httpx or openai: the public client
        fell_back(INIT_TRANSPORT, exc)
        return public_async_http_client()
    made = getattr(client, "_transport", None)
    if made is None:
        fell_back(TRANSPORT, "the client has no _transport")
    elif not isinstance(made, LoopLocalTransport):  # the client did not make its transport through ours
        fell_back(INIT_TRANSPORT, f"the client's transport is a {type(made).__name__}, not made by it")
    else:
        return client
    return public_async_http_client()


def public_async_http_client() -> httpx2.AsyncClient:
    """The SDK's default async client (``openai.DefaultAsyncHttpxClient``: httpx's own transport) through public
    API only, with one pool per event loop all the same (:class:`LoopLocalTransport` given as its transport, and
    as the transport of each proxy the environment names), and no redirect followed."""
    limits = DEFAULT_CONNECTION_LIMITS

    def proxied(url: str) -> LoopLocalTransport:
        return LoopLocalTransport(lambda: httpx2.AsyncHTTPTransport(limits=limits, proxy=url))

    # httpx reads the same variables for its own proxy transports; these take their place, pattern for pattern
    # (NO_PROXY's patterns stay httpx's own).
    proxies = urllib.request.getproxies()
    mounts: dict[str, httpx2.AsyncBaseTransport] = {
        f"{scheme}://": proxied(proxies[scheme]) for scheme in ("http", "https", "all") if proxies.get(scheme)}
    return DefaultAsyncHttpxClient(transport=LoopLocalTransport(lambda: httpx2.AsyncHTTPTransport(limits=limits)),
                                   mounts=mounts or None, follow_redirects=FOLLOW_REDIRECTS)


def sync_http_client() -> httpx2.Client:
    """The sync HTTP client of an OpenAI-compatible chat model: the SDK's default one, no redirect followed."""
    return DefaultHttpxClient(follow_redirects=FOLLOW_REDIRECTS)
