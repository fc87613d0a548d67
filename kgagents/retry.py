"""Retry policy shared by LLM calls (``nodes.llm``) and tools that call models or web APIs."""

from __future__ import annotations

import asyncio
import random
from typing import Awaitable, Callable, TypeVar

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


async def retry_async(fn: Callable[[], Awaitable[R]], *, max_retries: int = 6, base_s: float = 1.0,
                      cap_s: float = 60.0, timeout_s: float | None = None,
                      retry_if: Callable[[BaseException], bool] = is_transient) -> R:
    """Await ``fn()``; on an exception that ``retry_if`` accepts, wait with backoff and try again.

    Gives up after ``max_retries`` retries and re-raises the last exception.
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
            await asyncio.sleep(backoff_delay(attempt, base_s, cap_s))
            attempt += 1
