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
so it is exactly such literals. Only a small answer is rewritten (:data:`MAX_BODY_BYTES`, :data:`MAX_VALUES`,
:data:`MAX_DEPTH`: a larger one keeps the server's text, streamed on as it comes), and in a worker thread, so the
server's event loop goes on serving other requests meanwhile.
"""

from __future__ import annotations

import ast
import asyncio
import json
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MAX_BODY_BYTES", "MAX_DEPTH", "MAX_VALUES", "MCP_PATH", "JsonToolResults", "app", "check_size",
           "json_response_body", "json_tool_result", "plain_value"]

#: Where LangGraph's server answers MCP (streamable HTTP).
MCP_PATH = "/mcp"
#: The largest answer held and rewritten: a compact output is a few kB; a larger body is passed on unchanged,
#: streamed as it comes once it is past this size (never held whole).
MAX_BODY_BYTES = 1 << 20
#: The most values (strings, numbers, lists, dicts...) an output may have to be rewritten, and its deepest nesting:
#: reading a ``repr`` back costs time and memory by its values, and its nesting by the stack. An output past
#: either keeps the server's text.
MAX_VALUES = 50_000
MAX_DEPTH = 32


def plain_value(text: str) -> Any:
    """The plain data whose ``repr`` is ``text`` (dicts, lists, strings, numbers, booleans, ``None``); raises
    ``ValueError`` for anything else (a name, a call, a set, text that is no literal at all) and for a text past
    :data:`MAX_VALUES` values or :data:`MAX_DEPTH` levels of nesting."""
    if text.count(",") + text.count(":") > 2 * MAX_VALUES:  # a cheap bound before any parsing
        raise ValueError(f"more than {MAX_VALUES} values")
    try:
        tree = ast.parse(text, mode="eval")
        check_size(tree)
        value = ast.literal_eval(tree)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not the repr of plain data within the limits: {type(exc).__name__}: {exc}") from None
    _check_plain(value)
    return value


def check_size(tree: ast.AST) -> None:
    """Raise ``ValueError`` when the parsed ``repr`` has more than :data:`MAX_VALUES` values or nests deeper than
    :data:`MAX_DEPTH` (walked without recursion, so any nesting is measured, not a crash)."""
    values = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.expr):
            values += 1
            if values > MAX_VALUES:
                raise ValueError(f"more than {MAX_VALUES} values")
            if depth > MAX_DEPTH:
                raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
            depth += 1
        stack.extend((child, depth) for child in ast.iter_child_nodes(node))


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
        start: Message | None = None  # the held start of a JSON answer; None: passing through
        chunks: list[bytes] = []
        held = 0

        async def send_json(message: Message) -> None:
            nonlocal start, held
            if message["type"] == "http.response.start":
                if _is_json(message):
                    start = message  # held until the body is whole, or past the limit
                    return
                await send(message)
                return
            if message["type"] != "http.response.body" or start is None:
                await send(message)
                return
            chunk = message.get("body", b"")
            more = message.get("more_body", False)
            if held + len(chunk) > MAX_BODY_BYTES:  # too large to rewrite: what was held, then the rest, unchanged
                first, start = start, None
                await send(first)
                await send({"type": "http.response.body", "body": b"".join([*chunks, chunk]), "more_body": more})
                chunks.clear()
                return
            chunks.append(chunk)
            held += len(chunk)
            if more:
                return
            body = b"".join(chunks)
            # reading a repr back takes time: off the event loop, so the server answers other requests meanwhile
            rewritten = await asyncio.to_thread(json_response_body, body)
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
