"""Retry policy shared by LLM calls (``kgagents.nodes.llm``) and tools that call models or web APIs.

Every failure is classified by :mod:`kgagents.core.failures` (a kind, and a remedy: fail now, retry, or no retry).
:func:`retry_model_call` adds what a model's history says, kept per model and endpoint for the process (a run, an
evaluation, a served graph):

- a model that has never answered a call and fails :data:`~kgagents.core.failures.NEVER_ANSWERED_ATTEMPTS`
  attempts in a row with one retryable kind (a 500, an HTML page, a broken or empty body, a timeout) is down or
  wrong, not flaky: :class:`ModelUnavailableError` at once, naming the kind;
- a model that answered before and then fails :data:`BREAKER_CALLS` calls in a row after all their retries has
  gone away for good (the breaker): :class:`ModelUnavailableError` too, instead of degrading every step;
- an attempt that waits long says so on stderr every :attr:`Watch.notice_s`, and one to a model that has not
  answered yet probes the server after :attr:`Watch.probe_after_s`, as does an attempt of any model that timed
  out: a server that answers neither accepts connections but never answers (:class:`ModelUnavailableError`,
  kind timeout), while a server that answers the probe is slow and keeps its full time limit. The probe
  (:func:`endpoint_silent`) is a GET of the endpoint's model list, sent without the key or any prompt: any
  HTTP answer (200, 401, 404) proves the server alive, and it cannot queue behind a generation on a server that
  generates one request at a time (Ollama, llama.cpp), as a one-token completion would. One probe per endpoint
  is in flight at a time, shared by every call that waits for it;
- a backoff wait that is long says so on stderr, and a model that has never answered and is rate-limited stops
  once its waits would pass ``rate_limit_wait_s`` (kind rate limited): a server that rate-limits every request
  of a model never answered is an account's limit, not a busy minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import os
import random
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx

from kgagents.core.errors import KGAgentsError
from kgagents.core.failures import (
    NEVER_ANSWERED_ATTEMPTS,
    FailureKind,
    Remedy,
    chain,
    classify,
    never_answered_gives_up,
    redirect_target,
    remedy,
    status_of,
)
from kgagents.core.redact import configured_secrets, scrub_text, without_credentials, without_secrets

__all__ = [
    "BREAKER_CALLS",
    "FATAL_STATUS",
    "TRANSIENT_STATUS",
    "ModelUnavailableError",
    "ServerSilent",
    "Watch",
    "backoff_delay",
    "endpoint_silent",
    "failure_kind",
    "has_answered",
    "is_fatal",
    "is_transient",
    "is_unreachable",
    "is_unreadable_body",
    "probe_url",
    "retry_after_s",
    "retry_async",
    "retry_model_call",
    "status_of",
]

log = logging.getLogger("kgagents.retry")

TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}
#: Statuses that say a request can never succeed as configured: a rejected key, no access, an unknown model or
#: endpoint. Retrying cannot help, and neither can going on without the model.
FATAL_STATUS = {401, 403, 404}
#: How many calls in a row of a model that answered before may fail for good (after all their retries, with a
#: retryable kind) before the model counts as gone: a server that died mid-run stops the run after a few calls
#: (minutes of retries each) instead of degrading every remaining step.
BREAKER_CALLS = 3
#: The longest a model that has never answered may keep the run waiting on its rate limits (all its backoff waits
#: since its last answer, across calls), by default.
RATE_LIMIT_WAIT_S = 300.0


def failure_kind(exc: BaseException) -> FailureKind:
    """:func:`kgagents.core.failures.classify`, reading a replayed failure recorded before kinds were kept by its
    ``kgagents_transient`` flag (a transient failure of unknown kind counts as a server error)."""
    kind = classify(exc)
    if kind is FailureKind.OTHER and getattr(exc, "kgagents_transient", None) is True:
        return FailureKind.SERVER
    return kind


def is_unreadable_body(exc: BaseException) -> bool:
    """Whether ``exc`` reports a response body that was cut short, empty or not an API answer (an HTML page):
    a transport fault, like a dropped connection, not a bad reply of the model (which the model's own parser
    reports)."""
    return failure_kind(exc) is FailureKind.MALFORMED


def is_transient(exc: BaseException) -> bool:
    """Whether an exception from a model or web API call is worth retrying: rate limits, 5xx, timeouts, dropped
    connections and bodies that arrived cut short or garbled."""
    return remedy(failure_kind(exc), answered=True) is Remedy.RETRY


def is_fatal(exc: BaseException) -> bool:
    """Whether an API error says the request can never succeed as configured: a rejected key, an unknown model
    or endpoint, an exhausted quota."""
    return remedy(failure_kind(exc), answered=True) is Remedy.FAIL_NOW


class ModelUnavailableError(KGAgentsError, RuntimeError):
    """The model cannot be used at all: the server rejected the key, knows no such model or endpoint, cannot be
    reached, or has never answered a call (:data:`~kgagents.core.failures.NEVER_ANSWERED_ATTEMPTS` failures of
    one kind, or silence), or answered once and then failed :data:`BREAKER_CALLS` calls in a row.

    No node degrades around it, and tools let it through: the run stops (its checkpoints are kept) and is
    resumed once the configuration is fixed. ``kind`` is the failure's kind.
    """

    def __init__(self, message: str, kind: FailureKind = FailureKind.OTHER) -> None:
        super().__init__(message)
        self.kind = kind


class ServerSilent(KGAgentsError, TimeoutError):
    """A call to a model that has not answered yet got nothing, and neither did a one-token probe: the server
    accepts connections but never answers."""


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) says that nothing listens at the address, or that
    the host name does not resolve: a refused connection or an unknown host, as every HTTP client reports
    them."""
    return any(isinstance(e, (ConnectionRefusedError, socket.gaierror)) for e in chain(exc))


