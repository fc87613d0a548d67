"""Who may call a served kgagents (kgagents/serve/callers.py): the callers' tokens from the server's environment,
the one-user mode without them, and the web origins the server takes, request by request."""

from __future__ import annotations

import json
import os

import pytest

from kgagents.core.config import ConfigurationError
from kgagents.serve.callers import (
    LOCAL_IDENTITY,
    ONE_TOKEN_IDENTITY,
    STUDIO_ORIGINS,
    Callers,
    Refusal,
    allowed_origins,
    callers_from,
    check_request,
    is_loopback_host,
    origin_allowed,
    token_of,
)

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef01"
STUDIO = (STUDIO_ORIGINS, None)
LOOPBACK = {"host": "127.0.0.1:2024"}


def test_tokens_come_from_the_environment_each_with_its_identity(tmp_path):
    assert callers_from({}).one_user
    assert callers_from({"KGAGENTS_SERVE_TOKEN": f" {ALICE} "}).tokens == ((ONE_TOKEN_IDENTITY, ALICE),)
    many = callers_from({"KGAGENTS_SERVE_TOKENS": f"alice:{ALICE}, bob:{BOB}"})
    assert many.tokens == (("alice", ALICE), ("bob", BOB)) and not many.one_user
    listed = tmp_path / "tokens"
    listed.write_text(f"# the team\nalice:{ALICE}\n\nbob:{BOB}\n", encoding="utf-8")
    listed.chmod(0o600)
    assert callers_from({"KGAGENTS_SERVE_TOKENS_FILE": str(listed)}).tokens == many.tokens


@pytest.mark.parametrize(("environ", "message"), [
    ({"KGAGENTS_SERVE_TOKEN": "short"}, "too weak"),
    ({"KGAGENTS_SERVE_TOKENS": f"alice {ALICE}"}, "name:token"),
    ({"KGAGENTS_SERVE_TOKENS": f"al/ice:{ALICE}"}, "caller's name"),
    ({"KGAGENTS_SERVE_TOKENS": f"{LOCAL_IDENTITY}:{ALICE}"}, "caller's name"),
    ({"KGAGENTS_SERVE_TOKENS": f"alice:{ALICE},alice:{BOB}"}, "configured twice"),
    ({"KGAGENTS_SERVE_TOKENS": f"alice:{ALICE},bob:{ALICE}"}, "same token"),
    ({"KGAGENTS_SERVE_TOKENS": "alice:has a space in it ok"}, "too weak"),
    ({"KGAGENTS_SERVE_TOKENS_FILE": "/nonexistent/tokens"}, "cannot read"),
])
def test_a_bad_token_configuration_stops_the_server_with_what_to_fix(environ, message):
    with pytest.raises(ConfigurationError, match=message):
        callers_from(environ)


@pytest.mark.skipif(os.name != "posix", reason="file modes")
def test_a_tokens_file_that_others_may_read_is_refused(tmp_path):
    listed = tmp_path / "tokens"
    listed.write_text(f"alice:{ALICE}\n", encoding="utf-8")
    listed.chmod(0o644)
    with pytest.raises(ConfigurationError, match="chmod 600"):
        callers_from({"KGAGENTS_SERVE_TOKENS_FILE": str(listed)})


def test_a_token_identifies_its_caller_only_whole():
    callers = Callers((("alice", ALICE), ("bob", BOB)))
    assert callers.identify(ALICE) == "alice" and callers.identify(BOB) == "bob"
    for wrong in (None, "", ALICE[:-1], ALICE + "x", ALICE.upper(), BOB[1:], "é" * 30):
        assert callers.identify(wrong) is None


