"""LangGraph's own node policies, where they do the job: a retry for a graph server's dropped connection and a
time limit for a node that waits on a graph server.

Which nodes take them, and why the others keep the project's own code, is docs/internals.md's table ("LangGraph's
node policies"). In short: a node policy re-runs or ends the *whole node*, so it goes only on nodes that make no
model call (re-running one would ask its model again and spend, or replay, its recorded calls twice): the nodes
that read a static knowledge graph and do nothing else. Model calls keep their per-call retries
(``nodes/llm.py``), and a step that degrades on a failed call keeps doing so (the papers' behaviour).
"""

from __future__ import annotations

from typing import Any

from langgraph.types import RetryPolicy, TimeoutPolicy

__all__ = ["GRAPH_READ_ATTEMPTS", "GRAPH_READ_TIMEOUT_S", "graph_read_policies", "graph_read_retry",
           "graph_read_timeout", "transient_graph_error"]

#: A graph read's attempts (the first included) when its server drops the connection.
GRAPH_READ_ATTEMPTS = 3
#: The longest one attempt of a graph-reading node may take: a backstop for a server that accepts the
#: connection and never answers (a healthy read of a catalogued graph takes well under a second; building an
#: inline graph's embeddings on first use, a few tens of seconds on a CPU).
GRAPH_READ_TIMEOUT_S = 600.0

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
    query the server refused, a missing graph, a node's own bug and a node's time limit are not."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _is_connection_error(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def graph_read_retry() -> RetryPolicy:
    """The retry of a node that only reads a static KG: a few attempts, with backoff and jitter, on a dropped
    connection only (:func:`transient_graph_error`)."""
    return RetryPolicy(initial_interval=0.5, backoff_factor=2.0, max_interval=5.0,
                       max_attempts=GRAPH_READ_ATTEMPTS, jitter=True, retry_on=transient_graph_error)


def graph_read_timeout() -> TimeoutPolicy:
    """The time limit of one attempt of a node that only reads a static KG (:data:`GRAPH_READ_TIMEOUT_S`, read
    when the graph is built): past it the node fails with LangGraph's ``NodeTimeoutError``, the run stops with
    its checkpoints kept, and ``kgagents resume`` runs the node again."""
    return TimeoutPolicy(run_timeout=GRAPH_READ_TIMEOUT_S)


def graph_read_policies() -> dict[str, Any]:
    """``add_node``'s keyword arguments for a node that only reads a static KG: its retry and its time limit."""
    return {"retry_policy": graph_read_retry(), "timeout": graph_read_timeout()}
