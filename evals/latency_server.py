"""An OpenAI-compatible chat-completions server on loopback that answers from a script after a fixed latency.

Benchmarks point the real ``langchain-openai`` client at it (``kgagents.evals.bench_batch --model-path http``), so every
model call pays what a user's pays on the client side: our LLM layer, LangChain's chat-model run, the OpenAI SDK,
its HTTP client, JSON and pydantic. The server runs in a process of its own (:class:`LatencyServer` starts and
stops it), so its CPU is not counted as the client's.

``POST /v1/chat/completions`` (HTTP/1.1 with keep-alive) takes the first step of a
:class:`~kgagents.core.scripted.ScriptedChatModel` script whose ``when`` pattern matches the request's message texts
(joined by newlines), waits ``latency`` seconds (without blocking other requests) and answers as OpenAI does:
``structured`` as a call of the tool the request forces through ``tool_choice`` (else its first tool), or as JSON
content for a ``response_format`` request; ``tool_calls`` as those calls; ``content`` as text; ``raise`` as an
HTTP error (``status``, default 500). A request for ``n`` choices gets that many, each the step's reply. A request
no step matches gets a 400 that says so. Every reply carries ``usage`` (about four characters a token).

    python -m kgagents.evals.latency_server SCRIPT.json [--latency 0.2] [--port 0]

prints ``http://127.0.0.1:PORT/v1`` on its first line once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kgagents.core.scripted import ScriptedChatModel, ScriptExhausted


def message_text(message: dict[str, Any]) -> str:
    """The text of one chat message (string content or text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(part.get("text", "")) for part in content or []
                     if isinstance(part, dict) and part.get("type") == "text")


def forced_tool(body: dict[str, Any]) -> str:
    """The tool a chat-completions request forces (``tool_choice``), else its first tool: what a structured reply
    calls."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        if name:
            return str(name)
    tools = body.get("tools") or []
    return str(tools[0].get("function", {}).get("name", "tool")) if tools else "tool"


class Responder:
    """Answers chat-completions request bodies from a script (see the module docstring)."""

    def __init__(self, steps: list[dict[str, Any]], model_name: str = "latency-server") -> None:
        self.script = ScriptedChatModel(steps=steps, script_name="latency-server")
        self.model_name = model_name
        self._ids = itertools.count(1)

    def answer(self, body: Any) -> tuple[int, dict[str, Any]]:
        """The HTTP status and the JSON body that answer the request ``body``."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return 400, _error("'messages' is a required list", "invalid_request_error")
        if body.get("stream"):
            return 400, _error("this server does not stream; send stream=false", "invalid_request_error")
        prompt = "\n".join(message_text(m) for m in body["messages"] if isinstance(m, dict))
        try:
            step = self.script.next_step(prompt)
        except ScriptExhausted as exc:
            return 400, _error(str(exc), "invalid_request_error")
        finally:
            self.script.calls.clear()  # the script model keeps every prompt for tests; a server must not
        if "raise" in step:
            return int(step.get("status") or 500), _error(str(step["raise"]), "server_error")
        n = 1 if body.get("n") is None else body["n"]
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 128:
            return 400, _error("'n' must be an integer from 1 to 128", "invalid_request_error")
        choices = [self._choice(index, step, body) for index in range(n)]
        out = sum(len(json.dumps(choice["message"])) for choice in choices)
        prompt_tokens, completion_tokens = len(prompt) // 4 + 1, out // 4 + 1
        return 200, {"id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion", "created": int(time.time()),
                     "model": body.get("model") or self.model_name, "system_fingerprint": "fp_latency",
                     "choices": choices,
                     "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                               "total_tokens": prompt_tokens + completion_tokens}}

    def _choice(self, index: int, step: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """Choice ``index`` of the reply: the step's reply (each choice with tool calls of its own ids)."""
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        finish = "stop"
        if "structured" in step and body.get("response_format"):
            message["content"] = json.dumps(step["structured"])
        elif "structured" in step or "tool_calls" in step:
            calls = ([(forced_tool(body), step["structured"])] if "structured" in step
                     else [(c["name"], c.get("args", {})) for c in step["tool_calls"]])
            message["tool_calls"] = [{"id": f"call_{next(self._ids)}", "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(args)}}
                                     for name, args in calls]
            finish = "tool_calls"
        else:
            message["content"] = str(step["content"])
        return {"index": index, "message": message, "finish_reason": finish, "logprobs": None}


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class _HTTPProtocol(asyncio.Protocol):
    """HTTP/1.1 with keep-alive, just enough for an OpenAI client: a request line, headers, a ``Content-Length``
    body. A reply is written ``latency`` seconds after its request arrived, by a timer: no task per request."""

    def __init__(self, responder: Responder, latency: float) -> None:
        self.responder, self.latency = responder, latency
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            try:
                length = int(headers.get("content-length") or 0)
            except ValueError:
                length = -1
            if length < 0 or "chunked" in headers.get("transfer-encoding", ""):
                self._send(400, _error("send the body with a Content-Length", "invalid_request_error"), close=True)
                return
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4:end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            method, _, rest = head[0].partition(" ")
            path = rest.rpartition(" ")[0].split("?", 1)[0].rstrip("/")
            self._answer(method, path, body, close=headers.get("connection", "").lower() == "close")

    def _answer(self, method: str, path: str, body: bytes, *, close: bool) -> None:
        if (method, path) == ("GET", "/v1/models"):
            self._send(200, {"object": "list", "data": [{"id": self.responder.model_name, "object": "model",
                                                         "created": 0, "owned_by": "latency-server"}]}, close=close)
            return
        if (method, path) != ("POST", "/v1/chat/completions"):
            self._send(404, _error(f"no route {method} {path}", "invalid_request_error"), close=close)
            return
        try:
            request = json.loads(body)
        except ValueError:
            self._send(400, _error("the request body is not JSON", "invalid_request_error"), close=close)
            return
        status, payload = self.responder.answer(request)
        if self.latency > 0:
            asyncio.get_running_loop().call_later(self.latency, self._send, status, payload, close)
        else:
            self._send(status, payload, close=close)

    def _send(self, status: int, payload: dict[str, Any], close: bool = False) -> None:
        if self.transport is None or self.transport.is_closing():
            return  # the client gave up
        data = json.dumps(payload).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
        connection = "Connection: close\r\n" if close else ""
        self.transport.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                             f"Content-Length: {len(data)}\r\n{connection}\r\n".encode() + data)
        if close:
            self.transport.close()


def serve(steps: list[dict[str, Any]], latency: float, port: int = 0) -> None:
    """Serve until killed; print the base URL on stdout once the socket listens.

    A plain asyncio protocol (on uvloop where it is installed) rather than a web framework: the server shares the
    machine's cores with the client it stands in for a remote API to, so it should take as little CPU as it can.
    """
    responder = Responder(steps)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _HTTPProtocol(responder, latency), "127.0.0.1", port,
                                          backlog=4096, reuse_address=True)
        print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", flush=True)
        async with server:
            await server.serve_forever()

    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())


