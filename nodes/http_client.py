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
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

import httpx2
from openai import DefaultAioHttpClient

from kgagents.core.scripted import CALL_STAGE, STAGE_HEADER, STAGE_HEADER_VARIABLE


class LoopLocalTransport(httpx2.AsyncBaseTransport):
    """A transport per running event loop, each made by ``factory`` on the loop's first request."""

    def __init__(self, factory: Callable[[], httpx2.AsyncBaseTransport]) -> None:
        self._factory = factory
        self._transports: dict[asyncio.AbstractEventLoop, httpx2.AsyncBaseTransport] = {}
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
            transport = self._transports.setdefault(loop, self._factory())
        return transport

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if os.environ.get(STAGE_HEADER_VARIABLE) == "1":  # scripted test servers only (kgagents.core.scripted)
            stage = CALL_STAGE.get()
            if stage:
                request.headers[STAGE_HEADER] = stage
        return await self.current().handle_async_request(request)

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            transport = self._transports.pop(loop, None)
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
    with contextlib.suppress(Exception):  # a transport of a dead loop is dropped however its close goes
        connector._close()  # the synchronous part of aiohttp's close(): the sockets, no awaiting on a dead loop


class LoopLocalAioHttpClient(DefaultAioHttpClient):
    """``openai.DefaultAioHttpClient`` (the SDK's defaults: timeouts, limits, redirects) with one aiohttp pool per
    event loop, so that a cached chat model works on any loop."""

    def _init_transport(self, *args: Any, transport: httpx2.AsyncBaseTransport | None = None,
                        **kwargs: Any) -> httpx2.AsyncBaseTransport:
        if transport is not None:
            return transport
        make = super()._init_transport
        return LoopLocalTransport(lambda: make(*args, **kwargs))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        make = super()._init_proxy_transport
        return LoopLocalTransport(lambda: make(*args, **kwargs))


def async_http_client() -> httpx2.AsyncClient | None:
    """The async HTTP client for one OpenAI-compatible chat model (see the module docstring); the model's own
    timeout still applies to each request.

    The per-loop pools rest on two private methods of httpx's client (``_init_transport``,
    ``_init_proxy_transport``; docs/dependencies.md): where a client does not get its transports through them,
    None — the SDK's default client, the public path."""
    try:
        client = LoopLocalAioHttpClient()
    except Exception:  # noqa: BLE001 - another httpx or openai: the SDK's default client
        return None
    if not isinstance(getattr(client, "_transport", None), LoopLocalTransport):
        return None
    return client
