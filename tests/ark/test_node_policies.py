"""LangGraph's node policies on the nodes that only read a static KG (graphs/policies.py): a graph server that
drops a connection costs a retry of that node, not the run; a graph server that never answers ends the node at
its time limit with a clear error, and the run resumes from its checkpoint."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import NodeTimeoutError

from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs import ark as ark_graph
from kgagents.graphs import grounded as grounded_graph
from kgagents.graphs import policies
from kgagents.nodes import ark as ark_nodes
from kgagents.nodes.ark import ArkContext
from kgagents.tools.pgraph.cypher import GraphDatabaseError
from tests.ark import script as S


class _Neo4jServiceUnavailable(Exception):
    """Stands for ``neo4j.exceptions.ServiceUnavailable`` (matched by module and name; the driver is optional)."""


_Neo4jServiceUnavailable.__module__ = "neo4j.exceptions"
_Neo4jServiceUnavailable.__name__ = "ServiceUnavailable"


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
    (RuntimeError("a bug"), False),
])
def test_which_failures_are_a_dropped_connection(exc, transient):
    assert policies.transient_graph_error(exc) is transient


def test_the_graph_reading_nodes_carry_the_policies():
    nodes = ark_graph.build().nodes
    for name in ("initialise_context", "retrieve_relations", "retrieve_triples"):
        retry = nodes[name].retry_policy
        assert retry and retry.retry_on is policies.transient_graph_error, name
        assert nodes[name].timeout and nodes[name].timeout.run_timeout == policies.GRAPH_READ_TIMEOUT_S, name
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
    real = ark_nodes.graph_of

    async def graph_of(state, ctx):
        graph = await real(state, ctx)
        return _Graph(graph, lambda anchor: relations_of(graph, anchor))

    monkeypatch.setattr(ark_nodes, "graph_of", graph_of)


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
