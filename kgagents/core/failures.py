"""What kind of failure a model or web API call met, and what to do about it.

Every exception a call can raise — from the OpenAI and Anthropic SDKs, httpx, aiohttp, the standard library, or a
replay of a recorded failure — falls in one :class:`FailureKind`. Each kind has one :class:`Remedy`:

- ``FAIL_NOW``: the request can never succeed as configured (a rejected key, an unknown model or endpoint, an
  exhausted quota, a redirect: the model clients follow none, so that no prompt goes to a host nobody
  configured). Retrying cannot help, and neither can going on without the model.
- ``RETRY``: the server is there and busy or restarting (429, 5xx, a timeout, a dropped connection, a body cut
  short): retry with backoff — but a model that has never answered a call is not "flaky", it is down or wrong, so
  the caller bounds the attempts of a model that never answered (see :func:`never_answered_gives_up`), and the
  time it waits for one that is rate-limited.
- ``NO_RETRY``: this one request was refused for what it asked (a content filter, a prompt too long, a malformed
  request): retrying the same request gives the same answer, but other requests may work, so the step degrades
  (for a model that answered before; one that has refused every request so far is misconfigured).

A refused connection or an unknown host is ``FAIL_NOW`` for a model that has not answered before (a typo in the
URL) and ``RETRY`` for one that has (a server restarting): :func:`remedy` takes that into account.

This module is pure (no I/O, no state): the callers keep who has answered.
"""

from __future__ import annotations

import json
import socket
import traceback
from collections.abc import Iterator
from enum import StrEnum
from urllib.parse import urljoin

__all__ = [
    "NEVER_ANSWERED_ATTEMPTS",
    "FailureKind",
    "Remedy",
    "chain",
    "classify",
    "never_answered_gives_up",
    "redirect_target",
    "remedy",
    "status_of",
]


class FailureKind(StrEnum):
    """The kinds of failure of a model or web API call; the value is the word messages use."""

    CONNECT = "connection refused"
    DNS = "unknown host"
    AUTH = "rejected key"
    NOT_FOUND = "not found"
    REDIRECT = "redirected"
    QUOTA = "quota exhausted"
    RATE_LIMIT = "rate limited"
    SERVER = "server error"
    TIMEOUT = "timeout"
    MALFORMED = "malformed response"
    REFUSAL = "content refusal"
    BAD_REQUEST = "bad request"
    OTHER = "other"


class Remedy(StrEnum):
    """What a caller does about a failure (module docstring)."""

    FAIL_NOW = "fail now"
    RETRY = "retry"
    NO_RETRY = "no retry"


#: How many failed attempts of the same kind, with no answer ever from the model, end it: the first call and two
#: retries. Enough to ride out one dropped request, few enough that a server answering 500 (or an HTML page, or
#: nothing) to everything is named in seconds instead of minutes.
NEVER_ANSWERED_ATTEMPTS = 3

_TRANSIENT_STATUS = {408, 409, 425, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529}
_FATAL_STATUS = {401: FailureKind.AUTH, 403: FailureKind.AUTH, 407: FailureKind.AUTH, 404: FailureKind.NOT_FOUND,
                 405: FailureKind.NOT_FOUND, 402: FailureKind.QUOTA}
#: How a server says that a 429 (or 403) is an exhausted quota or billing limit, not a rate limit.
_QUOTA_MARKERS = ("insufficient_quota", "billing", "quota exceeded", "exceeded your current quota", "credit balance")
#: How servers say that a request was refused for its content.
_REFUSAL_MARKERS = ("content_filter", "content_policy", "content management policy", "responsibleaipolicy",
                    "safety system", "flagged")
