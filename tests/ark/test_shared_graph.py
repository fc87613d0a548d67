"""ARK-V1 runs stand on the shared static-KG store: concurrent runs over one graph share one instance (one
build, one index, no copy), checkpoints hold the graph's reference and never the graph, and a resumed run in a
new process reopens the graph from that reference."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs.ark import compile_graph
from kgagents.graphs.io import final_state
from kgagents.nodes.ark import ArkContext
from kgagents.tools.pgraph import graph_from_edges, open_graph, registry
from kgagents.tools.pgraph.build import GraphBuilder
from tests.ark import script as S

YUI, SABLE = "Yui Yuigahama", "Sablé"
UNTOUCHED = "Chiba Municipal"  # an edge tail of the example graph that the scripted runs never retrieve


def steps(keys: dict[str, str]) -> list[dict]:
    """A run with an invalid anchor first (so the entity index is searched), then the two-step path."""
    return [*S.anchor("Yui"), *S.anchor(YUI), *S.relation("has pet"),
            *S.reasoning([keys["pet"]], "Her pet is Sablé.", True), *S.anchor(SABLE), *S.relation("animal breed"),
            *S.reasoning([keys["breed"]], "Sablé is a dachshund.", False), *S.final(False)]


@pytest.fixture()
def keys(example) -> dict[str, str]:
    g = graph_from_edges(example["graph"])
    return {"pet": g.triples(YUI, "has pet")[0].key, "breed": g.triples(SABLE, "animal breed")[0].key}


@pytest.fixture()
def graph_file(example, tmp_path) -> Path:
    path = tmp_path / "yui.json"
    path.write_text(json.dumps(example), encoding="utf-8")
    return path


@pytest.fixture()
def builds(monkeypatch) -> list[str]:
    done: list[str] = []
    original = GraphBuilder.finish

    def counting(self, **kw):
        done.append(kw["name"])
        return original(self, **kw)

    monkeypatch.setattr(GraphBuilder, "finish", counting)
    return done


@pytest.mark.slow
async def test_concurrent_runs_share_one_graph_one_build_and_one_index(example, keys, graph_file, builds):
    registry.forget_open_graphs()
    graph = compile_graph(InMemorySaver())

    async def one(thread: str) -> dict:
        context = ArkContext(model=ScriptedChatModel(steps=steps(keys)))
        config = {"configurable": {"thread_id": thread}, "recursion_limit": 500}
        return await final_state(graph, {"kg_file": str(graph_file)}, config, context=context)

    a, b = await asyncio.gather(one("a"), one("b"))
    assert a["answer"] is False and b["answer"] is False
    assert a["graph_ref"] == b["graph_ref"] and len(builds) == 1
    shared = open_graph(a["graph_ref"])
    assert shared.indexes.builds == 1  # the head-entity index both runs searched was embedded once
    assert a["attempts"][0]["alternatives"] == b["attempts"][0]["alternatives"] != []


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@pytest.mark.slow
def test_a_second_run_costs_no_memory(tmp_path):
    """Opening a graph again (as a second run does) maps the same pages: resident memory does not grow."""
    path = tmp_path / "big.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for i in range(60_000):
            f.write(json.dumps({"head": f"entity number {i}", "relation": f"relation {i % 50}",
                                "tail": f"entity number {(i * 7919) % 60_000}"}) + "\n")
    first = open_graph(path)
    walk = [f"entity number {i}" for i in range(0, 60_000, 3)]
    for node in walk:
        first.neighbours(node)
    before = _rss_kb()
    second = open_graph(str(path))
    for node in walk:
        second.neighbours(node)
    assert second is first
    assert _rss_kb() - before < 2_000  # kB: nothing per run beyond the lookups' own garbage


@pytest.mark.slow
async def test_checkpoints_hold_the_reference_and_never_the_graph(example, keys, graph_file, tmp_path):
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "runs.sqlite")) as saver:
        graph = compile_graph(saver)
        context = ArkContext(model=ScriptedChatModel(steps=steps(keys)))
        config = {"configurable": {"thread_id": "file"}, "recursion_limit": 500}
        state = await final_state(graph, {"kg_file": str(graph_file)}, config, context=context)
        assert state["graph_ref"]["fingerprint"] == state["kg_fingerprint"]
        assert set(state["graph_ref"]) >= {"name", "location", "source", "format", "fingerprint"}
        dumps = [json.dumps(c.checkpoint["channel_values"], default=str) async for c in saver.alist(config)]
        assert len(dumps) > 10 and not any(UNTOUCHED in d for d in dumps)

        inline = {"configurable": {"thread_id": "inline"}, "recursion_limit": 500}
        context = ArkContext(model=ScriptedChatModel(steps=steps(keys)))
        state = await final_state(graph, {"question": example["question"], "kg": example["graph"]}, inline,
                                    context=context)
        assert state["answer"] is False and state.get("kg") is None
        holding = [c.metadata.get("step") async for c in saver.alist(inline)
                   if UNTOUCHED in json.dumps(c.checkpoint["channel_values"], default=str)]
        assert sorted(holding) == [-1, 0]  # only the input's checkpoints, before the first node ran


async def test_a_resumed_run_in_a_new_process_reopens_its_graph(example, keys, graph_file, tmp_path, builds):
    import shutil

    db = str(tmp_path / "runs.sqlite")
    config = {"configurable": {"thread_id": "resume"}, "recursion_limit": 500}
    model = ScriptedChatModel(steps=steps(keys))
    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        graph = compile_graph(saver, interrupt_before=["reasoning_step"])
        await final_state(graph, {"kg_file": str(graph_file)}, config, context=ArkContext(model=model))
        ref = (await graph.aget_state(config)).values["graph_ref"]
    # a new process: no open graphs; the built graph is gone too, so it is rebuilt from its source
    registry.forget_open_graphs()
    shutil.rmtree(ref["location"])
    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        state = await final_state(compile_graph(saver), None, config, context=ArkContext(model=model))
    assert state["answer"] is False and len(state["steps"]) == 2 and len(builds) == 2
    assert state["graph_ref"]["fingerprint"] == ref["fingerprint"]
