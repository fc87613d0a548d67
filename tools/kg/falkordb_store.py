"""The task KG in FalkorDB, one graph per run.

Configuration: ``FALKORDB_URL`` (or the context's ``kg_url``; ``redis://host:port``, ``rediss://...`` or
``unix:///path/to.sock``). Without one, the embedded FalkorDB server of the ``falkordblite`` wheel is started
on a private Unix socket for the life of this process (see :mod:`kgagents.tools.kg.servers`).

Each run has its own FalkorDB graph (a Redis key derived from the thread id): a Cypher query addresses exactly
one graph, so an LLM-written ``MATCH (n) DETACH DELETE n`` empties its own run's KG and nothing else. Every
LLM-written statement passes :func:`kgagents.tools.kg.cypher_scope.prepare` first (no ``LOAD CSV``, no procedures, only
Cypher's own functions; rebuilt from its checked tokens) and runs under the time limit
``KGAGENTS_KG_QUERY_TIMEOUT_S`` (the embedded server caps every query at it too, and at a share of its memory:
:mod:`kgagents.tools.kg.servers`); the connection gives up at
:func:`~kgagents.tools.kg.servers.client_deadline_s`, for a query the server's limit does not stop.
FalkorDB runs each query atomically but has no multi-query transactions, so a write that fails after an
earlier statement of the same code succeeded, or whose result breaks the id rules, is undone by restoring
the KG from the snapshot taken before it.

On the embedded server a query that runs past the connection's deadline ends the server (nothing else stops
its thread: :func:`kgagents.tools.kg.servers.end_embedded`); the store follows the server across restarts and
crashes, restoring the run's KG on the new one from the snapshot it holds (the graph state's) at its next
operation, and a query that was in flight runs once more when another query was the known cause
(:func:`retry_after`). The run is told what happened (:func:`lost_text`, :func:`cut_off_text`). On a server
kgagents did not start, a store that finds its graph gone restores it the same way. Reads run with
``GRAPH.RO_QUERY``, which refuses to change the graph
(and the check refuses write clauses in them first).

FalkorDB's dialect (:data:`kgagents.tools.kg.cypher.FALKORDB`) has no ``elementId()``, no APOC and no ``EXISTS {}``
subqueries, ``CALL {}`` subqueries only with an importing ``WITH``, and property values are scalars or arrays of
scalars; the Cypher prompts for this store keep to that subset.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlparse

from kgagents.core.errors import KGAgentsError
from kgagents.core.extras import require
from kgagents.tools.kg.base import DatabaseStore, KGError, KGSnapshot, ReadResult, WriteResult, empty_snapshot
from kgagents.tools.kg.cypher import (
    NodeRow,
    RelRow,
    build_snapshot,
    compact_result,
    plain_value,
    plan_ids,
    restore_statements,
    snapshot_digest,
)
from kgagents.tools.kg.cypher_dialects import FALKORDB
from kgagents.tools.kg.cypher_scope import prepare
from kgagents.tools.kg.cypher_store import cut_off_text as bolt_cut_off_text
from kgagents.tools.kg.cypher_text import CypherRejected, split_statements
from kgagents.tools.kg.servers import (
    ENDED_CRASHED,
    ENDED_GAVE_UP,
    ENDED_STALLED,
    ServerProcess,
    client_deadline_s,
    embedded,
    embedded_server_at,
    end_embedded,
    query_slot,
    query_timeout_s,
    stalled_before,
    why_ended,
)

logger = logging.getLogger(__name__)

GRAPH_PREFIX = "kgagents_"
Result = TypeVar("Result", WriteResult, ReadResult)
#: How many rows one query of an export or a restore carries: each query stays far below a server's per-query
#: memory (``QUERY_MEM_CAPACITY``) however large the run's KG.
PAGE_ROWS = 2000
#: How many times one run's queries may end the embedded server (each ran past the time limit in a way the server
#: could not stop) before its further queries are refused unsent (:func:`refused_text`).
MAX_RESTARTS_PER_RUN = 2

_restarts: dict[str, int] = {}
_restarts_lock = threading.Lock()


def count_restart(graph_name: str) -> int:
    """Record that a query on ``graph_name`` (one run's KG) had the embedded server restarted; the new count."""
    with _restarts_lock:
        _restarts[graph_name] = _restarts.get(graph_name, 0) + 1
        return _restarts[graph_name]


def restarts_caused(graph_name: str) -> int:
    """How many times queries on ``graph_name`` had the embedded server restarted in this process."""
    with _restarts_lock:
        return _restarts.get(graph_name, 0)


def refused_text(restarts: int) -> str | None:
    """What a run whose queries had the shared server restarted ``restarts`` times is told instead of an answer,
    once that reaches :data:`MAX_RESTARTS_PER_RUN`; None below it."""
    if restarts < MAX_RESTARTS_PER_RUN:
        return None
    return (f"refused: this run's queries ran past the time limit in a way the graph server could not stop "
            f"{restarts} times, and each time the shared server was restarted (every run's KG restored); so that "
            "other runs keep their server, this run's queries are no longer sent (its KG is kept in its graph "
            "state): start a new run, with smaller queries")


def restore_failed_text(error: str) -> str:
    """What a run is told when its KG could not be put on the graph server (after a restart, or to undo a write):
    ``error`` is the server's answer."""
    return (f"this run's KG could not be restored on the graph server ({error}); nothing of this query ran, and "
            "the KG is kept whole in the graph state and restored before the next query: run the query again "
            "(if the server is out of memory, wait for other runs to finish)")


def server_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the server's (or its client's) own error -- refused, out of memory, over a limit -- rather
    than a fault of kgagents."""
    return any(c.__module__.split(".")[0] in ("redis", "falkordb") for c in type(exc).__mro__)


def pages(rows: list[Any], size: int = PAGE_ROWS) -> list[list[Any]]:
    """``rows`` cut into consecutive pages of at most ``size`` (none for no rows)."""
    return [rows[k:k + size] for k in range(0, len(rows), size)]


def graph_name_for(thread_id: str) -> str:
    """The FalkorDB graph (Redis key) of one run: a readable part of the thread id plus a hash of all of it."""
    readable = re.sub(r"[^0-9A-Za-z_-]+", "_", thread_id)[:40]
    return f"{GRAPH_PREFIX}{readable}_{hashlib.sha256(thread_id.encode('utf-8')).hexdigest()[:12]}"


_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def falkordb_url(url: str | None = None) -> str:
    """``url``, ``FALKORDB_URL``, or the embedded server's socket."""
    url = url or os.environ.get("FALKORDB_URL", "").strip()
    if url:
        return url

    return embedded("falkordb").url


