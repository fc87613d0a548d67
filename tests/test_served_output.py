"""One output for every served graph, and MCP answers as JSON.

Every graph ``langgraph.json`` serves has the same output schema (:class:`kgagents.graphs.io.RunOutput`), the
surfer's included; the custom HTTP app ``langgraph.json`` names turns the server's ``repr`` of an MCP tool call's
output into JSON (:mod:`kgagents.serve.mcp`). ``tests/test_mcp.py`` calls a served graph through the official
MCP client against ``langgraph dev``."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs import io, surfer
from kgagents.graphs.spec import resolve
from kgagents.nodes.kgot import KGoTContext
from kgagents.serve import mcp

ROOT = Path(__file__).resolve().parents[1]
CONFIG = json.loads((ROOT / "langgraph.json").read_text())
#: The fields every served graph's output schema has (docs/graphs.md's table of the output).
FIELDS = {"final_answer", "thread_id", "cost_usd", "tokens", "failure_summary", "budget_stop", "evidence",
          "exit_reason"}
#: What a run's output looks like, as the server decodes it from the run's JSON.
OUTPUT = {"final_answer": "It's \"65\"", "thread_id": None, "cost_usd": 0.0021, "exit_reason": "answered",
          "tokens": {"calls": 14, "input_tokens": 9120}, "failure_summary": {"count": 0, "kinds": {}},
          "evidence": {"triples": [["array", "SORTED_TO", "über"]], "ok": True, "none": None}}


def test_every_served_graph_has_the_one_output_schema():
    schemas = {name: resolve(entry["path"]).get_output_jsonschema() for name, entry in CONFIG["graphs"].items()}
    shared = schemas["kgot"]
    assert set(shared["properties"]) == FIELDS and not shared.get("required")
    different = sorted(name for name, schema in schemas.items() if schema != shared)
    assert not different, {name: sorted(schemas[name]["properties"]) for name in different}
    assert set(io.RunOutput.__annotations__) == FIELDS
    assert all(shared["properties"][field].get("description") for field in FIELDS), shared["properties"]


async def test_the_served_surfer_answers_in_the_shared_shape_and_says_why_it_ended(tmp_path):
    llm = ScriptedChatModel(steps=[{"raise": "bad request", "status": 400}])
    ctx = KGoTContext(tools_model=llm, work_dir=str(tmp_path / "work"))
    out = await surfer.graph.ainvoke({"question": "q"}, context=ctx)
    assert set(out) >= {"final_answer", "tokens", "failure_summary", "evidence", "exit_reason"}, sorted(out)
    assert out["final_answer"].startswith("The search could not be completed")
    assert out["exit_reason"].startswith("the search failed") and "bad request" in out["exit_reason"]
    assert out["evidence"] == {"sources": []}


def test_a_tool_results_repr_becomes_its_json_and_structured_content():
    result = {"content": [{"type": "text", "text": repr(OUTPUT)}]}
    clean = mcp.json_tool_result(result)
    assert json.loads(clean["content"][0]["text"]) == OUTPUT
    assert clean["structuredContent"] == OUTPUT and clean["content"][0]["type"] == "text"


@pytest.mark.parametrize("result", [
    {"isError": True, "content": [{"type": "text", "text": "{'a': 1}"}]},       # an error stays the server's
    {"content": [{"type": "text", "text": "__import__('os').system('true')"}]},  # no literal: never evaluated
    {"content": [{"type": "text", "text": "{'a': {1, 2}}"}]},                   # a set: not JSON's data
    {"content": [{"type": "text", "text": "{1: 'a'}"}]},                        # a key that is no string
    {"content": [{"type": "text", "text": "{'a': float('nan')}"}]},
    {"content": [{"type": "text", "text": "'just text'"}]},                     # not an object
    {"content": [{"type": "text", "text": "[" * 100_000}]},                     # too deep to read
    {"content": [{"type": "text", "text": "{}"}, {"type": "text", "text": "{}"}]},
    {"tools": []},
])
def test_anything_else_passes_as_it_is(result):
    assert mcp.json_tool_result(result) is result


def test_a_json_rpc_body_is_rewritten_only_where_a_tool_result_changes():
    body = json.dumps({"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": repr(OUTPUT)}]}})
    rewritten = json.loads(mcp.json_response_body(body.encode()))
    assert rewritten["id"] == 3 and rewritten["result"]["structuredContent"] == OUTPUT
    assert mcp.json_response_body(b'{"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}') is None
    assert mcp.json_response_body(b"not json") is None


def _server_app() -> Starlette:
    """A stand-in for LangGraph's server behind the custom app's middleware: ``/mcp`` answers a tool call with
    the output's ``repr``, as the server does; other paths answer the same text."""

    async def mcp_endpoint(request: Request) -> JSONResponse:
        message = await request.json()
        return JSONResponse({"jsonrpc": "2.0", "id": message["id"],
                             "result": {"content": [{"type": "text", "text": repr(OUTPUT)}]}})

    async def other(request: Request) -> PlainTextResponse:
        return PlainTextResponse(repr(OUTPUT))

    return Starlette(routes=[Route("/mcp", mcp_endpoint, methods=["POST"]), Route("/runs", other,
                                                                                    methods=["POST"])],
                     middleware=mcp.app.user_middleware)


