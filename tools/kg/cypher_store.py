"""The task KG in a Bolt graph database (Neo4j, Memgraph, ArcadeDB, ...) through the official ``neo4j`` driver.

Configuration: ``NEO4J_URI`` (or the context's ``kg_url``), ``NEO4J_USER`` (default ``neo4j``),
``NEO4J_PASSWORD``, ``NEO4J_DATABASE`` (default: the server's default database). Without a URI, an embedded
ArcadeDB Bolt server is started in a child process for the life of this process (see
:mod:`tools.kg.servers`; it takes a few seconds: a JVM starts).

One database holds the KGs of many runs: each run's nodes carry its scope label, and every LLM-written
statement is rewritten by :func:`tools.kg.cypher.scope_query` before it runs, so it can only match, change or
delete nodes of its own run. A write runs in one transaction together with the id assignment and a check
that the number of nodes in the scope moved exactly as the server's counters say (a statement that created or
deleted nodes outside its scope is rolled back); reads run in a transaction that is always rolled back.

On open, the scope is compared with the snapshot the graph state holds and restored from it when they differ
(e.g. after a crash between a database write and the checkpoint): a resumed run never sees a duplicate.

The server's dialect (:func:`tools.kg.cypher.bolt_dialect`) comes from the agent string it announces, once per
server and process: Neo4j gets the whole language of the KGoT paper's prompts (subqueries, ``CALL {}``, APOC's
pure functions when ``apoc.version()`` answers), ArcadeDB and unrecognised servers their subsets. It selects the
prompts (``store.dialect``) and what the scope rewrite lets through.
"""

from __future__ import annotations

import copy
import os
import threading
from dataclasses import dataclass
from typing import Any

from tools.kg.base import DatabaseStore, KGError, KGSnapshot, ReadResult, WriteResult, empty_snapshot
from tools.kg.cypher import (
    CypherDialect,
    CypherScopeError,
    NodeRow,
    RelRow,
    bolt_dialect,
    build_snapshot,
    compact_result,
    plain_value,
    plan_ids,
    quote_name,
    restore_statements,
    scope_label_for,
    scope_query,
    snapshot_digest,
    split_statements,
)


@dataclass(frozen=True)
class BoltConfig:
    uri: str
    user: str
    password: str
    database: str | None


def bolt_config(url: str | None = None) -> BoltConfig:
    """The server to use: ``url`` or ``NEO4J_URI``; without either, the embedded ArcadeDB Bolt server."""
    uri = url or os.environ.get("NEO4J_URI", "").strip()
    if uri:
        return BoltConfig(uri, os.environ.get("NEO4J_USER") or os.environ.get("NEO4J_USERNAME") or "neo4j",
                          os.environ.get("NEO4J_PASSWORD", ""), os.environ.get("NEO4J_DATABASE") or None)
    from tools.kg.servers import embedded

    server = embedded("arcadedb")
    return BoltConfig(server.url, server.extra["user"], server.extra["password"], server.extra["database"])


_drivers: dict[BoltConfig, Any] = {}
_drivers_lock = threading.Lock()


def driver_for(config: BoltConfig) -> Any:
    """One driver (connection pool) per server and user for the process; runs share pools, not KGs."""
    import neo4j

    with _drivers_lock:
        drv = _drivers.get(config)
        if drv is None:
            drv = neo4j.GraphDatabase.driver(config.uri, auth=(config.user, config.password))
            _drivers[config] = drv
        return drv


def close_drivers() -> None:
    with _drivers_lock:
        for drv in _drivers.values():
            drv.close()
        _drivers.clear()
        _dialects.clear()


_dialects: dict[BoltConfig, CypherDialect] = {}


def dialect_for(config: BoltConfig) -> CypherDialect:
    """The Cypher dialect of the server (asked once per server and process): its agent string names it, and a
    Neo4j server is asked whether APOC is installed."""
    with _drivers_lock:
        known = _dialects.get(config)
    if known is not None:
        return known
    import neo4j.exceptions

    drv = driver_for(config)
    agent = drv.get_server_info().agent or ""
    apoc = False
    if bolt_dialect(agent).server == "Neo4j":
        session = drv.session(database=config.database) if config.database else drv.session()
        with session:
            try:
                session.run("RETURN apoc.version() AS version").consume()
                apoc = True
            except neo4j.exceptions.Neo4jError:
                apoc = False
    dialect = bolt_dialect(agent, apoc=apoc)
    with _drivers_lock:
        _dialects[config] = dialect
    return dialect


