"""LangGraph's node policies on the nodes that only read a static KG (graphs/policies.py): a graph server that
drops a connection costs a retry of that node, not the run; a graph server that never answers ends the node at
its time limit with a clear error, and the run resumes from its checkpoint."""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from typing import Any

import pytest
import redis.exceptions
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import NodeTimeoutError

from kgagents.cli import main
from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs import ark as ark_graph
from kgagents.graphs import grounded as grounded_graph
from kgagents.graphs import policies
from kgagents.nodes.ark import ArkContext, kg, retrieve, select
from kgagents.tools.kg import servers
from kgagents.tools.pgraph.cypher import Database, GraphDatabaseError
from tests.ark import script as S


class _Neo4jServiceUnavailable(Exception):
    """Stands for ``neo4j.exceptions.ServiceUnavailable`` (matched by module and name; the driver is optional)."""


_Neo4jServiceUnavailable.__module__ = "neo4j.exceptions"
_Neo4jServiceUnavailable.__name__ = "ServiceUnavailable"


def _service_unavailable_after(cause: BaseException) -> BaseException:
    try:
        raise _Neo4jServiceUnavailable("Failed to read from defunct connection") from cause
    except _Neo4jServiceUnavailable as exc:
        return exc


def _wrapped(cause: BaseException) -> GraphDatabaseError:
    try:
        raise GraphDatabaseError("cannot use the neo4j database at bolt://127.0.0.1:7687: ...") from cause
    except GraphDatabaseError as exc:
        return exc


@pytest.mark.parametrize(("exc", "transient"), [
    (_wrapped(ConnectionResetError(104, "Connection reset by peer")), True),
    (_wrapped(_Neo4jServiceUnavailable("the server went away")), True),
    (ConnectionRefusedError(111, "refused"), True),
    (_wrapped(ValueError("Invalid input 'MATCHH'")), False),                # a refused query
    (GraphDatabaseError("no graph named 'x'"), False),
    (NodeTimeoutError("retrieve_triples", 1.0, kind="run", run_timeout=1.0), False),  # a hang is not retried
    (TimeoutError("read timed out"), False),
    (_wrapped(redis.exceptions.TimeoutError("Timeout reading from socket")), False),  # held at its deadline
    (_wrapped(_service_unavailable_after(TimeoutError("timed out"))), False),  # neo4j's give-up at the deadline
    (RuntimeError("a bug"), False),
])
def test_which_failures_are_a_dropped_connection(exc, transient):
    assert policies.transient_graph_error(exc) is transient


def test_the_graph_reading_nodes_carry_the_policies():
    nodes = ark_graph.build().nodes
    for name in ("initialise_context", "retrieve_relations", "retrieve_triples"):
        retry = nodes[name].retry_policy
        assert retry and retry.retry_on is policies.transient_graph_error, name
        kind = "open" if name == "initialise_context" else "lookup"
        assert nodes[name].timeout and nodes[name].timeout.run_timeout == policies.graph_read_timeout_s(kind), name
    for name in ("select_anchor", "select_relation", "reasoning_step", "final_answer"):  # model calls: none
        assert not nodes[name].retry_policy and not nodes[name].timeout, name
    initialise = grounded_graph.build().nodes["initialise"]  # grounded reasoning opens its graph there
    assert initialise.retry_policy.retry_on is policies.transient_graph_error and initialise.timeout


class _Graph:
    """The run's real graph, with ``relations_of`` replaced."""

    def __init__(self, graph: Any, relations_of: Any) -> None:
        self._graph, self.relations_of = graph, relations_of

    def __getattr__(self, name: str) -> Any:
        return getattr(self._graph, name)


def _patch_relations(monkeypatch, relations_of) -> None:
    real = kg.graph_of

    async def graph_of(state, ctx):
        graph = await real(state, ctx)
        return _Graph(graph, lambda anchor: relations_of(graph, anchor))

    for steps in (retrieve, select):  # the steps that open the run's graph
        monkeypatch.setattr(steps, "graph_of", graph_of)


def _run(example, embedder) -> tuple[Any, ArkContext, dict, dict]:
    """A checkpointed ARK-V1 graph, a context whose model answers the example, the run's config and input."""
    model = ScriptedChatModel(steps=S.yui_run(example["graph"]))
    context = ArkContext(model=model, embedding_model=embedder, api_backoff_base_s=0.001)
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": context.recursion_limit}
    return (ark_graph.compile_graph(InMemorySaver()), context, config,
            {"question": example["question"], "kg": example["graph"]})


async def test_a_dropped_graph_server_connection_is_retried_by_the_node_policy(example, embedder, monkeypatch):
    calls: list[str] = []

    def relations_of(graph, anchor):
        calls.append(anchor)
        if len(calls) == 1:
            raise _wrapped(ConnectionResetError(104, "Connection reset by peer"))
        return graph.relations_of(anchor)

    _patch_relations(monkeypatch, relations_of)
    graph, context, config, task = _run(example, embedder)
    out = await graph.ainvoke(task, config, context=context)
    assert out["final_answer"] == "False" and out["failure_summary"]["count"] == 0
    assert calls == ["Yui Yuigahama", "Yui Yuigahama", "Sablé"]  # the first read again, once