#: Exception class names (any module) for which the class name alone tells the kind.
_NAMED: tuple[tuple[str, FailureKind], ...] = (
    ("ContentFilterFinishReason", FailureKind.REFUSAL),
    ("APIResponseValidation", FailureKind.MALFORMED),
    ("Timeout", FailureKind.TIMEOUT),
    ("RateLimit", FailureKind.RATE_LIMIT),
    ("InternalServer", FailureKind.SERVER),
    ("ServiceUnavailable", FailureKind.SERVER),
    ("Overloaded", FailureKind.SERVER),
    ("RemoteProtocolError", FailureKind.MALFORMED),
    ("ServerDisconnected", FailureKind.CONNECT),
    ("ClientConnector", FailureKind.CONNECT),
    ("APIConnection", FailureKind.CONNECT),
    ("ConnectError", FailureKind.CONNECT),
    ("ReadError", FailureKind.CONNECT),
    ("ConnectionError", FailureKind.CONNECT),
)
#: Packages whose responses decode their own JSON body: a JSON error raised there is a broken body.
_HTTP_CLIENTS = ("httpx", "httpx2", "requests", "aiohttp", "openai", "anthropic")
#: How langchain-openai reports a 200 response that is not JSON at all (an HTML page from a proxy or a captive
#: portal): the OpenAI client hands it the body as text.
_NOT_AN_API_RESPONSE = "Unexpected response type from OpenAI-compatible endpoint"


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from (or while handling), innermost last."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an API error carries (on itself or on its response), if any."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _body_text(exc: BaseException) -> str:
    """What an API error says (its message and body), lower-cased, for the markers above."""
    parts = [str(exc)]
    body = getattr(exc, "body", None)
    if body is not None:
        parts.append(json.dumps(body, default=str) if not isinstance(body, str) else body)
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        parts.append(code)
    return " ".join(parts).lower()


def _decoded_by_http_client(exc: json.JSONDecodeError) -> bool:
    decoder = ""  # the innermost module outside the json package: the one that asked for the decoding
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        module = str(frame.f_globals.get("__name__", ""))
        if module.split(".")[0] != "json":
            decoder = module
    return decoder.split(".")[0] in _HTTP_CLIENTS


def _is_error_object(exc: BaseException) -> bool:
    """langchain-openai's report of a 200 response whose JSON is an error object (``{"error": {...}}``, what
    some proxies and OpenAI-compatible servers send when the model behind them failed): a ``ValueError`` whose
    one argument is that object."""
    if type(exc) is not ValueError or len(exc.args) != 1:
        return False
    error = exc.args[0]
    if isinstance(error, dict):
        return True
    return isinstance(error, str) and any(
        str(frame.f_globals.get("__name__", "")).startswith("langchain_openai")
        and frame.f_code.co_name == "_create_chat_result" for frame, _ in traceback.walk_tb(exc.__traceback__)) \
        and not error.startswith(_NOT_AN_API_RESPONSE)


def _is_malformed_body(exc: BaseException) -> bool:
    """A JSON error raised while an HTTP client decoded a response body, or a client's report of a response that
    is not JSON at all (an HTML page): the body was cut short, empty or not an API answer."""
    if isinstance(exc, ValueError) and str(exc).startswith(_NOT_AN_API_RESPONSE):
        return True
    return isinstance(exc, json.JSONDecodeError) and _decoded_by_http_client(exc)


def _by_status(exc: BaseException, status: int) -> FailureKind:
    text = _body_text(exc)
    if status in (403, 429) and any(marker in text for marker in _QUOTA_MARKERS):
        return FailureKind.QUOTA
    if status in _FATAL_STATUS:
        return _FATAL_STATUS[status]
    if status == 429:
        return FailureKind.RATE_LIMIT
    if status in (408, 504, 524):
        return FailureKind.TIMEOUT
    if status in _TRANSIENT_STATUS or 500 <= status < 600:
        return FailureKind.SERVER
    if 400 <= status < 500:
        if any(marker in text for marker in _REFUSAL_MARKERS):
            return FailureKind.REFUSAL
        return FailureKind.BAD_REQUEST
    return FailureKind.OTHER