#: The models (a key naming the model and its endpoint, :func:`kgagents.core.endpoints.model_key`) that have
#: answered a call in this process: only these are retried when they cannot be reached (a server restarting).
_answered: set[str] = set()
#: Per model: the kinds of its failed attempts since its last answer (oldest first, the last few kept), across
#: calls, so that concurrent and successive calls of a model that never answered share one count.
_streaks: dict[str, list[FailureKind]] = {}
#: Per model that answered before: how many calls in a row failed for good since its last answer.
_failed_calls: dict[str, int] = {}
#: Per model that has not answered: the seconds waited on its rate limits since its last answer.
_rate_waited: dict[str, float] = {}


def has_answered(model: str) -> bool:
    """Whether the chat model ``model`` (a key as for :func:`retry_model_call`) has answered in this
    process."""
    return model in _answered


def _answer(model: str) -> None:
    _answered.add(model)
    _streaks.pop(model, None)
    _failed_calls.pop(model, None)
    _rate_waited.pop(model, None)


def _note_attempt(model: str, kind: FailureKind) -> list[FailureKind]:
    streak = _streaks.setdefault(model, [])
    streak.append(kind)
    del streak[:-NEVER_ANSWERED_ATTEMPTS]
    return streak


#: What a failure of each kind means for a model, in the message that stops a run, and what to check.
_MEANING: dict[FailureKind, tuple[str, str]] = {
    FailureKind.CONNECT: ("the connection was refused",
                          "check the base URL and its port (KGAGENTS_BASE_URL) and that the server is running"),
    FailureKind.DNS: ("the host name does not resolve", "check the host in the base URL (KGAGENTS_BASE_URL)"),
    FailureKind.AUTH: ("the server rejected the key or refused access",
                       "check the API key (KGAGENTS_API_KEY or the provider's), the model name and the base URL"),
    FailureKind.NOT_FOUND: ("the server knows no such model or endpoint",
                            "check the model name, the API key and the base URL (an OpenAI-compatible one ends in "
                            "/v1)"),
    FailureKind.QUOTA: ("the account's quota is exhausted", "check the account's billing and limits, the API key "
                                                            "and the base URL"),
    FailureKind.SERVER: ("the server answers with errors", "check the server's log and that the model is loaded"),
    FailureKind.TIMEOUT: ("no reply in time",
                          "check that the server works (its log, its load); a model that is only slow needs a new "
                          "run with a longer limit (--set llm_timeout_s=SECONDS, or llm_role_timeouts; a resumed "
                          "run keeps the limits it started with); a server that answers nothing, not even its "
                          "model list, while it generates is taken for silent after llm_probe_after_s + "
                          "llm_probe_timeout_s (raise those for it)"),
    FailureKind.MALFORMED: ("the replies are not API answers (an HTML page, a broken or empty body)",
                            "check that the base URL points at the model API (ending in /v1), not at a web page "
                            "or a proxy"),
    FailureKind.RATE_LIMIT: ("the server keeps rate-limiting",
                             "check the account's rate limits and quota (the provider's console), or wait and "
                             "resume"),
    FailureKind.BAD_REQUEST: ("the server refuses the requests as malformed or unsupported",
                              "check the model name and the settings it is sent (structured_output_method, "
                              "temperature, seed) and that the server supports tool calls"),
    FailureKind.REFUSAL: ("the server refuses the requests for their content",
                          "check the server's content filter and the model"),
}