class LatencyServer:
    """The server in a child process, for a ``with`` block: ``base_url`` is what an OpenAI client takes."""

    def __init__(self, steps: list[dict[str, Any]], latency: float, *, start_timeout_s: float = 30.0) -> None:
        if latency < 0:
            raise ValueError(f"latency must be >= 0 seconds, got {latency}")
        ScriptedChatModel(steps=steps)  # a bad script is an error here, not in the child
        self.steps, self.latency, self.start_timeout_s = steps, latency, start_timeout_s
        self.base_url = ""
        self._proc: subprocess.Popen[str] | None = None
        self._script: Path | None = None

    def start(self) -> LatencyServer:
        fd, name = tempfile.mkstemp(prefix="kgagents-latency-script-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"steps": self.steps}, f)
        self._script = Path(name)
        self._proc = subprocess.Popen([sys.executable, "-m", "kgagents.evals.latency_server", name, "--latency",
                                       str(self.latency)], stdout=subprocess.PIPE, text=True,
                                      cwd=Path(__file__).resolve().parent.parent)
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], self.start_timeout_s)
        line = self._proc.stdout.readline().strip() if ready else ""
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError(f"the latency server did not start within {self.start_timeout_s:g} s")
        self.base_url = line
        return self

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None
        if self._script is not None:
            self._script.unlink(missing_ok=True)
            self._script = None

    def cpu_s(self) -> float:
        """CPU seconds the server process has used so far (Linux; 0.0 where /proc is missing)."""
        if self._proc is None:
            return 0.0
        try:
            fields = Path(f"/proc/{self._proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> LatencyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgagents.evals.latency_server",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("script", help="a JSON script: {\"steps\": [...]} or a list of steps")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds before each reply (default 0.2)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    args = parser.parse_args(argv)
    if args.latency < 0:
        parser.error("--latency must be >= 0")
    data = json.loads(Path(args.script).read_text(encoding="utf-8"))
    serve(data["steps"] if isinstance(data, dict) else data, args.latency, args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