async def test_a_graph_server_that_never_answers_ends_the_node_and_the_run_resumes(example, embedder, monkeypatch):
    monkeypatch.setattr(policies, "GRAPH_READ_TIMEOUT_S", 0.5)  # read when the graph is built
    hung, release = threading.Event(), threading.Event()

    def relations_of(graph, anchor):
        if not release.is_set():
            hung.set()
            release.wait(30)  # the server that accepted the query and never answers
        return graph.relations_of(anchor)

    _patch_relations(monkeypatch, relations_of)
    graph, context, config, task = _run(example, embedder)
    try:
        with pytest.raises(NodeTimeoutError, match="retrieve_relations"):
            await graph.ainvoke(task, config, context=context)
    finally:
        release.set()
    assert hung.is_set()
    state = await graph.aget_state(config)
    assert state.next == ("retrieve_relations",)  # the checkpoint before the node that hung
    out = await graph.ainvoke(None, config, context=context)  # the server answers again: resume
    assert out["final_answer"] == "False"


def test_the_time_limits_follow_the_graph_servers_deadlines(monkeypatch):
    """A node's limit is a backstop behind its queries' own deadlines: longer than one query's deadline (the
    connection gives up first, with the database's error), and it follows KGAGENTS_KG_QUERY_TIMEOUT_S."""
    monkeypatch.delenv("KGAGENTS_KG_QUERY_TIMEOUT_S", raising=False)
    lookup, opening = policies.graph_read_timeout_s("lookup"), policies.graph_read_timeout_s("open")
    assert servers.client_deadline_s() < lookup <= opening < 600
    monkeypatch.setenv("KGAGENTS_KG_QUERY_TIMEOUT_S", "120")
    assert policies.graph_read_timeout_s("lookup") > servers.client_deadline_s() > lookup


async def test_timed_out_reads_do_not_starve_the_default_executor(example, embedder, monkeypatch):
    """Reads held by a graph server that never answers stay on the graph-read pool: after more of them than the
    default executor has threads, every other ``asyncio.to_thread`` of the process (other runs' file reads)
    still runs."""
    monkeypatch.setattr(policies, "GRAPH_READ_TIMEOUT_S", 0.3)
    release = threading.Event()

    def relations_of(graph, anchor):
        release.wait(30)
        return graph.relations_of(anchor)

    _patch_relations(monkeypatch, relations_of)
    default_workers = min(32, (os.cpu_count() or 1) + 4)  # ThreadPoolExecutor's documented default
    try:
        for i in range(default_workers + 1):
            graph, context, config, task = _run(example, embedder)
            config["configurable"]["thread_id"] = f"t{i}"
            with pytest.raises(NodeTimeoutError):
                await graph.ainvoke(task, config, context=context)
        done = await asyncio.wait({asyncio.ensure_future(asyncio.to_thread(lambda: None))}, timeout=5)
        assert done[0], "the default executor is full of timed-out graph reads: nothing else runs off the loop"
    finally:
        release.set()


class _Database(Database):
    """A graph database whose first query is held until released; it records the queries it is sent."""

    backend, describes = "test", "a test database"

    def __init__(self, release: threading.Event) -> None:
        self.release, self.queries = release, []

    def _run(self, graph: str, query: str, params: dict[str, Any], write: bool) -> list[list[Any]]:
        self.queries.append(query)
        if len(self.queries) == 1:
            self.release.wait(30)
        return []


async def test_a_timed_out_read_sends_no_further_query(example, embedder, monkeypatch):
    """The node ends at its limit; its read, held in a query, sends no further query once that query returns (so
    a resumed node does not race it)."""
    monkeypatch.setattr(policies, "GRAPH_READ_TIMEOUT_S", 0.3)
    release, finished = threading.Event(), threading.Event()
    database = _Database(release)

    def relations_of(graph, anchor):
        try:
            for query in ("first", "second", "third"):
                database.run("g", query)
            return graph.relations_of(anchor)
        finally:
            finished.set()

    _patch_relations(monkeypatch, relations_of)
    graph, context, config, task = _run(example, embedder)
    try:
        with pytest.raises(NodeTimeoutError, match="retrieve_relations"):
            await graph.ainvoke(task, config, context=context)
    finally:
        release.set()
    assert await asyncio.to_thread(finished.wait, 10)
    assert database.queries == ["first"]


def test_the_cli_reports_a_step_past_its_time_limit_and_the_run_resumes(tmp_path, capsys, example, embedder,
                                                                         monkeypatch):
    """End to end: a graph read that never answers stops `kgagents ask` with exit 1, a message that names the
    step, its limit and the resume command; once the graph answers, `kgagents resume` finishes the run."""
    monkeypatch.setattr(policies, "GRAPH_READ_TIMEOUT_S", 0.5)
    release = threading.Event()

    def relations_of(graph, anchor):
        release.wait(30)
        return graph.relations_of(anchor)

    _patch_relations(monkeypatch, relations_of)
    graph_file, script = tmp_path / "example.json", tmp_path / "script.json"
    graph_file.write_text(json.dumps(example), encoding="utf-8")
    script.write_text(json.dumps({"steps": S.yui_run(example["graph"])}), encoding="utf-8")
    runs = str(tmp_path / "runs")
    try:
        code = main(["--runs-dir", runs, "ask", "--workflow", "ark", example["question"], "--attach", str(graph_file),
                     "--model", f"scripted:{script}", "--quiet"])
    finally:
        release.set()
    out, err = capsys.readouterr()
    assert code == 1 and not out.strip()
    thread = re.search(r"thread: (\S+)", err).group(1)
    assert "the step retrieve_relations ran past its time limit of 0.5 s" in err
    assert f"continue it with `kgagents resume {thread}`" in err and "Traceback" not in err
    assert main(["--runs-dir", runs, "resume", thread, "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == "False"