def unusable(who: str, kind: FailureKind, exc: BaseException, why: str = "") -> ModelUnavailableError:
    """The error that stops a run because the model ``who`` (its role, name and URL, in words) cannot be used:
    one message naming what the failure's kind means and what happened (``why``), the kind, the error, and what to
    check."""
    meaning, check = _MEANING.get(kind, ("the calls fail", "check the model's configuration"))
    if kind is FailureKind.CONNECT and not any(isinstance(e, ConnectionRefusedError) for e in chain(exc)):
        meaning = "the connection was dropped before any answer"
    status = status_of(exc)
    redirected = redirect_advice(exc) if kind is FailureKind.REDIRECT else None
    if redirected:
        meaning, check = redirected.split("; ", 1)
    elif status is not None and status >= 400:
        meaning = f"the server answered {status} ({meaning})"
    detail = f"{type(exc).__name__}: {error_text(exc)[:300] or 'no message'}"
    return ModelUnavailableError(
        f"{who} cannot be used: {meaning}{f'; {why}' if why else ''} (failure: {kind.value}; {detail}); {check}, "
        "then resume the run (its checkpoints are kept)", kind)


async def retry_model_call[R](fn: Callable[[], Awaitable[R]], *, model: str, who: str = "the model",
                              max_retries: int = 6, base_s: float = 1.0, cap_s: float = 60.0,
                              timeout_s: float | None = None, watch: Watch | None = None,
                              on_error: Callable[[BaseException], None] | None = None,
                              rate_limit_wait_s: float = RATE_LIMIT_WAIT_S, tentative: bool = False) -> R:
    """Await ``fn()``, a call of the chat model ``model`` (a key naming the model and its endpoint; ``who``:
    its role, name and URL in words), retrying what its kind says is worth it (:func:`retry_async`'s backoff).

    Raises :class:`ModelUnavailableError` at once for a failure that can never succeed (a rejected key, an
    unknown model, a refused connection of a model that never answered), for a model that never answered and
    failed :data:`~kgagents.core.failures.NEVER_ANSWERED_ATTEMPTS` attempts in a row with one kind, for a silent
    server (:class:`Watch`; a timed-out attempt whose server does not answer a probe either), for a model that
    never answered whose rate-limit waits would pass ``rate_limit_wait_s``, and when a model that answered before
    fails its :data:`BREAKER_CALLS`-th call in a row; otherwise the last exception, for the caller to degrade
    around. A call that succeeds marks the model as answered. ``timeout_s`` bounds each attempt (``watch``:
    watched while it waits).

    A ``tentative`` call is one the caller can do without (a request for several samples at once, which some
    servers refuse with any status, a 500 included): it is tried once, and its failure neither counts toward
    the stops above nor is retried, unless it says the model cannot be used at all (a rejected key, an
    unknown model, an address never reached, a silent server)."""
    attempt = 0
    while True:
        try:
            result = await _attempt(fn, model=model, timeout_s=timeout_s, watch=watch)
        except ModelUnavailableError:
            raise
        except Exception as exc:  # classified below
            if on_error is not None:
                on_error(exc)
            kind = failure_kind(exc)
            if isinstance(exc, ServerSilent):
                raise unusable(who, kind, exc, "the server accepts connections but never answers") from exc
            answered = has_answered(model)
            if kind is FailureKind.TIMEOUT and watch is not None and watch.probe_url and await _silent(watch):
                raise unusable(who, kind, exc, (
                    "it answered before, but now " if answered else "") + "the server accepts connections but "
                    f"never answers: not even a request for its model list in {watch.probe_timeout_s:g} s") from exc
            verdict = remedy(kind, answered=answered)
            if verdict is Remedy.FAIL_NOW:
                raise unusable(who, kind, exc) from exc
            if tentative:
                raise
            streak = _note_attempt(model, kind)
            gave_up = never_answered_gives_up(streak, answered=has_answered(model))
            if gave_up is not None:
                raise unusable(who, gave_up, exc, f"{len(streak)} attempts in a row failed so, and it has not "
                                                  "answered a single call in this process") from exc
            if verdict is Remedy.RETRY and attempt >= max_retries and answered:
                _failed_calls[model] = failed = _failed_calls.get(model, 0) + 1
                if failed >= BREAKER_CALLS:
                    raise unusable(who, kind, exc, f"it answered before, but its last {failed} calls failed "
                                                   f"after all their retries") from exc
            if attempt >= max_retries or verdict is not Remedy.RETRY:
                raise
            delay = _delay(exc, attempt, base_s, cap_s)
            if kind is FailureKind.RATE_LIMIT and not answered:
                _bound_rate_limit_wait(model, who, exc, delay, rate_limit_wait_s)
            _say_long_wait(who, kind, exc, delay, watch)
            await asyncio.sleep(delay)
            attempt += 1
        else:
            _answer(model)
            return result


