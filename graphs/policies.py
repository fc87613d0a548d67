"""LangGraph's own node policies, where they do the job: a retry for a graph server's dropped connection and a
time limit for a node that waits on a graph server.

Which nodes take them, and why the others keep the project's own code, is docs/internals.md's table ("LangGraph's
node policies"). In short: a node policy re-runs or ends the *whole node*, so it goes only on nodes that make no
model call (re-running one would ask its model again and spend, or replay, its recorded calls twice): the nodes
that read a static knowledge graph and do nothing else. Model calls keep their per-call retries
(``nodes/llm.py``), and a step that degrades on a failed call keeps doing so (the papers' behaviour).
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.types import RetryPolicy, TimeoutPolicy

from kgagents.tools.kg.servers import client_deadline_s

__all__ = ["GRAPH_READ_ATTEMPTS", "GRAPH_READ_TIMEOUT_S", "graph_read_policies", "graph_read_retry",
           "graph_read_timeout", "graph_read_timeout_s", "transient_graph_error"]

#: A graph read's attempts (the first included) when its server drops the connection.
GRAPH_READ_ATTEMPTS = 3
#: The queries a lookup node (ARK-V1's ``retrieve_relations``, ``retrieve_triples``) may wait on in turn: a node's
#: record, then its edges.
LOOKUP_QUERIES = 2
#: The queries an opening node (ARK-V1's ``initialise_context``, grounded ``initialise``) may wait on in turn: the
#: catalog, the graph's own entry, its statistics and definition.
OPEN_QUERIES = 4
#: A lookup's own work besides its queries (building a result of a few thousand triples).
LOOKUP_SLACK_S = 15.0
#: An opening's own work besides its queries: reading a built graph's files, loading a local embedding model.
OPEN_SLACK_S = 120.0
#: A fixed limit for every graph-reading node instead of the derived ones (``None``: derived; tests set it).
GRAPH_READ_TIMEOUT_S: float | None = None

NodeKind = Literal["lookup", "open"]

#: Exception classes of the graph servers' drivers that mean "the connection went away", by module and name (the
#: drivers are optional: neo4j for Neo4j, ArcadeDB and Memgraph; redis under falkordb's client).
_DRIVER_CONNECTION_ERRORS = frozenset({
    ("neo4j.exceptions", "ServiceUnavailable"),
    ("neo4j.exceptions", "SessionExpired"),
    ("redis.exceptions", "ConnectionError"),
    ("redis.exceptions", "TimeoutError"),
})


def _is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` itself says that the connection went away (not what caused it)."""
    if isinstance(exc, ConnectionError):  # refused, reset, aborted, a broken pipe
        return True
    return any((cls.__module__, cls.__name__) in _DRIVER_CONNECTION_ERRORS for cls in type(exc).__mro__)


def transient_graph_error(exc: BaseException) -> bool:
    """Whether a node's failure is a graph server's dropped or refused connection, which a new attempt may not
    meet: the error or one of its causes is a connection error (the static KG's database wraps its driver's
    errors in a ``GraphDatabaseError``, a ``ValueError``, which LangGraph's default policy never retries). A
    query the server refused, a missing graph, a node's own bug and a node's time limit are not; nor is a query
    its connection gave up on at its deadline (a timeout anywhere in the chain, however the driver then names
    it): the server held that query, and would hold it again."""
    links: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in links):
        links.append(current)
        current = current.__cause__ or current.__context__
    if any(_is_timeout(link) for link in links):
        return False
    return any(_is_connection_error(link) for link in links)


def _is_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` says that a wait ran out (the standard library's, a socket's, or a driver's timeout)."""
    return isinstance(exc, TimeoutError) or any("Timeout" in cls.__name__ for cls in type(exc).__mro__)


def graph_read_retry() -> RetryPolicy:
    """The retry of a node that only reads a static KG: a few attempts, with backoff and jitter, on a dropped
    connection only (:func:`transient_graph_error`)."""
    return RetryPolicy(initial_interval=0.5, backoff_factor=2.0, max_interval=5.0,
                       max_attempts=GRAPH_READ_ATTEMPTS, jitter=True, retry_on=transient_graph_error)


def graph_read_timeout_s(kind: NodeKind) -> float:
    """The longest one attempt of a graph-reading node of ``kind`` may take: a backstop behind the graph servers'
    own limits. Each query the node waits on gives up at its connection's deadline
    (:func:`~kgagents.tools.kg.servers.client_deadline_s`: ``KGAGENTS_KG_QUERY_TIMEOUT_S`` and half of it again,
    45 s at the default 30 s), so the node's limit is its queries' deadlines one after the other plus its own
    work (105 s for a lookup and 300 s for an opening at the defaults): a server that holds one query is cut off
    by the connection first, with the database's own error; the node's limit ends what no deadline covers (a
    fallen-back driver, a file read that hangs)."""
    if GRAPH_READ_TIMEOUT_S is not None:
        return GRAPH_READ_TIMEOUT_S
    if kind == "lookup":
        return LOOKUP_QUERIES * client_deadline_s() + LOOKUP_SLACK_S
    return OPEN_QUERIES * client_deadline_s() + OPEN_SLACK_S


def graph_read_timeout(kind: NodeKind) -> TimeoutPolicy:
    """The time limit of one attempt of a node that only reads a static KG (:func:`graph_read_timeout_s`, read
    when the graph is built): past it the node fails with LangGraph's ``NodeTimeoutError``, its read is abandoned
    (:mod:`kgagents.tools.pgraph.reads`), the run stops with its checkpoints kept, and ``kgagents resume`` runs
    the node again."""
    return TimeoutPolicy(run_timeout=graph_read_timeout_s(kind))


def graph_read_policies(kind: NodeKind) -> dict[str, Any]:
    """``add_node``'s keyword arguments for a node that only reads a static KG (``kind``: a ``"lookup"`` of a
    node's relations or triples, or the ``"open"``-ing of the graph): its retry and its time limit."""
    return {"retry_policy": graph_read_retry(), "timeout": graph_read_timeout(kind)}
