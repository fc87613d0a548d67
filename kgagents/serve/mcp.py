"""Clean MCP answers: a served graph's output reaches an MCP host as a JSON object, not a Python ``repr``.

LangGraph's server answers an MCP ``tools/call`` (``POST /mcp``) with the run's output as one text block, written
with ``repr()``: single quotes, ``None``, ``True``, which an MCP host cannot parse as JSON. ``langgraph.json``
names :data:`app` as the server's custom HTTP app (``http.app``); its one middleware, :class:`JsonToolResults`,
rewrites the answer of a successful tool call so that its text block is the output as JSON and its
``structuredContent`` is the same object (the MCP specification's place for a tool's structured result, which a
host reads without parsing text). Everything else passes untouched: other paths and methods, errors
(``isError``), answers that are not JSON-RPC, and a text that is not the ``repr`` of plain data.

Reading the ``repr`` back is :func:`ast.literal_eval`: it evaluates literals only (strings, numbers, lists,
dicts, ``None``, booleans), never names or calls, so an output's text cannot run anything; every answer that
reaches this middleware came from a run's output, which the server decoded from JSON before writing its ``repr``,
so it is exactly such literals.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MCP_PATH", "JsonToolResults", "app", "json_response_body", "json_tool_result", "plain_value"]

#: Where LangGraph's server answers MCP (streamable HTTP).
MCP_PATH = "/mcp"
#: The largest answer rewritten (a compact output is a few kB; a larger body passes as it is).
MAX_BODY_BYTES = 8 << 20


def plain_value(text: str) -> Any:
    """The plain data whose ``repr`` is ``text`` (dicts, lists, strings, numbers, booleans, ``None``); raises
    ``ValueError`` for anything else (a name, a call, a set, text that is no literal at all)."""
    try:
        value = ast.literal_eval(text)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not the repr of plain data: {type(exc).__name__}") from None
    _check_plain(value)
    return value


def _check_plain(value: Any) -> None:
    """Raise ``ValueError`` unless ``value`` is JSON's data (what ``json.dumps`` writes back as it was)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                raise ValueError("a key that is not a string")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise ValueError("a number JSON cannot hold")
        elif not (item is None or isinstance(item, bool | int | str)):
            raise ValueError(f"a {type(item).__name__}, which JSON does not have")


def json_tool_result(result: Any) -> Any:
    """An MCP ``tools/call`` result with its output as JSON: a successful result whose one text block is the
    ``repr`` of an object gets that block as the object's JSON and the object as ``structuredContent``. Any other
    result (an error, several blocks, a text that is no such ``repr``, an output that is not an object) is
    returned as it is."""
    if not isinstance(result, dict) or result.get("isError") or "structuredContent" in result:
        return result
    content = result.get("content")
    if not (isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict)
            and content[0].get("type") == "text" and isinstance(content[0].get("text"), str)):
        return result
    try:
        value = plain_value(content[0]["text"])
    except ValueError:
        return result
    if not isinstance(value, dict):  # structuredContent is an object; other outputs keep the server's text
        return result
    block = {**content[0], "text": json.dumps(value, ensure_ascii=False)}
    return {**result, "content": [block], "structuredContent": value}


def json_response_body(body: bytes) -> bytes | None:
    """The JSON-RPC answer ``body`` with each tool call's result rewritten by :func:`json_tool_result`; ``None``
    when nothing changes (not JSON-RPC, no tool result to rewrite, too large)."""
    if len(body) > MAX_BODY_BYTES:
        return None
    try:
        message = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        return None
    messages = message if isinstance(message, list) else [message]
    changed = False
    out = []
    for item in messages:
        if isinstance(item, dict) and item.get("jsonrpc") == "2.0" and "result" in item:
            result = json_tool_result(item["result"])
            if result is not item["result"]:
                item = {**item, "result": result}
                changed = True
        out.append(item)
    if not changed:
        return None
    return json.dumps(out if isinstance(message, list) else out[0], ensure_ascii=False).encode("utf-8")


class JsonToolResults:
    """ASGI middleware: a ``POST`` to :data:`MCP_PATH` answered with ``application/json`` gets its tool results
    as JSON (:func:`json_response_body`); every other request and answer passes untouched, streamed as it
    came."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or _path(scope) != MCP_PATH:
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def send_json(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                if _is_json(message):
                    start = message  # held until the body is whole
                    return
                await send(message)
                return
            if message["type"] != "http.response.body" or start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            rewritten = json_response_body(body)
            if rewritten is not None:
                body = rewritten
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode("ascii")))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body, "more_body": False})

        await self.app(scope, receive, send_json)


def _path(scope: Scope) -> str:
    """The request's path below the app's mount point (``root_path``), without a trailing slash."""
    path = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root):]
    return path.rstrip("/") or "/"


def _is_json(start: Message) -> bool:
    for key, value in start.get("headers", []):
        if key.lower() == b"content-type":
            return value.split(b";")[0].strip().lower() == b"application/json"
    return False


#: The custom HTTP app ``langgraph.json`` names (``http.app``): no routes of its own, only the middleware, which
#: LangGraph's server puts around its own routes.
app = Starlette(middleware=[Middleware(JsonToolResults)])