def _bound_rate_limit_wait(model: str, who: str, exc: BaseException, delay: float, bound_s: float) -> None:
    """Count ``delay``, a wait on a rate limit of ``model`` (which has never answered), toward its bound; raise
    :class:`ModelUnavailableError` instead when that wait, or the one the server asks for, would pass it."""
    waited = _rate_waited.get(model, 0.0)
    asked = retry_after_s(exc)
    if waited + max(delay, asked or 0.0) > bound_s:
        why = (f"the server asks to wait {asked:.0f} s" if asked is not None and waited + asked > bound_s
               else f"it was rate-limited for {waited:.0f} s") + \
            f" and has not answered a single call (llm_rate_limit_wait_s={bound_s:g})"
        raise unusable(who, FailureKind.RATE_LIMIT, exc, why) from exc
    _rate_waited[model] = waited + delay


def _say_long_wait(who: str, kind: FailureKind, exc: BaseException, delay: float, watch: Watch | None) -> None:
    """Say on stderr that a retry waits long (at least the watch's :attr:`Watch.notice_s`): nothing is silent for
    minutes."""
    if watch is None or not watch.notice_s or delay < watch.notice_s:
        return
    asked = retry_after_s(exc)
    if kind is FailureKind.RATE_LIMIT:
        if asked is not None and asked > delay:
            how = f"waiting {_secs(delay)} s (the server asks {_secs(asked)} s; api_backoff_max_s caps the wait)"
        else:
            how = f"waiting {_secs(delay)} s" + (" as the server asks" if asked is not None else "")
        log.warning("kgagents: rate limited by %s; %s", who, how)
    else:
        log.warning("kgagents: %s failed (%s); retrying in %s s", who, kind.value, _secs(delay))


def _secs(seconds: float) -> str:
    """Seconds for people: whole ones, tenths under ten."""
    return f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.1f}"


@dataclass(frozen=True)
class Watch:
    """How an attempt of a model call that waits long is watched (see the module docstring)."""

    who: str
    """The model in words (its role, name and URL), for the lines on stderr."""
    probe_url: str | None = None
    """Where to probe the model's server (:func:`probe_url`): when a model that has not answered yet keeps
    silent for :attr:`probe_after_s`, and after an attempt that timed out. None: never probed."""
    notice_s: float = 30.0
    """Say on stderr that the call is still waiting, every so many seconds (0: never)."""
    probe_after_s: float = 15.0
    probe_timeout_s: float = 10.0


async def _attempt[R](fn: Callable[[], Awaitable[R]], *, model: str, timeout_s: float | None,
                      watch: Watch | None) -> R:
    """One attempt: ``fn()`` within ``timeout_s``, watched by ``watch``."""
    if watch is None or (not watch.notice_s and watch.probe_url is None):
        if timeout_s is None:
            return await fn()
        return await asyncio.wait_for(fn(), timeout=timeout_s)
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(fn())
    started = loop.time()
    next_notice = watch.notice_s or float("inf")
    probe_at = watch.probe_after_s if watch.probe_url is not None and not has_answered(model) else float("inf")
    limit = timeout_s if timeout_s is not None else float("inf")
    try:
        while True:
            elapsed = loop.time() - started
            wait = min(next_notice, probe_at, limit) - elapsed
            done, _ = await asyncio.wait({task}, timeout=max(0.0, wait))
            if done:
                return task.result()
            elapsed = loop.time() - started
            if elapsed >= limit:
                raise TimeoutError(f"no reply within {limit:g} s")
            if elapsed >= probe_at:
                probe_at = float("inf")
                if not task.done() and not has_answered(model) and await _silent(watch):
                    raise ServerSilent(f"no reply to the call in {elapsed:.1f} s, nor to a request for its model "
                                       f"list in {watch.probe_timeout_s:g} s")
            elapsed = loop.time() - started
            if elapsed >= next_notice and not task.done():
                log.warning("kgagents: still waiting for %s: %.0f s so far (limit %s)", watch.who, elapsed,
                            f"{limit:g} s" if limit != float("inf") else "none")
                next_notice += watch.notice_s
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _silent(watch: Watch) -> bool:
    """Whether the watch's server gives no answer to a probe within its time (:func:`endpoint_silent`)."""
    assert watch.probe_url is not None
    return await endpoint_silent(watch.probe_url, watch.probe_timeout_s)


