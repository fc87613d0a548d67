"""The failure kinds of model and web API calls (kgagents.core.failures), from the errors the real clients raise."""

from __future__ import annotations

import json
import socket

import httpx
import openai
import pytest

from kgagents.core.failures import (
    NEVER_ANSWERED_ATTEMPTS,
    FailureKind,
    Remedy,
    classify,
    never_answered_gives_up,
    remedy,
)

REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def status_error(status: int, body: object = None) -> openai.APIStatusError:
    response = httpx.Response(status, request=REQUEST, json=body if body is not None else {})
    client = openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1")
    return client._make_status_error_from_response(response)


@pytest.mark.parametrize(("status", "body", "kind"), [
    (401, {"error": {"message": "bad key"}}, FailureKind.AUTH),
    (403, {"error": {"message": "no access"}}, FailureKind.AUTH),
    (404, {"error": {"message": "no such model"}}, FailureKind.NOT_FOUND),
    (407, {"error": "proxy auth"}, FailureKind.AUTH),  # a proxy wants its credentials: every request fails
    (402, {"error": {"message": "Insufficient credits"}}, FailureKind.QUOTA),  # payment required
    (429, {"error": {"message": "slow down", "code": "rate_limit_exceeded"}}, FailureKind.RATE_LIMIT),
    (429, {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}, FailureKind.QUOTA),
    (500, {"error": {"message": "boom"}}, FailureKind.SERVER),
    (502, None, FailureKind.SERVER),
    (503, None, FailureKind.SERVER),
    (504, None, FailureKind.TIMEOUT),
    (400, {"error": {"message": "too long", "code": "context_length_exceeded"}}, FailureKind.BAD_REQUEST),
    (400, {"error": {"message": "filtered", "code": "content_filter"}}, FailureKind.REFUSAL),
])
def test_http_statuses_are_classified(status: int, body: object, kind: FailureKind) -> None:
    assert classify(status_error(status, body)) is kind


def test_connection_errors_tell_refused_from_unknown_host() -> None:
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as inner:
            raise httpx.ConnectError("refused") from inner
    except httpx.ConnectError as exc:
        refused = openai.APIConnectionError(request=REQUEST)
        refused.__cause__ = exc
    try:
        try:
            raise socket.gaierror(-2, "Name or service not known")
        except socket.gaierror as inner:
            raise httpx.ConnectError("dns") from inner
    except httpx.ConnectError as exc:
        unknown = openai.APIConnectionError(request=REQUEST)
        unknown.__cause__ = exc
    assert classify(refused) is FailureKind.CONNECT
    assert classify(unknown) is FailureKind.DNS


def test_a_timeout_is_a_timeout_even_when_the_sdk_calls_it_a_connection_error() -> None:
    assert classify(openai.APITimeoutError(request=REQUEST)) is FailureKind.TIMEOUT
    assert classify(TimeoutError()) is FailureKind.TIMEOUT
    assert classify(httpx.ReadTimeout("read")) is FailureKind.TIMEOUT


def test_bodies_that_are_not_api_answers_are_malformed() -> None:
    try:
        httpx.Response(200, request=REQUEST, content=b"<html>portal</html>").json()
    except json.JSONDecodeError as exc:
        assert classify(exc) is FailureKind.MALFORMED
    else:  # pragma: no cover - httpx parsed HTML
        pytest.fail("no JSON error")
    assert classify(ValueError("Unexpected response type from OpenAI-compatible endpoint: str")) \
        is FailureKind.MALFORMED
    assert classify(json.JSONDecodeError("x", "doc", 0)) is FailureKind.OTHER  # the model's own text, not the body


def test_a_200_whose_body_is_broken_is_malformed_with_the_response_attached() -> None:
    """langchain-openai attaches the response to the error it re-raises: its status (200) is no HTTP error."""
    response = httpx.Response(200, request=REQUEST, content=b'{"id": "chatcmpl-1", "choices": [')
    try:
        response.json()
    except json.JSONDecodeError as exc:
        exc.response = response  # type: ignore[attr-defined]
        assert classify(exc) is FailureKind.MALFORMED
    else:  # pragma: no cover - httpx parsed half a body
        pytest.fail("no JSON error")


def test_a_replayed_failure_keeps_its_kind() -> None:
    exc = RuntimeError("recorded")
    exc.kgagents_failure_kind = "server error"  # type: ignore[attr-defined]
    assert classify(exc) is FailureKind.SERVER


def test_remedies() -> None:
    for kind in (FailureKind.AUTH, FailureKind.NOT_FOUND, FailureKind.QUOTA):
        assert remedy(kind, answered=True) is Remedy.FAIL_NOW
    for kind in (FailureKind.CONNECT, FailureKind.DNS):
        assert remedy(kind, answered=False) is Remedy.FAIL_NOW
        assert remedy(kind, answered=True) is Remedy.RETRY
    for kind in (FailureKind.SERVER, FailureKind.TIMEOUT, FailureKind.MALFORMED, FailureKind.RATE_LIMIT):
        assert remedy(kind, answered=False) is Remedy.RETRY
    for kind in (FailureKind.REFUSAL, FailureKind.BAD_REQUEST, FailureKind.OTHER):
        assert remedy(kind, answered=False) is Remedy.NO_RETRY


def test_a_model_that_never_answered_gives_up_after_a_run_of_one_kind() -> None:
    server = [FailureKind.SERVER] * NEVER_ANSWERED_ATTEMPTS
    assert never_answered_gives_up(server, answered=False) is FailureKind.SERVER
    assert never_answered_gives_up(server[:-1], answered=False) is None
    assert never_answered_gives_up(server, answered=True) is None
    assert never_answered_gives_up([FailureKind.RATE_LIMIT] * 5, answered=False) is None
    mixed = [FailureKind.SERVER, FailureKind.TIMEOUT, FailureKind.SERVER]
    assert never_answered_gives_up(mixed, answered=False) is None
    assert never_answered_gives_up([FailureKind.TIMEOUT, *server], answered=False) is FailureKind.SERVER
    # a refusal of what one request asked (its samples and re-asks are the same request) never ends a model: a
    # healthy server refuses a filtered prompt or a prompt too long every time it is asked
    for kind in (FailureKind.REFUSAL, FailureKind.BAD_REQUEST, FailureKind.OTHER):
        assert never_answered_gives_up([kind] * 6, answered=False) is None
    for kind in (FailureKind.MALFORMED, FailureKind.TIMEOUT):
        assert never_answered_gives_up([kind] * NEVER_ANSWERED_ATTEMPTS, answered=False) is kind


def test_a_200_carrying_an_error_object_is_a_server_error() -> None:
    """What langchain-openai raises for ``{"error": {...}}`` with a 200 (a proxy whose model failed), from the
    real client's parsing of such a body."""
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="m", api_key="x", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ValueError) as info:
        model._create_chat_result({"error": {"message": "upstream model is down", "code": 502}})
    assert classify(info.value) is FailureKind.SERVER
    with pytest.raises(ValueError) as info:
        model._create_chat_result({"error": "upstream model is down"})
    assert classify(info.value) is FailureKind.SERVER
    assert classify(ValueError("an unrelated value error")) is FailureKind.OTHER