def client_for(url: str) -> Any:
    """One client (connection pool) per server for the process; its connections give up on a reply after
    :func:`~kgagents.tools.kg.servers.client_deadline_s`."""
    FalkorDB = require("falkordb", "the FalkorDB backend").FalkorDB

    with _clients_lock:
        client = _clients.get(url)
        if client is None:
            parsed = urlparse(url)
            deadline = client_deadline_s()
            if parsed.scheme == "unix":
                client = FalkorDB(unix_socket_path=parsed.path, socket_timeout=deadline)
            elif parsed.scheme in ("redis", "rediss", "falkor", "falkors"):
                client = FalkorDB(host=parsed.hostname or "127.0.0.1", port=parsed.port or 6379,
                                  username=parsed.username or None, password=parsed.password or None,
                                  ssl=parsed.scheme in ("rediss", "falkors"), socket_timeout=deadline)
            else:
                raise KGError(f"FALKORDB_URL must be redis://host:port, rediss://... or unix:///path, not {url!r}")
            _clients[url] = client
        return client


def forget_client(url: str) -> None:
    with _clients_lock:
        _clients.pop(url, None)


def _end_id(end: Any) -> int | None:
    """The internal id of an edge's end: FalkorDB gives the id itself or the node (``None``: neither)."""
    return end if isinstance(end, int) else getattr(end, "id", None)


def gave_up(exc: BaseException) -> bool:
    """Whether ``exc`` is the connection giving up at its deadline (the server's own limit answers with an error,
    not silence): the server did not stop the query."""
    return isinstance(exc, TimeoutError) or any(
        c.__name__ == "TimeoutError" and c.__module__.startswith("redis") for c in type(exc).__mro__)


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is the connection to the server failing (closed, refused, reset), not the server's answer."""
    return isinstance(exc, OSError) or any(
        c.__name__ == "ConnectionError" and c.__module__.startswith("redis") for c in type(exc).__mro__)


