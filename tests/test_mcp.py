"""The served workflows as tools: ``langgraph dev`` started by the test, with a scripted model from the
server's environment (``KGAGENTS_MODEL``: callers send no context), called through the LangGraph SDK and
through the official MCP client (streamable HTTP at ``/mcp``). Both get the compact output (answer, thread,
cost and tokens, failures, evidence), never the run's whole state; MCP gets it as JSON (text and
``structuredContent``), not as a Python ``repr``."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from langgraph_sdk import get_client
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from kgagents.tools.pgraph import graph_from_edges
from tests.ark import script as S
from tests.test_studio import ROOT, serve

pytestmark = pytest.mark.slow

KGOT_QUESTION = ("A C++ script holds the array [42, 23, 2, 88, 37, 15]. Sort the array and return the sum of "
                 "the third and fifth integers of the sorted list.")
#: The output fields every served workflow returns (``exit_reason`` too where the workflow records it).
OUTPUT = {"final_answer", "thread_id", "cost_usd", "tokens", "failure_summary", "evidence"}
#: What a compact output stays under (the whole state of the ARK-V1 run is ~8 kB and more).
COMPACT_CHARS = 2500


def ark_example() -> dict:
    return json.loads((resources.files("kgagents") / "data" / "ark" / "example_data.json").read_text("utf-8"))


def ark_steps(example: dict) -> list[dict]:
    g = graph_from_edges(example["graph"])
    return [*S.anchor("Yui Yuigahama"), *S.relation("has pet"),
            *S.reasoning([g.triples("Yui Yuigahama", "has pet")[0].key], "Her pet is Sablé.", True),
            *S.anchor("Sablé"), *S.relation("animal breed"),
            *S.reasoning([g.triples("Sablé", "animal breed")[0].key], "A dachshund.", False), *S.final(False)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the module, whose model (from its environment) answers ARK-V1's example and KGoT's
    demo task."""
    tmp = tmp_path_factory.mktemp("mcp")
    demo = json.loads((resources.files("kgagents") / "data" / "demo_kgot_figure9.json").read_text("utf-8"))
    script = tmp / "script.json"
    script.write_text(json.dumps({"name": "served", "steps": [*ark_steps(ark_example()), *demo["steps"]]}),
                      encoding="utf-8")
    prices = tmp / "prices.json"  # USD per million tokens: the outputs' costs are known
    prices.write_text(json.dumps({"scripted": {"input": 1.0, "output": 2.0}}), encoding="utf-8")
    yield from serve(tmp, KGAGENTS_MODEL=f"scripted:{script}", KGAGENTS_PRICES_FILE=str(prices))


def assert_compact(output: dict) -> None:
    assert set(output) >= OUTPUT, sorted(output)
    assert not {"question", "kg", "steps", "messages", "usage", "failures"} & set(output), sorted(output)
    assert len(json.dumps(output)) < COMPACT_CHARS, json.dumps(output)[:3000]


async def test_sdk_run_returns_the_output_schema_and_the_thread_keeps_the_state(server):
    url, _ = server
    client = get_client(url=url)
    thread = await client.threads.create()
    output = await client.runs.wait(thread["thread_id"], "kgot", input={"question": KGOT_QUESTION})
    assert_compact(output)
    assert output["final_answer"] == "65" and output["thread_id"] == thread["thread_id"]
    assert output["tokens"]["calls"] > 10 and output["failure_summary"] == {"count": 0, "kinds": {}}
    tokens = output["tokens"]
    cost = (tokens["input_tokens"] * 1.0 + tokens["output_tokens"] * 2.0) / 1e6
    assert output["cost_usd"] == pytest.approx(cost) and cost > 0
    assert output["evidence"]["triples"], output["evidence"]
    values = (await client.threads.get_state(thread["thread_id"]))["values"]  # the state stays whole
    assert values["usage"]["scripted"]["calls"] == output["tokens"]["calls"] and values["kg"]["nodes"]
    schema = (await client.assistants.get_schemas(
        (await client.assistants.search(graph_id="kgot"))[0]["assistant_id"]))
    assert set(schema["input_schema"]["properties"]) == {"question", "attachments"}
    assert schema["input_schema"]["properties"]["question"]["description"]
    assert set(schema["output_schema"]["properties"]) >= OUTPUT


async def test_mcp_client_lists_described_tools_and_calls_ark_for_an_answer(server):
    url, _ = server
    served = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
    example = ark_example()
    async with streamable_http_client(f"{url}/mcp") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert {t.title for t in tools.values()} == set(served), sorted(tools)  # one tool per served graph
        ark = tools["ark"]
        assert ark.description == served["ark"]["description"]
        properties = ark.input_schema["properties"]
        assert {"question", "graph", "kg", "kg_file"} <= set(properties)
        assert properties["graph"]["description"]
        result = await session.call_tool(ark.name, {"question": example["question"], "kg": example["graph"]})
    assert not result.is_error, result.content
    output = json.loads(result.content[0].text)  # JSON, not the server's repr of a dict
    assert result.structured_content == output
    assert_compact(output)
    assert output["final_answer"] == "False" and output["tokens"]["calls"] == 7
    assert "K_max" not in output["exit_reason"] and output["exit_reason"]
    path = output["evidence"]["reasoning_path"]
    assert [p["anchor"] for p in path] == ["Yui Yuigahama", "Sablé"]
    assert path[0]["triples"] == [["Yui Yuigahama", "has pet", "Sablé"]]