def test_the_token_travels_as_a_bearer_token_or_an_api_key():
    assert token_of({"authorization": f"Bearer {ALICE}"}) == ALICE
    assert token_of({"authorization": f"bearer   {ALICE} "}) == ALICE
    assert token_of({"x-api-key": ALICE}) == ALICE
    assert token_of({"authorization": f"Basic {ALICE}"}) is None
    assert token_of({"authorization": "Bearer "}) is None and token_of({}) is None


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.1:2024", True), ("127.8.9.1", True), ("localhost:2024", True),
    ("LOCALHOST", True), ("[::1]:2024", True), ("::1", True), ("localhost.", True),
    ("0.0.0.0", False), ("10.0.0.5:2024", False), ("evil.example:2024", False), ("localhost.evil.example", False),
    ("[::ffff:10.0.0.1]", False), ("", False), (None, False), ("127.0.0.1.evil.example", False),
])
def test_loopback_hosts(host, loopback):
    assert is_loopback_host(host) is loopback


def test_the_origins_are_the_servers_cors_configuration():
    assert allowed_origins({}) == (STUDIO_ORIGINS, None)
    http = json.dumps({"cors": {"allow_origins": ["https://smith.langchain.com"]}, "disable_a2a": True})
    assert allowed_origins({"LANGGRAPH_HTTP": http}) == (("https://smith.langchain.com",), None)
    own = json.dumps({"allow_origins": ["https://ui.example"], "allow_origin_regex": r"https://.*\.example"})
    assert allowed_origins({"LANGGRAPH_HTTP": http, "CORS_CONFIG": own}) == (("https://ui.example",),
                                                                            r"https://.*\.example")
    assert allowed_origins({"CORS_ALLOW_ORIGINS": "https://a.example,https://b.example"}) == (
        ("https://a.example", "https://b.example"), None)
    with pytest.raises(ConfigurationError, match="CORS_CONFIG is not JSON"):
        allowed_origins({"CORS_CONFIG": "{"})
    assert origin_allowed("https://x.example", ("*",), None)
    assert origin_allowed("https://b.example", (), r"https://.*\.example")
    assert not origin_allowed("https://b.example.evil", (), r"https://.*\.example")


def test_with_tokens_a_request_needs_one_and_a_page_of_another_origin_gets_nothing():
    callers = Callers((("alice", ALICE),))
    bearer = {"authorization": f"Bearer {ALICE}"}
    assert check_request(callers, bearer, "203.0.113.9", STUDIO) == "alice"  # from anywhere
    assert check_request(callers, {**bearer, "origin": STUDIO_ORIGINS[0]}, "127.0.0.1", STUDIO) == "alice"
    for headers in ({}, {"x-auth-scheme": "langsmith"}, {"authorization": "Bearer wrong-token-0123456789"},
                    {**LOOPBACK, "x-auth-scheme": "langsmith", "x-api-key": ALICE[:-1]}):
        with pytest.raises(Refusal) as refused:
            check_request(callers, headers, "127.0.0.1", STUDIO)
        assert refused.value.status == 401 and "Authorization: Bearer" in str(refused.value)
    with pytest.raises(Refusal) as refused:  # even with the token: a page must not drive it
        check_request(callers, {**bearer, "origin": "http://evil.example"}, "127.0.0.1", STUDIO)
    assert refused.value.status == 403 and "http://evil.example" in str(refused.value)


def test_without_tokens_only_this_machine_and_no_page_of_another_origin():
    one = Callers()
    assert check_request(one, LOOPBACK, "127.0.0.1", STUDIO) == LOCAL_IDENTITY
    assert check_request(one, {"host": "localhost:2024", "origin": STUDIO_ORIGINS[1]}, "::1", STUDIO) == LOCAL_IDENTITY
    refused_requests = [
        ({**LOOPBACK, "origin": "http://127.0.0.1:8000"}, "127.0.0.1"),  # another local page
        ({**LOOPBACK, "origin": "null"}, "127.0.0.1"),  # a sandboxed frame or a file:// page
        ({"host": "rebound.evil.example:2024"}, "127.0.0.1"),  # DNS rebinding: a loopback peer, a foreign name
        (LOOPBACK, "192.168.1.20"),  # another machine, through a 0.0.0.0 bind
        (LOOPBACK, None),
        ({}, "127.0.0.1"),
    ]
    for headers, client in refused_requests:
        with pytest.raises(Refusal) as refused:
            check_request(one, headers, client, STUDIO)
        assert refused.value.status == 403, (headers, client)
