"""Retry policy shared by LLM calls (``kgagents.nodes.llm``) and tools that call models or web APIs."""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import socket
import traceback
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from kgagents.core.errors import KGAgentsError
from kgagents.core.failures import redirect_target
from kgagents.core.redact import configured_secrets, without_credentials, without_secrets

TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}
#: Statuses that say a request can never succeed as configured: a rejected key, no access, an unknown model or
#: endpoint. Retrying cannot help, and neither can going on without the model.
FATAL_STATUS = {401, 403, 404}
_TRANSIENT_NAMES = ("RateLimit", "Timeout", "APIConnection", "ConnectError", "ConnectionError", "InternalServer",
                    "ServiceUnavailable", "Overloaded", "RemoteProtocolError", "ReadError")
#: Packages whose responses decode their own JSON body: a JSON error raised there is a broken body.
_HTTP_CLIENTS = ("httpx", "httpx2", "requests", "aiohttp")
#: How langchain-openai reports a 200 response that is not JSON at all (an HTML page from a proxy or a captive
#: portal): the OpenAI client hands it the body as text.
_NOT_AN_API_RESPONSE = "Unexpected response type from OpenAI-compatible endpoint"


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an API error carries (on itself or on its response), if any."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def is_unreadable_body(exc: BaseException) -> bool:
    """Whether ``exc`` is a JSON error raised while an HTTP client decoded a response body, or a client's
    report of a response that is not JSON at all (an HTML page): the body was cut short or is not an API
    answer. That is a transport fault, like a dropped connection, not a bad reply of the model (which the
    model's own parser reports)."""
    if isinstance(exc, ValueError) and str(exc).startswith(_NOT_AN_API_RESPONSE):
        return True
    if not isinstance(exc, json.JSONDecodeError):
        return False
    decoder = ""  # the innermost module outside the json package: the one that asked for the decoding
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        module = str(frame.f_globals.get("__name__", ""))
        if module.split(".")[0] != "json":
            decoder = module
    return decoder.split(".")[0] in _HTTP_CLIENTS


def is_transient(exc: BaseException) -> bool:
    """Whether an exception from a model or web API call is worth retrying: rate limits, 5xx, timeouts, dropped
    connections and bodies that arrived cut short or garbled."""
    recorded = getattr(exc, "kgagents_transient", None)  # a failure a replay raises again: as it was classified
    if isinstance(recorded, bool):
        return recorded
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)) or is_unreadable_body(exc):
        return True
    status = status_of(exc)
    if status is not None:
        return status in TRANSIENT_STATUS
    return any(name in type(exc).__name__ for name in _TRANSIENT_NAMES)


def is_fatal(exc: BaseException) -> bool:
    """Whether an API error says the request can never succeed as configured (:data:`FATAL_STATUS`)."""
    return status_of(exc) in FATAL_STATUS


class ModelUnavailableError(KGAgentsError, RuntimeError):
    """The model cannot be used at all: the server rejected the key, knows no such model or endpoint, or
    cannot be reached (connection refused, unknown host) before it ever answered in this process.

    No node degrades around it, and tools let it through: the run stops (its checkpoints are kept) and is
    resumed once the configuration is fixed.
    """


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) says that nothing listens at the address, or that
    the host name does not resolve: a refused connection or an unknown host, as every HTTP client reports
    them."""
    return any(isinstance(e, (ConnectionRefusedError, socket.gaierror)) for e in _chain(exc))


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from (or while handling), innermost last."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


#: The models (:func:`model_key`) that have answered a call in this process: only these are retried when they
#: cannot be reached (a server restarting); one that never answered is a configuration fault.
_answered: set[str] = set()


async def retry_model_call[R](fn: Callable[[], Awaitable[R]], *, model: str, **options: Any) -> R:
    """:func:`retry_async` for a call of the chat model ``model`` (a key naming the model and its endpoint): a
    refused connection or an unknown host is retried only if this model has answered before in this process
    (otherwise it is raised at once, for the caller to report as :class:`ModelUnavailableError`); a call that
    succeeds marks the model as answered."""
    def retry_if(exc: BaseException) -> bool:
        return is_transient(exc) and (model in _answered or not is_unreachable(exc))

    result = await retry_async(fn, retry_if=retry_if, **options)
    _answered.add(model)
    return result


def has_answered(model: str) -> bool:
    """Whether the chat model ``model`` (a key as for :func:`retry_model_call`) has answered in this
    process."""
    return model in _answered


def cannot_be_used(exc: BaseException, model: str) -> str | None:
    """Why a failed call of ``model`` means the model cannot be used at all (a rejected key, an unknown model
    or endpoint, a redirect, or an address that was never reachable), or None when the failure is one to degrade
    around."""
    redirected = redirect_advice(exc)
    if redirected:
        return redirected
    if is_fatal(exc):
        return f"the server answered {status_of(exc)}"
    if not has_answered(model) and is_unreachable(exc):
        refused = any(isinstance(e, ConnectionRefusedError) for e in _chain(exc))
        return "the connection was refused" if refused else "the host name does not resolve"
    return None


def error_text(exc: BaseException) -> str:
    """``str(exc)`` without the keys the environment holds (:func:`kgagents.core.redact.configured_secrets`): a
    server may echo the key it was sent into its error, and the error's text goes to the terminal, the log and
    the run's state."""
    return without_secrets(str(exc), configured_secrets(os.environ))


def redirect_advice(exc: BaseException) -> str | None:
    """What to do about a redirect that ``exc`` reports (the model clients follow none), or None."""
    target = redirect_target(exc)
    if target is None:
        return None
    host = urlsplit(target).hostname or without_credentials(target)
    return (f"the server answered {status_of(exc)}, a redirect to {without_credentials(target)} (host {host}); "
            "set the base URL to the final address")


def backoff_delay(attempt: int, base: float, cap: float) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base * 2**attempt)]."""
    return random.uniform(0, min(cap, base * (2**attempt)))


def retry_after_s(exc: BaseException) -> float | None:
    """The wait a server asked for in ``Retry-After`` / ``retry-after-ms`` (seconds or an HTTP date), if any."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, (when - datetime.now(when.tzinfo or UTC)).total_seconds())
    except (TypeError, ValueError, AttributeError):
        return None


async def retry_async[R](fn: Callable[[], Awaitable[R]], *, max_retries: int = 6, base_s: float = 1.0,
                         cap_s: float = 60.0, timeout_s: float | None = None,
                         retry_if: Callable[[BaseException], bool] = is_transient,
                         on_error: Callable[[BaseException], None] | None = None) -> R:
    """Await ``fn()``; on an exception that ``retry_if`` accepts, wait with backoff and try again.

    Waits at least what a ``Retry-After`` header asks for (up to ``cap_s``). Gives up after ``max_retries``
    retries and re-raises the last exception. ``on_error`` is told of every attempt's exception (a timeout
    included) before it is classified.
    """
    attempt = 0
    while True:
        try:
            if timeout_s is None:
                return await fn()
            return await asyncio.wait_for(fn(), timeout=timeout_s)
        except Exception as exc:  # classified by retry_if
            if on_error is not None:
                on_error(exc)
            if attempt >= max_retries or not retry_if(exc):
                raise
            delay = backoff_delay(attempt, base_s, cap_s)
            hint = retry_after_s(exc)  # a rate-limited server says how long to wait
            if hint is not None:
                delay = max(delay, min(hint, cap_s))
            await asyncio.sleep(delay)
            attempt += 1