def cut_off_text(limit: float, *, restarted: bool = False) -> str:
    """What a run is told when the connection gave up on its query at the deadline; ``restarted``: the embedded
    server was restarted because of it."""
    text = bolt_cut_off_text(limit)
    if restarted:
        text += ("; the graph server could not stop it, so it was restarted (every run's KG is restored from its "
                 "graph state)")
    return text


def lost_text(why: str) -> str:
    """What a run is told when the embedded server was restarted while its query ran (``why``: an ``ENDED_*``
    reason of :mod:`kgagents.tools.kg.servers`); the run's KG is restored from its graph state."""
    if why in (ENDED_GAVE_UP, ENDED_STALLED):
        cause = "another query held the graph server past the time limit, so it was restarted"
        advice = "run the query again"
    elif why == ENDED_CRASHED:
        cause = ("the graph server stopped (a query, possibly this one, took it past its memory limit) and "
                 "was restarted")
        advice = "run the query again; if it builds large values (long strings or lists), make them smaller"
    else:
        cause = "the graph server was stopped"
        advice = "run the query again"
    return (f"this query did not complete: {cause}; this run's KG was restored from its graph state (nothing of "
            f"this query was kept): {advice}")


def retry_after(why: str) -> bool:
    """Whether a query whose server was restarted under it (``why``) runs once more on the new one: when another
    query, known to be the cause, ended the server (that one is not retried: its connection gave up); never
    after a crash, whose cause may be the query itself."""
    return why in (ENDED_GAVE_UP, ENDED_STALLED)


def _error_text(exc: Exception) -> str:
    if isinstance(exc, KGError):
        return str(exc)
    if gave_up(exc):
        return cut_off_text(query_timeout_s())
    return f"{type(exc).__name__}: {exc}"


class _ServerLost(KGAgentsError):
    """The query did not get an answer from the server: ``text`` for the run, ``retry`` whether to run it again."""

    def __init__(self, text: str, retry: bool) -> None:
        super().__init__(text)
        self.text = text
        self.retry = retry


