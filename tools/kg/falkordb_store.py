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
the KG from the snapshot taken before it. Reads run with ``GRAPH.RO_QUERY``, which refuses to change the graph
(and the check refuses write clauses in them first).

FalkorDB's dialect (:data:`kgagents.tools.kg.cypher.FALKORDB`) has no ``elementId()``, no APOC and no ``EXISTS {}``
subqueries, ``CALL {}`` subqueries only with an importing ``WITH``, and property values are scalars or arrays of
scalars; the Cypher prompts for this store keep to that subset.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import threading
from typing import Any
from urllib.parse import urlparse

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
from kgagents.tools.kg.cypher_text import CypherRejected, split_statements
from kgagents.tools.kg.servers import client_deadline_s, embedded, query_timeout_s

GRAPH_PREFIX = "kgagents_"


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


def _error_text(exc: Exception) -> str:
    if type(exc).__name__ == "TimeoutError" and type(exc).__module__.startswith("redis"):
        # the connection gave up at the deadline (the server's own limit answers with an error, not silence)
        return (f"the query ran past the time limit of {query_timeout_s():g} s (KGAGENTS_KG_QUERY_TIMEOUT_S) and "
                "was cut off: make it do less (fewer rows, smaller ranges and lists)")
    return f"{type(exc).__name__}: {exc}"


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
        try:
            self._client = client_for(url)
            self._graph = self._client.select_graph(self.graph_name)
            if sync:
                self._sync()
        except KGError:
            raise
        except Exception as exc:
            forget_client(url)
            raise KGError(f"cannot use the FalkorDB server at {url}: {_error_text(exc)}") from exc

    # --- plumbing -------------------------------------------------------------------------------------
    def _rows(self, query: str, params: dict[str, Any] | None = None, *, read_only: bool = False) -> list[list[Any]]:
        try:
            result = (self._graph.ro_query if read_only else self._graph.query)(query, params)
        except Exception as exc:  # a graph that was never written is an "empty key"
            if "empty key" in str(exc):
                return []
            raise
        return result.result_set

    def _export(self) -> tuple[list[NodeRow], list[RelRow]]:
        nodes = [NodeRow(r[0], r[1], list(r[2] or []), dict(r[3] or {})) for r in self._rows(
            "MATCH (n) RETURN id(n), n.id, labels(n), properties(n)", read_only=True)]
        rels = [RelRow(r[0], r[1], r[2], dict(r[3] or {})) for r in self._rows(
            "MATCH (a)-[r]->(b) RETURN id(a), id(b), type(r), properties(r)", read_only=True)]
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
        self._graph.query("RETURN 0")  # the graph exists (empty), so read-only queries see an empty graph
        for statement, params in restore_statements(snapshot):
            self._graph.query(statement, params)

    def _sync(self) -> None:
        if not self._client.connection.exists(self.graph_name):
            self._replace(self._snapshot)
            self._snapshot = self._current()
            return
        if snapshot_digest(self._current()) != snapshot_digest(self._snapshot):
            self._replace(self._snapshot)
            self._snapshot = self._current()

    # --- sync operations --------------------------------------------------------------------------------
    def clear_sync(self) -> None:
        self._replace(empty_snapshot())
        self._snapshot = empty_snapshot()

    def restore_sync(self, snapshot: KGSnapshot) -> None:
        self._replace(snapshot)
        self._snapshot = self._current()

    def _undo(self, before: KGSnapshot) -> None:
        if snapshot_digest(self._current()) != snapshot_digest(before):
            self._replace(before)

    def _statements(self, code: str, *, read_only: bool = False) -> list[str]:
        return [prepare(s, FALKORDB, read_only=read_only) for s in split_statements(code)]

    def write_sync(self, code: str) -> WriteResult:
        try:
            statements = self._statements(code)
        except CypherRejected as exc:
            return WriteResult(False, f"Rejected: {exc}")
        if not statements:
            return WriteResult(False, "the code holds no Cypher statement")
        before = self._snapshot
        try:
            for number, statement in enumerate(statements):
                try:
                    self._graph.query(statement, timeout=self._timeout_ms)
                except Exception as exc:  # noqa: BLE001 - the engine's error goes to the fix loop
                    if number:
                        self._undo(before)
                    where = f" (statement {number + 1} of {len(statements)})" if len(statements) > 1 else ""
                    return WriteResult(False, _error_text(exc) + where)
            nodes, rels = self._export()
            assign, problems = plan_ids(nodes)
            if problems:
                self._undo(before)
                return WriteResult(False, "; ".join(problems))
            if assign:
                self._graph.query("UNWIND $rows AS row MATCH (n) WHERE id(n) = row.iid SET n.id = row.id",
                                  {"rows": [{"iid": k, "id": v} for k, v in assign.items()]})
            self._snapshot = build_snapshot(nodes, rels, assign)
        except Exception:
            self._undo(before)
            raise
        return WriteResult(True)

    def read_sync(self, query: str) -> ReadResult:
        try:
            statements = self._statements(query, read_only=True)
        except CypherRejected as exc:
            return ReadResult(False, None, f"Rejected: {exc}")
        if not statements:
            return ReadResult(False, None, "the query holds no Cypher statement")
        rows: list[dict[str, Any]] = []
        for statement in statements:
            try:
                result = self._graph.ro_query(statement, timeout=self._timeout_ms)
            except Exception as exc:  # noqa: BLE001
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
        return self._current()
