"""Retry policy shared by LLM calls (``nodes.llm``) and tools that call models or web APIs."""

from __future__ import annotations

import asyncio
import email.utils
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

R = TypeVar("R")

TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}
_TRANSIENT_NAMES = ("RateLimit", "Timeout", "APIConnection", "ConnectError", "ConnectionError", "InternalServer",
                    "ServiceUnavailable", "Overloaded", "RemoteProtocolError", "ReadError")


def is_transient(exc: BaseException) -> bool:
    """Whether an exception from a model or web API call is worth retrying (rate limits, 5xx, timeouts)."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    status = getattr(exc, "status_code", None)
    if status is None:
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
    if isinstance(status, int):
        return status in TRANSIENT_STATUS
    return any(name in type(exc).__name__ for name in _TRANSIENT_NAMES)


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


async def retry_async(fn: Callable[[], Awaitable[R]], *, max_retries: int = 6, base_s: float = 1.0,
                      cap_s: float = 60.0, timeout_s: float | None = None,
                      retry_if: Callable[[BaseException], bool] = is_transient) -> R:
    """Await ``fn()``; on an exception that ``retry_if`` accepts, wait with backoff and try again.

    Waits at least what a ``Retry-After`` header asks for (up to ``cap_s``). Gives up after ``max_retries``
    retries and re-raises the last exception.
    """
    attempt = 0
    while True:
        try:
            if timeout_s is None:
                return await fn()
            return await asyncio.wait_for(fn(), timeout=timeout_s)
        except Exception as exc:  # noqa: BLE001 - classified by retry_if
            if attempt >= max_retries or not retry_if(exc):
                raise
            delay = backoff_delay(attempt, base_s, cap_s)
            hint = retry_after_s(exc)  # a rate-limited server says how long to wait
            if hint is not None:
                delay = max(delay, min(hint, cap_s))
            await asyncio.sleep(delay)
            attempt += 1