class FalkorDBStore(DatabaseStore):
    """A run's task KG as its own FalkorDB graph (see the module docstring)."""

    name = "falkordb"
    query_language = "cypher"
    dialect = FALKORDB

    def __init__(self, snapshot: KGSnapshot | None = None, *, thread_id: str, url: str, sync: bool = True) -> None:
        self.url = url
        self.graph_name = graph_name_for(thread_id)
        self._snapshot: KGSnapshot = copy.deepcopy(snapshot) if snapshot else empty_snapshot()
        self._timeout_ms = int(query_timeout_s() * 1000)
        #: the process's embedded server, when ``url`` is its socket: the store follows it across restarts
        self._server: ServerProcess | None = embedded_server_at(url)
        #: the server may not hold this run's KG (a restart, a restore or undo that failed): every operation
        #: restores it first, and runs nothing until that succeeds
        self._restore_pending = False
        #: when (``time.monotonic()``) the last query was sent, once it held its slot (:func:`query_slot`)
        self._sent = time.monotonic()
        try:
            self._connect(url)
            if sync:
                self._sync()
        except KGError:
            raise
        except Exception as exc:
            forget_client(url)
            raise KGError(f"cannot use the FalkorDB server at {url}: {_error_text(exc)}") from exc

    # --- plumbing -------------------------------------------------------------------------------------
    def _connect(self, url: str) -> None:
        self.url = url
        self._client = client_for(url)
        self._graph = self._client.select_graph(self.graph_name)

    def _follow(self, *, restore: bool = True) -> None:
        """On the embedded server: if it was restarted since this store last used it, move to the new one, whose
        graph must then be restored. On another server: the graph must be restored if it is gone (that server was
        restarted without its data). ``restore``: restore it now from the snapshot this store holds (the graph
        state's), as after a crash; until a restore succeeds every operation tries it again first
        (:meth:`_restore`), so a store never answers from, or takes its snapshot from, a graph that lacks its KG."""
        if self._server is None:
            if not self._restore_pending and not self._client.connection.exists(self.graph_name):
                self._restore_pending = True  # it exists from the store's open on
        elif why_ended(self._server, wait=0) is not None:
            old = self.url
            self._server = embedded("falkordb")
            forget_client(old)
            self._connect(self._server.url)
            self._restore_pending = True
        if restore and self._restore_pending:
            self._restore()

    def _restore(self) -> None:
        """Put the snapshot this store holds on the server; a :class:`KGError` saying so when the server refuses
        (the KG stays whole in the snapshot, and the next operation tries again)."""
        self._restore_pending = True
        try:
            self._replace(self._snapshot)
            restored = self._current()
        except KGError as exc:
            raise KGError(restore_failed_text(str(exc))) from exc
        except Exception as exc:
            if not (server_error(exc) or connection_lost(exc)):
                raise
            raise KGError(restore_failed_text(_error_text(exc))) from exc
        self._snapshot = restored
        self._restore_pending = False

    def _lost(self, exc: Exception, sent: float) -> _ServerLost | None:
        """What ``exc``, raised by a query sent at ``sent`` (``time.monotonic()``), means when the connection, not
        the server, failed: the embedded server was restarted under the query (it may run again,
        :func:`retry_after`), or the connection gave up on a query the server did not stop (the embedded server is
        then killed: nothing else stops the server's thread; the query is told it was the cause unless the server
        had stopped answering before it was sent). None: the server answered (an error of the query), or a server
        kgagents did not start failed."""
        server = self._server
        if server is None or isinstance(exc, KGError) or not (gave_up(exc) or connection_lost(exc)):
            return None
        why = why_ended(server, wait=0 if gave_up(exc) else 2.0)
        if why is not None:  # restarted by another query's cause (or crashed): not this query's doing
            return _ServerLost(lost_text(why), retry_after(why))
        if not gave_up(exc):
            return None
        if stalled_before(server, sent):  # it waited behind what holds the server
            end_embedded(server, ENDED_STALLED)
            return _ServerLost(lost_text(ENDED_STALLED), retry_after(ENDED_STALLED))
        restarted = end_embedded(server, ENDED_GAVE_UP)
        text = cut_off_text(query_timeout_s(), restarted=restarted)
        if restarted and refused_text(count_restart(self.graph_name)) is not None:
            text += ("; this run's queries have now had it restarted too often, so its further queries are refused "
                     "unsent")
        return _ServerLost(text, False)

    def _query(self, query: str, params: dict[str, Any] | None = None, *, read_only: bool = False,
               timeout: int | None = None) -> Any:
        """One query on this run's graph, holding a query slot of the embedded server while it is there
        (:func:`~kgagents.tools.kg.servers.query_slot`: the deadline counts from when it holds one)."""
        with query_slot(self._server):
            self._sent = time.monotonic()
            return (self._graph.ro_query if read_only else self._graph.query)(query, params, timeout=timeout)

    def _rows(self, query: str, params: dict[str, Any] | None = None, *, read_only: bool = False) -> list[list[Any]]:
        try:
            result = self._query(query, params, read_only=read_only)
        except Exception as exc:  # a graph that was never written is an "empty key"
            if "empty key" in str(exc):
                return []
            raise
        return result.result_set

    def _export(self) -> tuple[list[NodeRow], list[RelRow]]:
        """The graph's nodes and relationships, read in pages of :data:`PAGE_ROWS` internal ids (by each
        relationship's source), so no query holds more than a page whatever the KG's size."""
        top = self._rows("MATCH (n) RETURN max(id(n))", read_only=True)
        last = top[0][0] if top and top[0][0] is not None else -1
        nodes: list[NodeRow] = []
        rels: list[RelRow] = []
        for low in range(0, last + 1, PAGE_ROWS):
            span = {"low": low, "high": low + PAGE_ROWS}
            nodes += [NodeRow(r[0], r[1], list(r[2] or []), dict(r[3] or {})) for r in self._rows(
                "MATCH (n) WHERE id(n) >= $low AND id(n) < $high RETURN id(n), n.id, labels(n), properties(n)",
                span, read_only=True)]
            rels += [RelRow(r[0], r[1], r[2], dict(r[3] or {})) for r in self._rows(
                "MATCH (a)-[r]->(b) WHERE id(a) >= $low AND id(a) < $high RETURN id(a), id(b), type(r), "
                "properties(r)", span, read_only=True)]
        return nodes, rels

    def _current(self) -> KGSnapshot:
        nodes, rels = self._export()
        assign, _ = plan_ids(nodes)
        return build_snapshot(nodes, rels, assign)

    def _replace(self, snapshot: KGSnapshot) -> None:
        try:
            self._graph.delete()
        except Exception as exc:
            if "empty key" not in str(exc) and "Invalid graph" not in str(exc):
                raise
        self._query("RETURN 0")  # the graph exists (empty), so read-only queries see an empty graph
        for statement, params in restore_statements(snapshot):
            for rows in pages(params["rows"]):
                self._query(statement, {**params, "rows": rows})

    def _sync(self) -> None:
        if not self._client.connection.exists(self.graph_name) or \
                snapshot_digest(self._current()) != snapshot_digest(self._snapshot):
            self._restore()

    # --- sync operations --------------------------------------------------------------------------------
    def clear_sync(self) -> None:
        self.restore_sync(empty_snapshot())

    def restore_sync(self, snapshot: KGSnapshot) -> None:
        """Make ``snapshot`` the run's KG. When the server refuses it, the store keeps it and puts it on the
        server before its next operation (which answers the error if that fails again)."""
        self._follow(restore=False)
        self._snapshot = copy.deepcopy(snapshot)
        try:
            self._restore()
        except KGError as exc:
            logger.warning("FalkorDB graph %s: %s", self.graph_name, exc)

    def _undo(self, before: KGSnapshot) -> str:
        """Put the KG back to ``before`` (the store's snapshot) after a write that failed; what to add to the
        write's error when that failed too (the KG is then restored before the next operation), else ``""``."""
        try:
            if snapshot_digest(self._current()) != snapshot_digest(before):
                self._replace(before)
            return ""
        except Exception as exc:
            if not (isinstance(exc, KGError) or server_error(exc) or connection_lost(exc)):
                raise
            self._restore_pending = True
            return ("; the KG could not be put back as it was before this code (" + _error_text(exc) + "): it is "
                    "restored from the graph state before the next query")

    def _statements(self, code: str, *, read_only: bool = False) -> list[str]:
        return [prepare(s, FALKORDB, read_only=read_only) for s in split_statements(code)]

    def write_sync(self, code: str) -> WriteResult:
        try:
            statements = self._statements(code)
        except CypherRejected as exc:
            return WriteResult(False, f"Rejected: {exc}")
        if not statements:
            return WriteResult(False, "the code holds no Cypher statement")
        return self._twice(lambda: self._write(statements), lambda text: WriteResult(False, text))

    def _twice(self, operation: Callable[[], Result], failed: Callable[[str], Result]) -> Result:
        """``operation`` on the server, once more if the embedded server was restarted under it and that is safe
        (:func:`retry_after`: the run's KG is restored first, so a write starts again from the KG before it).
        Nothing is sent for a run whose queries had the server restarted too often (:func:`refused_text`); the
        server's own errors (out of memory, a restore it refused) are the run's error, not an exception."""
        refused = refused_text(restarts_caused(self.graph_name)) if self._server is not None else None
        if refused is not None:
            return failed(refused)
        for attempt in (1, 2):
            self._sent = time.monotonic()
            try:
                self._follow()
                return operation()
            except _ServerLost as exc:
                lost = exc
            except KGError as exc:
                return failed(str(exc))
            except Exception as exc:  # the server's failure goes to the run
                found = self._lost(exc, self._sent)
                if found is None:
                    if gave_up(exc) or connection_lost(exc) or server_error(exc):
                        return failed(_error_text(exc))
                    raise
                lost = found
            if not lost.retry or attempt == 2:
                return failed(lost.text)
        raise AssertionError("unreachable")

    def _write(self, statements: list[str]) -> WriteResult:
        before = self._snapshot
        try:
            for number, statement in enumerate(statements):
                try:
                    self._query(statement, timeout=self._timeout_ms)
                except Exception as exc:  # the engine's error goes to the fix loop
                    lost = self._lost(exc, self._sent)
                    if lost is not None:  # the server is gone: the next operation restores the KG on the new one
                        raise lost from exc
                    note = self._undo(before) if number else ""
                    where = f" (statement {number + 1} of {len(statements)})" if len(statements) > 1 else ""
                    return WriteResult(False, _error_text(exc) + where + note)
            nodes, rels = self._export()
            assign, problems = plan_ids(nodes)
            if problems:
                return WriteResult(False, "; ".join(problems) + self._undo(before))
            for rows in pages([{"iid": k, "id": v} for k, v in assign.items()]):
                self._query("UNWIND $rows AS row MATCH (n) WHERE id(n) = row.iid SET n.id = row.id", {"rows": rows})
            self._snapshot = build_snapshot(nodes, rels, assign)
        except _ServerLost:
            raise
        except Exception as exc:
            lost = self._lost(exc, self._sent)
            if lost is not None:
                raise lost from exc
            note = self._undo(before)
            if not (isinstance(exc, KGError) or server_error(exc) or connection_lost(exc)):
                raise
            return WriteResult(False, _error_text(exc) + note)
        return WriteResult(True)

    def read_sync(self, query: str) -> ReadResult:
        try:
            statements = self._statements(query, read_only=True)
        except CypherRejected as exc:
            return ReadResult(False, None, f"Rejected: {exc}")
        if not statements:
            return ReadResult(False, None, "the query holds no Cypher statement")
        return self._twice(lambda: self._read(statements), lambda text: ReadResult(False, None, text))

    def _read(self, statements: list[str]) -> ReadResult:
        rows: list[dict[str, Any]] = []
        for statement in statements:
            try:
                result = self._query(statement, read_only=True, timeout=self._timeout_ms)
            except Exception as exc:  # the engine's error goes to the fix loop
                lost = self._lost(exc, self._sent)
                if lost is not None:
                    raise lost from exc
                return ReadResult(False, None, _error_text(exc))
            columns = [h[1] for h in result.header]
            rows = [dict(zip(columns, r, strict=True)) for r in result.result_set]
        ids = self._edge_end_ids(rows)
        return ReadResult(True, compact_result(rows, lambda v: self._convert(v, ids)))

    def _edge_end_ids(self, rows: list[dict[str, Any]]) -> dict[int, Any]:
        """Edges come back with internal node ids: look up the ``id`` property of their ends."""
        from falkordb import Edge, Path  # the falkordb extra: loaded when a FalkorDB graph opens

        wanted: set[int] = set()

        def collect(value: Any) -> None:
            if isinstance(value, Edge):
                for end in (value.src_node, value.dest_node):
                    end_id = _end_id(end)
                    if end_id is not None:
                        wanted.add(end_id)
            elif isinstance(value, Path):
                for edge in value.edges():
                    collect(edge)
            elif isinstance(value, (list, tuple)):
                for v in value:
                    collect(v)
            elif isinstance(value, dict):
                for v in value.values():
                    collect(v)

        for row in rows:
            collect(list(row.values()))
        if not wanted:
            return {}
        return {r[0]: r[1] for r in self._rows("MATCH (n) WHERE id(n) IN $ids RETURN id(n), n.id",
                                               {"ids": sorted(wanted)}, read_only=True)}

    def _convert(self, value: Any, ids: dict[int, Any]) -> Any:
        from falkordb import Edge, Node, Path  # the falkordb extra: loaded when a FalkorDB graph opens

        if isinstance(value, Node):
            props = dict(value.properties)
            return {"id": props.pop("id", None), "labels": list(value.labels or []), "properties": plain_value(props)}
        if isinstance(value, Edge):
            src, dst = _end_id(value.src_node), _end_id(value.dest_node)
            return {"type": value.relation, "source": None if src is None else ids.get(src),
                    "target": None if dst is None else ids.get(dst),
                    "properties": plain_value(dict(value.properties))}
        if isinstance(value, Path):
            return {"nodes": [self._convert(n, ids) for n in value.nodes()],
                    "relationships": [self._convert(e, ids) for e in value.edges()]}
        if isinstance(value, (list, tuple)):
            return [self._convert(v, ids) for v in value]
        if isinstance(value, dict):
            return {k: self._convert(v, ids) for k, v in value.items()}
        return plain_value(value)

    def database_snapshot(self) -> KGSnapshot:
        """What the database holds for this run right now (for tests and diagnostics)."""
        self._follow()
        return self._current()