def _error_text(exc: Exception) -> str:
    message = getattr(exc, "message", None) or str(exc)
    code = getattr(exc, "code", None)
    return f"{type(exc).__name__}{f' ({code})' if code else ''}: {message}"


class Neo4jStore(DatabaseStore):
    """A run's task KG in a Bolt database, scoped by a label (see the module docstring)."""

    name = "neo4j"
    query_language = "cypher"

    def __init__(self, snapshot: KGSnapshot | None = None, *, thread_id: str, config: BoltConfig,
                 sync: bool = True) -> None:
        self.scope_label = scope_label_for(thread_id)
        self._scope = ":" + quote_name(self.scope_label)
        self._config = config
        self._driver = driver_for(config)
        self._snapshot: KGSnapshot = copy.deepcopy(snapshot) if snapshot else empty_snapshot()
        try:
            self.dialect = dialect_for(config)
            if sync:
                self._sync()
        except Exception as exc:
            raise KGError(f"cannot use the Bolt server {config.uri}: {_error_text(exc)}") from exc

    # --- plumbing -------------------------------------------------------------------------------------
    def _session(self) -> Any:
        return self._driver.session(database=self._config.database) if self._config.database \
            else self._driver.session()

    def _export(self, tx: Any) -> tuple[list[NodeRow], list[RelRow]]:
        nodes = [NodeRow(r["iid"], r["id"], list(r["labels"]), dict(r["props"])) for r in tx.run(
            f"MATCH (n{self._scope}) RETURN elementId(n) AS iid, n.id AS id, labels(n) AS labels, "
            "properties(n) AS props")]
        rels = [RelRow(r["s"], r["t"], r["type"], dict(r["props"])) for r in tx.run(
            f"MATCH (a{self._scope})-[r]->(b{self._scope}) RETURN elementId(a) AS s, elementId(b) AS t, "
            "type(r) AS type, properties(r) AS props")]
        return nodes, rels

    def _current(self, tx: Any) -> KGSnapshot:
        nodes, rels = self._export(tx)
        assign, _ = plan_ids(nodes, [self.scope_label])
        return build_snapshot(nodes, rels, assign, hidden_labels=[self.scope_label])

    def _replace(self, tx: Any, snapshot: KGSnapshot) -> None:
        tx.run(f"MATCH (n{self._scope}) DETACH DELETE n").consume()
        for statement, params in restore_statements(snapshot, self.scope_label):
            tx.run(statement, **params).consume()

    def _sync(self) -> None:
        """Make the scope hold exactly the state's snapshot (restore only when they differ)."""
        with self._session() as session:
            tx = session.begin_transaction()
            try:
                if snapshot_digest(self._current(tx)) != snapshot_digest(self._snapshot):
                    self._replace(tx, self._snapshot)
                    self._snapshot = self._current(tx)
                tx.commit()
            finally:
                if not tx.closed():
                    tx.rollback()

    # --- sync operations --------------------------------------------------------------------------------
    def clear_sync(self) -> None:
        with self._session() as session:
            session.run(f"MATCH (n{self._scope}) DETACH DELETE n").consume()
        self._snapshot = empty_snapshot()

    def restore_sync(self, snapshot: KGSnapshot) -> None:
        with self._session() as session:
            tx = session.begin_transaction()
            try:
                self._replace(tx, snapshot)
                self._snapshot = self._current(tx)
                tx.commit()
            finally:
                if not tx.closed():
                    tx.rollback()

    def write_sync(self, code: str) -> WriteResult:
        import neo4j.exceptions

        try:
            statements = [scope_query(s, self.scope_label, self.dialect) for s in split_statements(code)]
        except CypherScopeError as exc:
            return WriteResult(False, f"Rejected: {exc}")
        if not statements:
            return WriteResult(False, "the code holds no Cypher statement")
        with self._session() as session:
            tx = session.begin_transaction()
            try:
                created = deleted = 0
                for statement in statements:
                    counters = tx.run(statement).consume().counters
                    created += counters.nodes_created
                    deleted += counters.nodes_deleted
                nodes, rels = self._export(tx)
                if len(nodes) != len(self._snapshot["nodes"]) + created - deleted:
                    return WriteResult(False, "Rejected: the statement created or deleted nodes outside this "
                                              "knowledge graph")
                assign, problems = plan_ids(nodes, [self.scope_label])
                if problems:
                    return WriteResult(False, "; ".join(problems))
                if assign:
                    tx.run(f"UNWIND $rows AS row MATCH (n{self._scope}) WHERE elementId(n) = row.iid "
                           "SET n.id = row.id", rows=[{"iid": k, "id": v} for k, v in assign.items()]).consume()
                snapshot = build_snapshot(nodes, rels, assign, hidden_labels=[self.scope_label])
                tx.commit()
            except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, ValueError, TypeError) as exc:
                return WriteResult(False, _error_text(exc))
            finally:
                if not tx.closed():
                    tx.rollback()
        self._snapshot = snapshot
        return WriteResult(True)

    def read_sync(self, query: str) -> ReadResult:
        import neo4j.exceptions

        try:
            statements = [scope_query(s, self.scope_label, self.dialect) for s in split_statements(query)]
        except CypherScopeError as exc:
            return ReadResult(False, None, f"Rejected: {exc}")
        if not statements:
            return ReadResult(False, None, "the query holds no Cypher statement")
        rows: list[dict[str, Any]] = []
        with self._session() as session:
            tx = session.begin_transaction()
            try:
                for statement in statements:
                    rows = [dict(record) for record in tx.run(statement)]
                ends = self._relationship_ends(tx, rows)
            except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, ValueError, TypeError) as exc:
                return ReadResult(False, None, _error_text(exc))
            finally:
                tx.rollback()  # a read never changes the KG
        return ReadResult(True, compact_result(rows, lambda v: self._convert(v, ends)))

    def _relationship_ends(self, tx: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Relationships come back with bare end nodes: look up the ``id`` property of their ends."""
        from neo4j.graph import Path, Relationship

        wanted: set[str] = set()

        def collect(value: Any) -> None:
            if isinstance(value, Relationship):
                wanted.update(n.element_id for n in (value.start_node, value.end_node) if n is not None)
            elif isinstance(value, Path):
                for rel in value.relationships:
                    collect(rel)
            elif isinstance(value, (list, tuple)):
                for v in value:
                    collect(v)
            elif isinstance(value, dict):
                for v in value.values():
                    collect(v)

        collect([list(r.values()) for r in rows])
        if not wanted:
            return {}
        return {r["e"]: r["id"] for r in tx.run(f"MATCH (n{self._scope}) WHERE elementId(n) IN $ids "
                                                "RETURN elementId(n) AS e, n.id AS id", ids=sorted(wanted))}

    def _convert(self, value: Any, ends: dict[str, Any]) -> Any:
        from neo4j.graph import Node, Path, Relationship

        if isinstance(value, Node):
            props = dict(value.items())
            return {"id": props.pop("id", None), "labels": sorted(lb for lb in value.labels if lb != self.scope_label),
                    "properties": plain_value(props)}
        if isinstance(value, Relationship):
            start, end = value.start_node, value.end_node
            return {"type": value.type, "source": ends.get(start.element_id) if start is not None else None,
                    "target": ends.get(end.element_id) if end is not None else None,
                    "properties": plain_value(dict(value.items()))}
        if isinstance(value, Path):
            return {"nodes": [self._convert(n, ends) for n in value.nodes],
                    "relationships": [self._convert(r, ends) for r in value.relationships]}
        if isinstance(value, (list, tuple)):
            return [self._convert(v, ends) for v in value if v != self.scope_label]
        if isinstance(value, dict):
            return {k: self._convert(v, ends) for k, v in value.items()}
        return plain_value(value)

    def database_snapshot(self) -> KGSnapshot:
        """What the database holds for this run right now (for tests and diagnostics)."""
        with self._session() as session:
            tx = session.begin_transaction()
            try:
                return self._current(tx)
            finally:
                tx.rollback()