def classify(exc: BaseException) -> FailureKind:
    """The kind of failure ``exc`` reports. An HTTP error status decides first, then a refused connection or an
    unknown host anywhere in the exceptions ``exc`` was raised from (whatever a client wrapped them in: a refused
    connection reported as a connect timeout is a refused connection); otherwise the outermost exception that
    tells: a timeout, a malformed body, the standard library's connection errors, then class names."""
    recorded = getattr(exc, "kgagents_failure_kind", None)  # a failure a replay raises again: as it was classified
    if isinstance(recorded, str) and recorded in FailureKind._value2member_map_:
        return FailureKind(recorded)
    status = status_of(exc)
    if status is not None and 300 <= status < 400:
        return FailureKind.REDIRECT
    if status is not None and status >= 400:  # a 200 whose body could not be read is no HTTP error (below)
        return _by_status(exc, status)
    for link in chain(exc):  # the operating system's word on a connection first: clients wrap it in other names
        if isinstance(link, ConnectionRefusedError):  # (the OpenAI SDK's aiohttp transport: a ConnectTimeout)
            return FailureKind.CONNECT
        if isinstance(link, socket.gaierror):
            return FailureKind.DNS
    for link in chain(exc):
        if isinstance(link, TimeoutError):
            return FailureKind.TIMEOUT
        if _is_malformed_body(link):
            return FailureKind.MALFORMED
        if _is_error_object(link):  # the server's own word that the request failed, with a 200
            return FailureKind.SERVER
        if isinstance(link, socket.gaierror):
            return FailureKind.DNS
        if isinstance(link, ConnectionError):
            return FailureKind.CONNECT
        name = type(link).__name__
        for part, kind in _NAMED:
            if part in name:
                if kind is FailureKind.CONNECT:
                    return _connect_or_dns(link)
                return kind
    return FailureKind.OTHER


def redirect_target(exc: BaseException) -> str | None:
    """Where a redirect that ``exc`` reports points (its ``Location``, made absolute against the request's URL),
    or None when ``exc`` is no redirect."""
    response = getattr(exc, "response", None)
    status = status_of(exc)
    if status is None or not 300 <= status < 400 or response is None:
        return None
    headers = getattr(response, "headers", None)
    location = headers.get("location") if headers is not None else None
    if not isinstance(location, str) or not location:
        return "an address it did not name"
    try:
        request_url = str(getattr(response.request, "url", "") or "")
    except (AttributeError, RuntimeError):  # httpx raises RuntimeError for a response built without a request
        request_url = ""
    return urljoin(request_url, location) if request_url else location


def _connect_or_dns(exc: BaseException) -> FailureKind:
    """A connection error: an unknown host when a name lookup failed under it, else a refused/dropped
    connection."""
    for link in chain(exc):
        if isinstance(link, socket.gaierror):
            return FailureKind.DNS
        if isinstance(link, TimeoutError):
            return FailureKind.TIMEOUT
    text = str(exc).lower()
    if "name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
        return FailureKind.DNS
    return FailureKind.CONNECT


def remedy(kind: FailureKind, *, answered: bool) -> Remedy:
    """What to do about a failure of ``kind``, for a model that has (``answered``) or has not answered a call
    before."""
    if kind in (FailureKind.AUTH, FailureKind.NOT_FOUND, FailureKind.QUOTA, FailureKind.REDIRECT):
        return Remedy.FAIL_NOW
    if kind in (FailureKind.CONNECT, FailureKind.DNS):
        return Remedy.RETRY if answered else Remedy.FAIL_NOW
    if kind in (FailureKind.RATE_LIMIT, FailureKind.SERVER, FailureKind.TIMEOUT, FailureKind.MALFORMED):
        return Remedy.RETRY
    return Remedy.NO_RETRY


def never_answered_gives_up(kinds: list[FailureKind], *, answered: bool) -> FailureKind | None:
    """The kind that ends a model which has never answered, given the kinds of its consecutive failed attempts so
    far (oldest first, across calls): :data:`NEVER_ANSWERED_ATTEMPTS` in a row of one kind that says the server
    is not working (:data:`SERVER_NOT_WORKING`: errors, timeouts, bodies that are no API answers). A rate limit
    does not count (a server that rate-limits is there; its waits are bounded by the caller), nor does a refusal
    of what one request asked (a content refusal, a bad request such as a prompt too long, a reply that does not
    parse): the same prompt asked again, or its samples, would be refused the same way however healthy the
    server. None while the model may still be tried."""
    if answered or len(kinds) < NEVER_ANSWERED_ATTEMPTS:
        return None
    last = kinds[-NEVER_ANSWERED_ATTEMPTS:]
    kind = last[0]
    if kind not in SERVER_NOT_WORKING:
        return None
    return kind if all(k is kind for k in last) else None


#: The kinds of failure that say a server is not working at all (rather than refusing one request).
SERVER_NOT_WORKING = frozenset({FailureKind.SERVER, FailureKind.TIMEOUT, FailureKind.MALFORMED,
                                FailureKind.CONNECT})
