"""An OpenAI-compatible chat-completions server on loopback that answers from a script after a fixed latency.

Benchmarks point the real ``langchain-openai`` client at it (``kgagents.evals.bench_batch --model-path http``), so every
model call pays what a user's pays on the client side: our LLM layer, LangChain's chat-model run, the OpenAI SDK,
its HTTP client, JSON and pydantic. The server runs in a process of its own (:class:`LatencyServer` starts and
stops it), so its CPU is not counted as the client's.

``POST /v1/chat/completions`` (HTTP/1.1 with keep-alive) takes the first step of a
:class:`~kgagents.core.scripted.ScriptedChatModel` script whose ``when`` pattern matches the request's message texts
(joined by newlines; after ``[stage: <stage>]`` where the request carries the call's stage in the
``X-KGAgents-Stage`` header, as the scripted model matches a call's metadata), waits ``latency`` seconds (without
blocking other requests) and answers as OpenAI does: ``structured`` as a call of the tool the request forces
through ``tool_choice`` (else its first tool), or as JSON content for a ``response_format`` request;
``tool_calls`` as those calls; ``content`` as text; ``raise`` as an HTTP error (``status``, default 500);
``auto`` as a reply made from the schema the request carries (:func:`auto_reply`). A request for ``n`` choices
gets that many, each the step's reply. A request no step matches gets a 400 that says so, or, with ``auto``
fallback, the reply of an empty ``auto`` step. Every reply carries ``usage`` (about four characters a token).

An ``auto`` step (``{"when": ..., "auto": {"tool": NAME, "values": {...}, "content": TEXT}}``) lets one script
answer every workflow's calls whatever their schemas: a ``response_format`` request gets JSON content valid for
its JSON schema, a request with tools a call of ``tool`` (else the forced tool, else the first) with arguments
valid for that tool's parameters, a plain request ``content`` (default ``"ok"``). ``values`` fix top-level
fields: a JSON value, or ``{"$prompt": REGEX}`` for the first match in the prompt (its first group, if any;
``"$last": true`` the last; ``"$all": true`` a list of every match, ``"$max": N`` at most N), falling back to a
generated value where nothing matches.

    python -m kgagents.evals.latency_server SCRIPT.json [--latency 0.2] [--port 0]

prints ``http://127.0.0.1:PORT/v1`` on its first line once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kgagents.core.scripted import STAGE_HEADER, ScriptedChatModel, ScriptExhausted


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


def example_value(schema: Any, defs: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A value valid for the JSON schema ``schema`` (``$ref`` resolved in ``defs``): an enum's or a union's first
    choice, the minimum of a number, ``false``, ``"x"``, an array of ``minItems`` (at least one) items, an object
    with every property."""
    if not isinstance(schema, dict) or depth > 20:
        return None
    defs = {**(defs or {}), **schema.get("$defs", {}), **schema.get("definitions", {})}
    if "$ref" in schema:
        return example_value(defs.get(str(schema["$ref"]).rsplit("/", 1)[-1], {}), defs, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            options = [o for o in schema[key] if not (isinstance(o, dict) and o.get("type") == "null")]
            return example_value((options or schema[key])[0], defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        return {name: example_value(prop, defs, depth + 1) for name, prop in schema.get("properties", {}).items()}
    if kind == "array":
        return [example_value(schema.get("items", {}), defs, depth + 1)
                for _ in range(max(1, int(schema.get("minItems", 1))))]
    if kind in ("integer", "number"):
        low: Any = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        return int(low) + (1 if "exclusiveMinimum" in schema else 0) if kind == "integer" else float(low)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "x" * max(1, int(schema.get("minLength", 1)))


def _fixed_value(spec: Any, prompt: str, fallback: Any) -> Any:
    """A field's value from an ``auto`` step's ``values`` (see the module docstring)."""
    if not (isinstance(spec, dict) and "$prompt" in spec):
        return spec
    matches = [m.group(1) if m.groups() else m.group(0) for m in re.finditer(spec["$prompt"], prompt, re.DOTALL)]
    if spec.get("$last"):
        matches.reverse()
    if spec.get("$all"):
        return matches[:spec["$max"]] if "$max" in spec else matches
    return matches[0] if matches else fallback


def request_schema(body: dict[str, Any], tool: str | None = None) -> tuple[str | None, dict[str, Any] | None]:
    """The JSON schema a reply must follow and the tool it calls: ``(None, schema)`` for a ``response_format``
    request, ``(name, parameters)`` for a request with tools (``tool``, else the forced one, else the first),
    ``(None, None)`` for a plain one."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return None, (fmt.get("json_schema") or {}).get("schema") or {}
    tools = {t.get("function", {}).get("name"): t.get("function", {}) for t in body.get("tools") or []
             if isinstance(t, dict)}
    if not tools:
        return None, None
    name = tool if tool in tools else forced_tool(body)
    return name, tools.get(name, {}).get("parameters") or {"type": "object", "properties": {}}


def auto_reply(auto: dict[str, Any], body: dict[str, Any], prompt: str) -> dict[str, Any]:
    """The reply step an ``auto`` step stands for, for this request (see the module docstring)."""
    tool, schema = request_schema(body, auto.get("tool"))
    if schema is None:
        return {"content": str(auto.get("content", "ok"))}
    value = example_value(schema)
    if isinstance(value, dict):
        value.update({k: _fixed_value(v, prompt, value.get(k)) for k, v in (auto.get("values") or {}).items()})
    if tool is None:
        return {"structured": value}
    return {"tool_calls": [{"name": tool, "args": value}]}


class Responder:
    """Answers chat-completions request bodies from a script (see the module docstring); ``auto_fallback``:
    a request no step matches gets a reply made from its schema rather than an error."""

    def __init__(self, steps: list[dict[str, Any]], model_name: str = "latency-server", *,
                 auto_fallback: bool = False) -> None:
        self.script = ScriptedChatModel(steps=script_steps(steps), script_name="latency-server")
        self.model_name, self.auto_fallback = model_name, auto_fallback
        self._ids = itertools.count(1)

    def answer(self, body: Any, stage: str | None = None) -> tuple[int, dict[str, Any]]:
        """The HTTP status and the JSON body that answer the request ``body`` (``stage``: the call's stage, from
        the ``X-KGAgents-Stage`` header)."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return 400, _error("'messages' is a required list", "invalid_request_error")
        if body.get("stream"):
            return 400, _error("this server does not stream; send stream=false", "invalid_request_error")
        prompt = "\n".join(message_text(m) for m in body["messages"] if isinstance(m, dict))
        if stage:
            prompt = f"[stage: {stage}]\n{prompt}"
        try:
            step = self.script.next_step(prompt)
        except ScriptExhausted as exc:
            if not self.auto_fallback:
                return 400, _error(str(exc), "invalid_request_error")
            step = {"auto": {}}
        finally:
            self.script.calls.clear()  # the script model keeps every prompt for tests; a server must not
        if "auto" in step:
            step = auto_reply(step["auto"], body, prompt)
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


def script_steps(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``steps`` as a :class:`ScriptedChatModel` checks them: an ``auto`` step is a reply of its own kind."""
    out = []
    for step in steps:
        if "auto" in step:
            if any(k in step for k in ("structured", "tool_calls", "content", "raise")):
                raise ValueError(f"an auto step has no other reply: {step}")
            if not isinstance(step["auto"], dict):
                raise ValueError(f"'auto' is an object (tool, values, content): {step}")
            step = {**step, "structured": {}}  # stands in for the auto reply when the script checks its steps
        out.append(step)
    return out


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class _HTTPProtocol(asyncio.Protocol):
    """HTTP/1.1 with keep-alive, just enough for an OpenAI client: a request line, headers, a ``Content-Length``
    body. A reply is written ``latency`` seconds after its request arrived, by a timer: no task per request."""

    def __init__(self, responder: Responder, latency: float) -> None:
        self.responder, self.latency = responder, latency
        self.buffer = b""
        self.stage: str | None = None
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
            self.stage = headers.get(STAGE_HEADER.lower()) or None
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
        status, payload = self.responder.answer(request, self.stage)
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


def serve(steps: list[dict[str, Any]], latency: float, port: int = 0, auto_fallback: bool = False) -> None:
    """Serve until killed; print the base URL on stdout once the socket listens.

    A plain asyncio protocol (on uvloop where it is installed) rather than a web framework: the server shares the
    machine's cores with the client it stands in for a remote API to, so it should take as little CPU as it can.
    """
    responder = Responder(steps, auto_fallback=auto_fallback)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _HTTPProtocol(responder, latency), "127.0.0.1", port,
                                          backlog=4096, reuse_address=True)
        print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", flush=True)
        async with server:
            await server.serve_forever()

    try:
        import uvloop  # optional: not installed on Windows
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())


class LatencyServer:
    """The server in a child process, for a ``with`` block: ``base_url`` is what an OpenAI client takes."""

    def __init__(self, steps: list[dict[str, Any]], latency: float, *, start_timeout_s: float = 30.0,
                 auto_fallback: bool = False) -> None:
        if latency < 0:
            raise ValueError(f"latency must be >= 0 seconds, got {latency}")
        Responder(steps)  # a bad script is an error here, not in the child
        self.steps, self.latency, self.start_timeout_s = steps, latency, start_timeout_s
        self.auto_fallback = auto_fallback
        self.base_url = ""
        self._proc: subprocess.Popen[str] | None = None
        self._script: Path | None = None

    def start(self) -> LatencyServer:
        fd, name = tempfile.mkstemp(prefix="kgagents-latency-script-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"steps": self.steps}, f)
        self._script = Path(name)
        self._proc = subprocess.Popen([sys.executable, "-m", "kgagents.evals.latency_server", name, "--latency",
                                       str(self.latency), *(["--auto"] if self.auto_fallback else [])],
                                      stdout=subprocess.PIPE, text=True,
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
    parser.add_argument("--auto", action="store_true",
                        help="a request no step matches gets a reply made from its schema, not an error")
    args = parser.parse_args(argv)
    if args.latency < 0:
        parser.error("--latency must be >= 0")
    data = json.loads(Path(args.script).read_text(encoding="utf-8"))
    serve(data["steps"] if isinstance(data, dict) else data, args.latency, args.port, args.auto)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
