"""A small Ollama-compatible server on loopback: the model list (GET /api/tags) and chat (POST /api/chat).

Enough of Ollama's native API for model auto-detection and for ``langchain-ollama``'s ``ChatOllama`` to hold a
plain conversation: ``server.replies`` are answered in order (then ``"ok"``), streamed as NDJSON when the
request asks for a stream (Ollama's default), with ``prompt_eval_count`` / ``eval_count`` as token usage.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802
        fake = self.server.fake
        fake.record(self.command, self.path, None)
        if self.path.rstrip("/") == "/api/tags":
            models = [{"name": n, "model": n, "modified_at": "2025-01-01T00:00:00Z", "size": 1,
                       "digest": "0" * 64, "details": {"format": "gguf", "family": "fake"}} for n in fake.models]
            self._send(200, json.dumps({"models": models}).encode())
        elif self.path.rstrip("/") == "/api/version":
            self._send(200, b'{"version": "0.0.0-fake"}')
        elif self.path == "/":
            self._send(200, b"Ollama is running", "text/plain")
        else:
            self._send(404, b'{"error": "not found"}')

    def do_POST(self) -> None:  # noqa: N802
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._send(400, b'{"error": "invalid JSON"}')
            return
        fake.record(self.command, self.path, body)
        if self.path.rstrip("/") != "/api/chat":
            self._send(404, b'{"error": "not found"}')
            return
        model = body.get("model", "")
        if model not in fake.models:
            self._send(404, json.dumps({"error": f"model '{model}' not found"}).encode())
            return
        text = fake.next_reply()
        base = {"model": model, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        final = {**base, "message": {"role": "assistant", "content": "" if body.get("stream", True) else text},
                 "done": True, "done_reason": "stop", "total_duration": 1, "load_duration": 0,
                 "prompt_eval_count": fake.usage[0], "prompt_eval_duration": 1,
                 "eval_count": fake.usage[1], "eval_duration": 1}
        if body.get("stream", True):
            chunk = {**base, "message": {"role": "assistant", "content": text}, "done": False}
            data = (json.dumps(chunk) + "\n" + json.dumps(final) + "\n").encode()
            self._send(200, data, "application/x-ndjson")
        else:
            self._send(200, json.dumps(final).encode())


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeOllamaServer


class FakeOllamaServer:
    """A running fake Ollama server (context manager); :attr:`url` is what ``OLLAMA_HOST`` takes."""

    def __init__(self, models: list[str] | None = None, usage: tuple[int, int] = (9, 3)) -> None:
        self.models = list(models) if models is not None else ["qwen2.5:7b"]
        self.usage = usage
        self.replies: list[str] = []
        self.requests: list[tuple[str, str, Any]] = []
        self._lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def record(self, method: str, path: str, body: Any) -> None:
        with self._lock:
            self.requests.append((method, path, body))

    def next_reply(self) -> str:
        with self._lock:
            return self.replies.pop(0) if self.replies else "ok"

    def start(self) -> FakeOllamaServer:
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-ollama-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeOllamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "the server is not running"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def ollama_server() -> Iterator[FakeOllamaServer]:
    """A running :class:`FakeOllamaServer` with one chat model, ``qwen2.5:7b``."""
    with FakeOllamaServer() as server:
        yield server