def probe_url(provider: str, endpoint: str | None) -> str | None:
    """Where to probe a chat model's server: a listing that costs the server nothing and needs no generation
    slot. ``provider``: the chat model's class name; ``endpoint``: its base URL
    (:func:`kgagents.core.endpoints.model_endpoint`). An OpenAI-compatible endpoint's ``/models``, Anthropic's
    ``/v1/models``, Ollama's ``/api/tags``, else the base URL itself; None without an endpoint (an in-process
    model)."""
    if not endpoint or "://" not in endpoint:
        return None
    base = endpoint.rstrip("/")
    if "Anthropic" in provider:
        return f"{base}/models" if base.endswith("/v1") else f"{base}/v1/models"
    if "Ollama" in provider:
        return f"{base}/api/tags"
    if "OpenAI" in provider:
        return f"{base}/models"
    return base


#: The probes in flight, per event loop and URL: concurrent calls of one server share one.
_probes: dict[tuple[int, str], asyncio.Task[bool]] = {}
#: When each probed URL last answered (``time.monotonic()``): a probe answered a moment ago is not repeated.
_alive_at: dict[str, float] = {}


async def endpoint_silent(url: str, timeout_s: float) -> bool:
    """Whether the server at ``url`` gives no HTTP answer at all within ``timeout_s`` (a GET sent without any
    key, header of ours or prompt; any status is an answer, and so is a refused or dropped connection, which the
    call itself then reports). One probe per URL is in flight at a time: every caller waiting for that server
    awaits the same one, and one answered within the last ``timeout_s`` stands for a new one."""
    last = _alive_at.get(url)
    if last is not None and time.monotonic() - last < timeout_s:
        return False
    loop = asyncio.get_running_loop()
    key = (id(loop), url)
    task = _probes.get(key)
    if task is None or task.done() or task.get_loop() is not loop:
        task = loop.create_task(_probe_once(url, timeout_s), name=f"kgagents probe {url}")
        _probes[key] = task
        task.add_done_callback(lambda done: _probes.pop(key, None) if _probes.get(key) is done else None)
    return await asyncio.shield(task)  # a caller given up on does not cancel the others' probe


async def _probe_once(url: str, timeout_s: float) -> bool:
    """One GET of ``url``: True when nothing answered within ``timeout_s``."""
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), follow_redirects=False) as client:
            await asyncio.wait_for(client.get(url), timeout=timeout_s)
    except (TimeoutError, httpx.TimeoutException):
        return True
    except (httpx.HTTPError, OSError, ValueError):  # refused, dropped, a URL httpx cannot send to: no silence
        pass
    _alive_at[url] = time.monotonic()
    return False


def _delay(exc: BaseException, attempt: int, base_s: float, cap_s: float) -> float:
    delay = backoff_delay(attempt, base_s, cap_s)
    hint = retry_after_s(exc)  # a rate-limited server says how long to wait
    if hint is not None:
        delay = max(delay, min(hint, cap_s))
    return delay


def error_text(exc: BaseException) -> str:
    """``str(exc)`` without the keys the environment holds (:func:`kgagents.core.redact.configured_secrets`) and
    without URLs' user parts and query values: a server may echo the key it was sent into its error, and the
    error's text goes to the terminal, the log, the run's state and an evaluation's results."""
    return scrub_text(without_secrets(str(exc), configured_secrets(os.environ)))


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
            await asyncio.sleep(_delay(exc, attempt, base_s, cap_s))
            attempt += 1