async def test_the_custom_app_langgraph_json_names_answers_mcp_with_json():
    assert CONFIG["http"]["app"] == "kgagents.serve.mcp:app" and resolve(CONFIG["http"]["app"]) is mcp.app
    transport = httpx.ASGITransport(app=_server_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "kgot", "arguments": {}}}
        reply = await client.post("/mcp", json=call, headers={"accept": "application/json, text/event-stream"})
        other = await client.post("/runs")
    assert reply.status_code == 200 and int(reply.headers["content-length"]) == len(reply.content)
    result = reply.json()["result"]
    assert json.loads(result["content"][0]["text"]) == OUTPUT and result["structuredContent"] == OUTPUT
    assert other.text == repr(OUTPUT)  # not MCP: untouched


def _tool_answer(output: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
                                                                           "text": repr(output)}]}}).encode()


async def _through_middleware(chunks: list[bytes]) -> tuple[list[dict], list[int]]:
    """What the middleware sends on for a JSON answer the app sends in ``chunks``, and after each chunk the app
    sent, how many bytes the middleware held (sent to it, not yet on): a counting ``send``."""
    sent: list[dict] = []
    held: list[int] = []
    given = 0

    async def app(scope, receive, send):
        nonlocal given
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(sum(map(len, chunks))).encode())]})
        for i, chunk in enumerate(chunks):
            await send({"type": "http.response.body", "body": chunk, "more_body": i < len(chunks) - 1})
            given += len(chunk)
            held.append(given - sum(len(m.get("body", b"")) for m in sent))

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/mcp", "root_path": "", "headers": []}
    await mcp.JsonToolResults(app)(scope, receive, send)
    return sent, held


async def test_a_body_past_the_limit_passes_on_unchanged_without_being_held_whole():
    body = _tool_answer({"final_answer": "x", "evidence": {"triples": [["a", "R", str(i)] for i in range(450_000)]}})
    size = 64 << 10
    assert len(body) > 9 << 20  # past the limit, and past the 8 MB one rewritten in full before
    chunks = [body[i:i + size] for i in range(0, len(body), size)]
    sent, held = await _through_middleware(chunks)
    assert sent[0]["type"] == "http.response.start"
    assert dict(sent[0]["headers"])[b"content-length"] == str(len(body)).encode()
    assert b"".join(m.get("body", b"") for m in sent[1:]) == body and not sent[-1]["more_body"]
    assert max(held) <= mcp.MAX_BODY_BYTES + size  # never more than the limit and one chunk
    assert held[-1] == 0


def test_an_output_past_the_value_limit_keeps_the_servers_text():
    """Reading a repr back costs by its values: one under the byte limit with too many keeps the server's
    text."""
    many = {"final_answer": "x", "evidence": {"values": list(range(mcp.MAX_VALUES + 1))}}
    assert len(_tool_answer(many)) < mcp.MAX_BODY_BYTES
    assert mcp.json_response_body(_tool_answer(many)) is None
    with pytest.raises(ValueError, match="values"):
        mcp.plain_value(repr(many))


@pytest.mark.parametrize("depth", [mcp.MAX_DEPTH + 1, 150, 100_000])
def test_deep_nesting_keeps_the_servers_text_and_crashes_nothing(depth):
    nested = "{'final_answer': " + "[" * depth + "]" * depth + "}"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": nested}]}})
    assert mcp.json_response_body(body.encode()) is None
    with pytest.raises(ValueError):
        mcp.plain_value(nested)


def test_a_large_output_within_the_limits_is_rewritten():
    output = {"final_answer": "x", "evidence": {"triples": [["a", "R", str(i)] for i in range(8_000)]}}
    body = _tool_answer(output)
    assert 100_000 < len(body) < mcp.MAX_BODY_BYTES
    assert json.loads(mcp.json_response_body(body))["result"]["structuredContent"] == output


async def test_the_rewrite_runs_off_the_event_loop(monkeypatch):
    """The server's event loop serves other requests while an answer is read back: the rewrite runs in a worker
    thread, and the answer still arrives rewritten."""
    threads: list[threading.Thread] = []
    rewrite = mcp.json_response_body

    def recording(body: bytes) -> bytes | None:
        threads.append(threading.current_thread())
        return rewrite(body)

    monkeypatch.setattr(mcp, "json_response_body", recording)
    body = _tool_answer(OUTPUT)
    sent, _ = await _through_middleware([body[:10], body[10:]])
    assert threads and threads[0] is not threading.current_thread()
    result = json.loads(sent[1]["body"])["result"]
    assert result["structuredContent"] == OUTPUT
    assert dict(sent[0]["headers"])[b"content-length"] == str(len(sent[1]["body"])).encode()
