"""``kgagents doctor`` and the chat models against hostile loopback servers: a redirect to another host (the
prompt must not follow), a key echoed in an error (never printed), a rate limit with a day-long Retry-After, a
model that is alive but slower than the limit (slow, not stuck)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kgagents.cli import main
from tests.fakes import isolate_model_env

KEY = "sk-review-SECRET-0123456789abcdef"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_model_env(monkeypatch, tmp_path)
    for name in ("NEO4J_URI", "FALKORDB_URL", "SPARQL_ENDPOINT", "CRAG_SERVER"):
        monkeypatch.delenv(name, raising=False)


def completion(text: str = "OK") -> bytes:
    return json.dumps({"id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


class Server:
    """A loopback server whose POST answer is ``post(handler)``; GET /v1/models lists gpt-4o-mini."""

    def __init__(self, post: Callable[[BaseHTTPRequestHandler], None], host: str = "127.0.0.1") -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                outer.seen.append(("GET", self.path, dict(self.headers)))
                send(self, 200, json.dumps({"object": "list", "data": [{"id": "gpt-4o-mini"}]}).encode())

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                outer.seen.append(("POST", self.path, dict(self.headers)))
                post(self)

        self.httpd = ThreadingHTTPServer((host, 0), H)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.host = host

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()


def send(h: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    h.send_header("Connection", "close")
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(data)
    h.close_connection = True


def doctor(url: str, monkeypatch: pytest.MonkeyPatch, *extra: str) -> int:
    monkeypatch.setenv("KGAGENTS_API_KEY", KEY)  # bound to KGAGENTS_BASE_URL's server
    monkeypatch.setenv("KGAGENTS_BASE_URL", url + "/v1")
    return main(["doctor", "--workflow", "ark", "--model", "gpt-4o-mini",
                 "--timeout", "2", "--call-timeout", "4", *extra])


def test_redirect_to_another_host_does_not_carry_the_key_and_is_flagged(monkeypatch, capsys) -> None:
    """A completion answered with 307 to another host: the key must not go there, and doctor must not call the
    endpoint usable (a run would send its prompts to a host nobody configured)."""
    other = Server(lambda h: send(h, 200, completion()), host="127.0.0.2")
    first = Server(lambda h: send(h, 307, b"", {"Location": other.url + "/v1/chat/completions"}))
    try:
        code = doctor(first.url, monkeypatch)
    finally:
        first.close(), other.close()
    out = capsys.readouterr().out
    print(out)
    leaked = [h for m, p, h in other.seen if any(KEY in v for v in h.values())]
    assert not leaked, f"the key went to the other host: {leaked}"
    assert not other.seen, f"the prompt went to a host that was not configured: {other.seen}"
    assert code == 1, "a model endpoint that redirects elsewhere is reported as usable"
    assert "redirected" in out and "127.0.0.2" in out and "set the base URL to the final address" in out


def test_a_run_stops_at_a_redirect_naming_where_it_points(monkeypatch) -> None:
    """A run's call answered with a redirect: nothing goes to the other host, and the run's error says where the
    server points and what to set, without retrying."""
    import asyncio

    from kgagents.core.retry import ModelUnavailableError
    from kgagents.nodes.kgot import KGoTContext
    from kgagents.nodes.llm import LLMCaller
    from kgagents.nodes.models import build_chat_model

    other = Server(lambda h: send(h, 200, completion()), host="127.0.0.2")
    first = Server(lambda h: send(h, 307, b"", {"Location": other.url + "/v1/chat/completions"}))
    monkeypatch.setenv("KGAGENTS_API_KEY", KEY)
    monkeypatch.setenv("KGAGENTS_BASE_URL", first.url + "/v1")
    try:
        model = build_chat_model("gpt-4o-mini", base_url=first.url + "/v1", timeout_s=5.0)
        caller = LLMCaller(KGoTContext(model=model, max_api_retries=3, api_backoff_base_s=0.0), "graph_executor")
        with pytest.raises(ModelUnavailableError) as raised:
            asyncio.run(caller.text("q"))
        with pytest.raises(Exception, match="307"):
            model.invoke("q")  # the sync client follows no redirect either
    finally:
        first.close(), other.close()
    assert not other.seen
    assert len([x for x in first.seen if x[0] == "POST"]) == 2  # one each: a redirect is not retried
    assert "127.0.0.2" in str(raised.value) and "set the base URL to the final address" in str(raised.value)


def test_a_run_error_does_not_carry_an_echoed_key(monkeypatch) -> None:
    import asyncio

    from kgagents.core.retry import ModelUnavailableError
    from kgagents.nodes.kgot import KGoTContext
    from kgagents.nodes.llm import LLMCaller, LLMError
    from kgagents.nodes.models import build_chat_model

    def echo(status: int) -> Callable[[BaseHTTPRequestHandler], None]:
        def answer(h: BaseHTTPRequestHandler) -> None:
            send(h, status, json.dumps({"error": {"message": h.headers.get("Authorization"), "type": "x"}}).encode())
        return answer

    monkeypatch.setenv("KGAGENTS_API_KEY", KEY)
    for status, error in ((400, LLMError), (401, ModelUnavailableError)):
        s = Server(echo(status))
        monkeypatch.setenv("KGAGENTS_BASE_URL", s.url + "/v1")
        try:
            model = build_chat_model("gpt-4o-mini", base_url=s.url + "/v1", timeout_s=5.0)
            caller = LLMCaller(KGoTContext(model=model, max_api_retries=0), "graph_executor")
            with pytest.raises(error) as raised:
                asyncio.run(caller.text("q"))
        finally:
            s.close()
        assert KEY not in str(raised.value) and "Bearer REMOVED" in str(raised.value)


def test_a_server_that_echoes_the_key_in_its_error_does_not_put_it_on_the_terminal(monkeypatch, capsys) -> None:
    def echo(h: BaseHTTPRequestHandler) -> None:
        body = {"error": {"message": f"{h.headers.get('Authorization')}", "type": "x"}}
        send(h, 400, json.dumps(body).encode())

    s = Server(echo)
    try:
        doctor(s.url, monkeypatch)
    finally:
        s.close()
    out = capsys.readouterr().out
    print(out)
    assert KEY not in out, "doctor prints the API key that a server echoed back"
    assert "Bearer REMOVED" in out


def test_429_forever_with_a_huge_retry_after_ends_quickly(monkeypatch, capsys) -> None:
    s = Server(lambda h: send(h, 429, b'{"error":{"message":"slow down","type":"rate_limit_error"}}',
                              {"Retry-After": "86400"}))
    try:
        doctor(s.url, monkeypatch)
    finally:
        s.close()
    out = capsys.readouterr().out
    assert len([x for x in s.seen if x[0] == "POST"]) <= 2  # no waiting out a day's Retry-After: one retry at most
    assert "rate limit" in out


def test_a_slow_but_alive_model_is_not_called_stuck(monkeypatch, capsys) -> None:
    """A model that answers after 6 s with --call-timeout 4: the doctor says "stuck, overloaded, or the address is
    wrong" and exits 1; it should say the model is alive but slower than the limit (a run's own per-call limit is
    what matters, not the doctor's 30 s default)."""
    def slow(h: BaseHTTPRequestHandler) -> None:
        time.sleep(6)
        send(h, 200, completion())

    s = Server(slow)
    try:
        doctor(s.url, monkeypatch)
    finally:
        s.close()
    out = capsys.readouterr().out
    print(out)
    assert "stuck" not in out, "a slow but alive model is reported as stuck/wrong address"
    assert "reachable" in out and "did not answer a completion within 4 s" in out and "--call-timeout 120" in out


def test_a_redirect_on_the_model_list_is_not_a_usable_endpoint(monkeypatch, capsys) -> None:
    """The completion answered with a 302 to a login page on another host (a captive portal)."""
    other = Server(lambda h: send(h, 200, completion()), host="127.0.0.2")
    s = Server(lambda h: send(h, 302, b"", {"Location": other.url + "/login"}))
    try:
        code = doctor(s.url, monkeypatch)
    finally:
        s.close(), other.close()
    out = capsys.readouterr().out
    print(out, other.seen)
    assert not other.seen
    assert code == 1 and "redirected — the server answered 302" in out and "127.0.0.2" in out
