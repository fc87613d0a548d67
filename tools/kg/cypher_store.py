"""The task KG in a Bolt graph database (Neo4j, Memgraph, ArcadeDB, ...) through the official ``neo4j`` driver.

Configuration: ``NEO4J_URI`` (or the context's ``kg_url``), ``NEO4J_USER`` (default ``neo4j``),
``NEO4J_PASSWORD``, ``NEO4J_DATABASE`` (default: the server's default database); the user, the password and
``KGAGENTS_ARCADEDB_HTTP`` go only to ``NEO4J_URI``'s server: a ``kg_url`` elsewhere connects without them
(:mod:`kgagents.core.keys`). Without a URI, an embedded
ArcadeDB Bolt server is started in a child process for the life of this process (see
:mod:`kgagents.tools.kg.servers`; it takes a few seconds: a JVM starts).

**Isolation** (:class:`BoltServer`): runs are kept apart by the database wherever the server has several.

- ``database`` mode: every run's KG is a database of its own, created on first use (``kg-<hash of the run>``):
  on the embedded ArcadeDB server (through its HTTP API, with the root password this process gave it), on an
  ArcadeDB server whose HTTP address is in ``KGAGENTS_ARCADEDB_HTTP``, and on Neo4j Enterprise (``CREATE
  DATABASE`` on the ``system`` database; the user needs that privilege). A query cannot name another database
  (``USE`` is refused, and the session is bound to the run's database), so another run's KG is out of reach.
  The embedded server keeps at most ``KGAGENTS_BOLT_MAX_DATABASES`` (default 64) databases and drops the least
  recently used idle one beyond that: the graph state holds every KG, so a run whose database was dropped gets
  it back, restored from its state, at its next operation.
- ``shared`` mode (Neo4j Community, Memgraph, an ArcadeDB server without its HTTP address): one database holds
  every run's KG, each run's nodes under its scope label. Such a server is **single-tenant**: a run takes a lease
  on it (renewed by each operation, released when a KGoT run ends, expiring after ``KGAGENTS_BOLT_LEASE_S``
  seconds, default 300) and a second run is refused while the lease is held, unless the user sets
  ``KGAGENTS_BOLT_CONCURRENT=1`` -- then concurrent runs share the database, kept apart by labels only.
  ``KGAGENTS_BOLT_ISOLATION=database|shared`` forces a mode (``auto``, the default, picks ``database`` where the
  server offers it).

In both modes every LLM-written statement passes :func:`kgagents.tools.kg.cypher_scope.prepare` (the checks, rebuilt
from its tokens, the scope label on every node pattern) and a write runs in one transaction together with the id
assignment and a check that the number of nodes in the scope moved exactly as the server's counters say; reads
cannot write: the check refuses write clauses in them (ArcadeDB commits some writes of a read transaction), and they
run in a read-mode session (Neo4j refuses writes there) in a transaction that is always rolled back. Every
transaction has a time limit (``KGAGENTS_KG_QUERY_TIMEOUT_S``, default 30 s), which Neo4j enforces through the
driver's transaction timeout and the embedded ArcadeDB server through its command timeout; and the connection gives
up waiting at :func:`~kgagents.tools.kg.servers.client_deadline_s`, for a server whose limit does not fire (ArcadeDB
checks it in scans, not inside one expression): the run gets an error then.

On open, the run's KG is compared with the snapshot the graph state holds and restored from it when they differ
(e.g. after a crash between a database write and the checkpoint): a resumed run never sees a duplicate.

The server's dialect (:func:`kgagents.tools.kg.cypher_dialects.bolt_dialect`) comes from the agent string it announces,
once per server and process; it selects the prompts (``store.dialect``) and what the statement checks allow.
"""

from __future__ import annotations

import copy
import hashlib
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from kgagents.core.keys import credentials_go, same_host, say_once
from kgagents.core.third_party import fell_back, private_part
from kgagents.tools.kg.base import DatabaseStore, KGError, KGSnapshot, ReadResult, WriteResult, empty_snapshot
from kgagents.tools.kg.cypher import (
    NodeRow,
    RelRow,
    build_snapshot,
    compact_result,
    plain_value,
    plan_ids,
    quote_name,
    restore_statements,
    snapshot_digest,
)
from kgagents.tools.kg.cypher_dialects import CypherDialect, bolt_dialect
from kgagents.tools.kg.cypher_scope import SCOPE_PREFIX, prepare, scope_label_for
from kgagents.tools.kg.cypher_text import CypherRejected, split_statements
from kgagents.tools.kg.servers import client_deadline_s, embedded, query_timeout_s

#: The lease node of a shared (single-tenant) database: its label starts with the reserved scope prefix, so no
#: LLM-written statement can name it.
LEASE_LABEL = SCOPE_PREFIX + "lease"


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError as exc:
        raise KGError(f"{name} must be a number, not {raw!r}") from exc
    if value < 0:
        raise KGError(f"{name} cannot be negative ({raw!r})")
    return value


@dataclass(frozen=True)
class BoltConfig:
    uri: str
    user: str
    password: str
    database: str | None
    admin_url: str | None = None
    """The HTTP address of an ArcadeDB server (creates and drops the runs' databases)."""
    embedded: bool = False
    isolation: str = "auto"
    """``auto``, ``database`` or ``shared`` (``KGAGENTS_BOLT_ISOLATION``)."""
    concurrent: bool = False
    """Concurrent runs may share a single-database server (``KGAGENTS_BOLT_CONCURRENT``)."""


def bolt_config(url: str | None = None) -> BoltConfig:
    """The server to use: ``url`` or ``NEO4J_URI``; without either, the embedded ArcadeDB Bolt server."""
    isolation = os.environ.get("KGAGENTS_BOLT_ISOLATION", "").strip().lower() or "auto"
    if isolation not in ("auto", "database", "shared"):
        raise KGError(f"KGAGENTS_BOLT_ISOLATION is auto, database or shared, not {isolation!r}")
    concurrent = os.environ.get("KGAGENTS_BOLT_CONCURRENT", "").strip().lower() in ("1", "true", "yes")
    configured = os.environ.get("NEO4J_URI", "").strip()
    uri = url or configured
    if uri:
        if not credentials_go(url, configured):  # NEO4J_USER / NEO4J_PASSWORD belong to NEO4J_URI's server only
            if any(os.environ.get(name) for name in ("NEO4J_USER", "NEO4J_USERNAME", "NEO4J_PASSWORD")):
                say_once(f"{uri} is not NEO4J_URI's server ({configured or 'NEO4J_URI is not set'}): connecting "
                         "without NEO4J_USER / NEO4J_PASSWORD")
            return BoltConfig(uri, "", "", os.environ.get("NEO4J_DATABASE") or None, None, isolation=isolation,
                              concurrent=concurrent)
        return BoltConfig(uri, os.environ.get("NEO4J_USER") or os.environ.get("NEO4J_USERNAME") or "neo4j",
                          os.environ.get("NEO4J_PASSWORD", ""), os.environ.get("NEO4J_DATABASE") or None,
                          arcadedb_admin_url(uri), isolation=isolation, concurrent=concurrent)
    server = embedded("arcadedb")
    return BoltConfig(server.url, server.extra["user"], server.extra["password"], server.extra["database"],
                      f"http://127.0.0.1:{server.extra['http_port']}", embedded=True, isolation=isolation,
                      concurrent=concurrent)


def arcadedb_admin_url(uri: str) -> str | None:
    """``KGAGENTS_ARCADEDB_HTTP``, ArcadeDB's HTTP API, which receives ``NEO4J_USER`` / ``NEO4J_PASSWORD``: only on
    the host of the Bolt server ``uri`` (``NEO4J_URI``'s); elsewhere it is not used (said once)."""
    admin = os.environ.get("KGAGENTS_ARCADEDB_HTTP", "").strip().rstrip("/") or None
    if admin is not None and not same_host(admin, uri):
        say_once(f"KGAGENTS_ARCADEDB_HTTP ({admin}) is not on the host of NEO4J_URI ({uri}): not used, since "
                 "NEO4J_USER / NEO4J_PASSWORD go only to that server")
        return None
    return admin


def database_name_for(scope: str) -> str:
    """The database of one run's KG: a name Neo4j and ArcadeDB both accept (lower case, letters, digits, ``-``)."""
    return "kg-" + hashlib.sha256(scope.encode("utf-8")).hexdigest()[:24]


def _error_text(exc: Exception) -> str:
    message = getattr(exc, "message", None) or str(exc)
    code = getattr(exc, "code", None)
    return f"{type(exc).__name__}{f' ({code})' if code else ''}: {message}"


READ_TIMEOUT = private_part("neo4j", "Transaction._connection.socket.set_read_timeout", tested="6.4.1",
                            fallback="only the server's own limit stops a query")


def give_up_after(tx: Any, seconds: float) -> bool:
    """Make the connection under ``tx`` stop waiting for the server after ``seconds`` without a reply: the read
    timeout the driver itself sets from a server's ``connection.recv_timeout_seconds`` hint (a private part of the
    neo4j driver, listed in docs/dependencies.md). Returns whether it could; without it, only the server's own
    limit stops a query (said once)."""
    connection = getattr(tx, "_connection", None)
    setter = getattr(getattr(connection, "socket", None), "set_read_timeout", None)
    if not callable(setter):
        fell_back(READ_TIMEOUT, f"{type(tx).__name__} has no _connection.socket.set_read_timeout")
        return False
    try:
        setter(seconds)
    except Exception as exc:  # noqa: BLE001 - another driver: the server's own limit only
        fell_back(READ_TIMEOUT, exc)
        return False
    return True


def cut_off_text(limit: float) -> str:
    """What a run is told when its query ran past the time limit and the connection gave up on it."""
    return (f"the query ran past the time limit of {limit:g} s (KGAGENTS_KG_QUERY_TIMEOUT_S) and was cut off: "
            "make it do less (fewer rows, smaller ranges and lists)")


# ------------------------------------------------------------------------------------------------------------
# Database administration: one database per run
# ------------------------------------------------------------------------------------------------------------
class _ArcadeDBAdmin:
    """Creates and drops databases through an ArcadeDB server's HTTP API."""

    def __init__(self, url: str, user: str, password: str) -> None:
        self.url = url
        self.client = httpx.Client(base_url=url, auth=(user, password), timeout=60.0, trust_env=False)

    def _command(self, command: str) -> None:
        try:
            response = self.client.post("/api/v1/server", json={"command": command})
        except httpx.HTTPError as exc:
            raise KGError(f"the ArcadeDB server at {self.url} cannot be reached: {exc}") from exc
        if response.status_code >= 400:
            raise KGError(f"ArcadeDB refused '{command}': HTTP {response.status_code} {response.text[:300]}")

    def exists(self, name: str) -> bool:
        response = self.client.get("/api/v1/databases")
        return response.status_code < 400 and name in response.json().get("result", [])

    def create(self, name: str) -> None:
        if not self.exists(name):
            self._command(f"create database {name}")

    def drop(self, name: str) -> None:
        if self.exists(name):
            self._command(f"drop database {name}")


class _Neo4jAdmin:
    """Creates and drops databases on Neo4j Enterprise (through the ``system`` database)."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver

    def create(self, name: str) -> None:
        with self.driver.session(database="system") as session:
            session.run("CREATE DATABASE $name IF NOT EXISTS WAIT", name=name).consume()

    def drop(self, name: str) -> None:
        with self.driver.session(database="system") as session:
            session.run("DROP DATABASE $name IF EXISTS WAIT", name=name).consume()


class BoltServer:
    """One Bolt server as this process uses it: its driver, its dialect and how runs are kept apart on it."""

    def __init__(self, config: BoltConfig) -> None:
        import neo4j  # the Neo4j driver: loaded when a Bolt database opens

        self.config = config
        self.driver = driver_for(config)
        agent = self.driver.get_server_info().agent or ""
        self.dialect = bolt_dialect(agent)
        self.admin: _ArcadeDBAdmin | _Neo4jAdmin | None = None
        if self.dialect.server == "Neo4j":
            with self._session(config.database) as session:
                try:
                    session.run("RETURN apoc.version() AS version").consume()
                    self.dialect = bolt_dialect(agent, apoc=True)
                except neo4j.exceptions.Neo4jError:
                    pass
                edition = session.run("CALL dbms.components() YIELD edition RETURN edition").single()
            if edition and str(edition["edition"]).lower() == "enterprise":
                self.admin = _Neo4jAdmin(self.driver)
        elif config.admin_url and self.dialect.server == "ArcadeDB":
            self.admin = _ArcadeDBAdmin(config.admin_url, config.user, config.password)
        wanted = config.isolation
        if wanted == "database" and self.admin is None:
            raise KGError(f"KGAGENTS_BOLT_ISOLATION=database, but the Bolt server at {config.uri} ({agent}) cannot "
                          "give each run a database of its own (Neo4j Enterprise, or ArcadeDB with "
                          "KGAGENTS_ARCADEDB_HTTP set, can)")
        self.mode = "shared" if wanted == "shared" or self.admin is None else "database"
        self.concurrent = config.concurrent
        self.lease_s = _env_number("KGAGENTS_BOLT_LEASE_S", 300.0)
        # the embedded server's databases are this process's own: it keeps at most 64 of them; on another server
        # only a cap the user sets drops databases (another process may be using them)
        self.max_databases = int(_env_number("KGAGENTS_BOLT_MAX_DATABASES", 64 if config.embedded else 0))
        self._lock = threading.Lock()
        self._databases: OrderedDict[str, int] = OrderedDict()  # created database -> generation (LRU order)
        self._in_use: dict[str, int] = {}
        self._generation = 0
        if self.mode == "shared":
            print(f"kgagents: the Bolt server {config.uri} ({agent or 'unknown server'}) keeps every run's KG in one "
                  "database, kept apart by labels only; it is single-tenant: "
                  + ("concurrent runs are allowed (KGAGENTS_BOLT_CONCURRENT=1)." if self.concurrent else
                     "a run holds it at a time (set KGAGENTS_BOLT_CONCURRENT=1 to let runs share it)."),
                  file=sys.stderr)

    def _session(self, database: str | None, *, read: bool = False) -> Any:
        """A session on ``database`` (the server's default when None); ``read``: in read access mode, in which
        Neo4j refuses writes."""
        import neo4j  # the Neo4j driver: loaded when a Bolt database opens

        mode = neo4j.READ_ACCESS if read else neo4j.WRITE_ACCESS
        return self.driver.session(database=database, default_access_mode=mode) if database else \
            self.driver.session(default_access_mode=mode)

    def database_for(self, scope: str) -> str | None:
        """The database that holds the KG ``scope`` (the configured one in shared mode)."""
        return database_name_for(scope) if self.mode == "database" else self.config.database

    @contextmanager
    def use(self, database: str | None) -> Iterator[int]:
        """Hold ``database`` for one operation: it exists (created if needed) and is not dropped meanwhile.
        Yields its generation, which changes when the database was created anew (it is empty then)."""
        if self.mode != "database" or database is None:
            yield 0
            return
        with self._lock:
            generation = self._databases.get(database)
            if generation is None:
                assert self.admin is not None
                self.admin.create(database)
                self._generation += 1
                generation = self._databases[database] = self._generation
            self._databases.move_to_end(database)
            self._in_use[database] = self._in_use.get(database, 0) + 1
            self._evict()
        try:
            yield generation
        finally:
            with self._lock:
                self._in_use[database] -= 1
                if not self._in_use[database]:
                    del self._in_use[database]

    def _evict(self) -> None:
        """Drop the least recently used idle databases beyond the cap (embedded server only; with the lock)."""
        if not self.max_databases or self.admin is None:
            return
        idle = [name for name in self._databases if name not in self._in_use]
        for name in idle[:max(0, len(self._databases) - self.max_databases)]:
            self.admin.drop(name)
            del self._databases[name]

    # -- shared mode: one run at a time -------------------------------------------------------------------
    def take_lease(self, run: str) -> None:
        """In shared mode, hold the server for ``run`` (renewed by each operation); another run's live lease is
        a :class:`KGError` unless concurrent runs were allowed."""
        if self.mode != "shared" or self.concurrent:
            return
        with self._session(self.config.database) as session:
            record = session.run(
                f"MERGE (l:{quote_name(LEASE_LABEL)} {{name: 'kgagents'}}) "
                "WITH l, l.holder AS holder, l.at AS at, timestamp() AS now "
                "WITH l, holder, at, now, holder IS NULL OR holder = $run OR at < now - $ttl AS free "
                "SET l.holder = CASE WHEN free THEN $run ELSE holder END, "
                "l.at = CASE WHEN free THEN now ELSE at END "
                "RETURN free, holder, now - at AS age",
                run=run, ttl=int(self.lease_s * 1000)).single()
        if record is not None and not record["free"]:
            age = (record["age"] or 0) / 1000
            raise KGError(
                f"the Bolt server {self.config.uri} is single-tenant (one database: runs are kept apart by labels "
                f"only) and another run holds it (last used {age:.0f} s ago; its lease ends after "
                f"{self.lease_s:.0f} s). Wait for it, give runs a server with databases of their own (Neo4j "
                "Enterprise, ArcadeDB with KGAGENTS_ARCADEDB_HTTP), or set KGAGENTS_BOLT_CONCURRENT=1 to let runs "
                "share this one")

    def release_lease(self, run: str) -> None:
        """Give the server back (shared mode): the next run need not wait for the lease to expire."""
        if self.mode != "shared" or self.concurrent:
            return
        with self._session(self.config.database) as session:
            session.run(f"MATCH (l:{quote_name(LEASE_LABEL)} {{name: 'kgagents'}}) WHERE l.holder = $run DELETE l",
                        run=run).consume()

    def close(self) -> None:
        if isinstance(self.admin, _ArcadeDBAdmin):
            self.admin.client.close()


_servers: dict[BoltConfig, BoltServer] = {}
_servers_lock = threading.Lock()
_drivers: dict[tuple[str, str, str], Any] = {}
_drivers_lock = threading.Lock()


def driver_for(config: BoltConfig) -> Any:
    """One driver (connection pool) per server and user for the process; runs share pools, not KGs."""
    import neo4j  # the Neo4j driver: loaded when a Bolt database opens

    key = (config.uri, config.user, config.password)
    with _drivers_lock:
        driver = _drivers.get(key)
        if driver is None:
            auth = (config.user, config.password) if config.user else None  # no user: a server of no credentials
            driver = _drivers[key] = neo4j.GraphDatabase.driver(config.uri, auth=auth)
        return driver


def server_for(config: BoltConfig) -> BoltServer:
    """One :class:`BoltServer` (driver, dialect, isolation) per server and user for the process."""
    with _servers_lock:
        server = _servers.get(config)
        if server is None:
            server = _servers[config] = BoltServer(config)
        return server


def close_drivers() -> None:
    with _servers_lock:
        for server in _servers.values():
            server.close()
        _servers.clear()
    with _drivers_lock:
        for driver in _drivers.values():
            driver.close()
        _drivers.clear()


def release_run(url: str | None, run_id: str) -> None:
    """``run_id`` is done: a single-tenant server it used is free for the next run (servers of this process only;
    the embedded server gives every run a database of its own and has nothing to release)."""
    if not (url or os.environ.get("NEO4J_URI", "").strip()):
        return
    with _servers_lock:
        server = _servers.get(bolt_config(url))
    if server is not None:
        server.release_lease(run_id)


def dialect_for(config: BoltConfig) -> CypherDialect:
    """The Cypher dialect of the server (asked once per server and process)."""
    return server_for(config).dialect


# ------------------------------------------------------------------------------------------------------------
# The store
# ------------------------------------------------------------------------------------------------------------
class Neo4jStore(DatabaseStore):
    """A run's task KG in a Bolt database (see the module docstring)."""

    name = "neo4j"
    query_language = "cypher"

    def __init__(self, snapshot: KGSnapshot | None = None, *, thread_id: str, config: BoltConfig,
                 run_id: str | None = None, sync: bool = True) -> None:
        self.scope_label = scope_label_for(thread_id)
        self._scope = ":" + quote_name(self.scope_label)
        self._config = config
        self._run = run_id or thread_id
        self._snapshot: KGSnapshot = copy.deepcopy(snapshot) if snapshot else empty_snapshot()
        self._timeout = query_timeout_s()
        self._deadline = client_deadline_s(self._timeout)
        self._generation = -1
        try:
            self._server = server_for(config)
            self.dialect = self._server.dialect
            self.database = self._server.database_for(thread_id)
            with self._hold() as generation:
                if sync:
                    self._sync()
                self._generation = generation
        except KGError:
            raise
        except Exception as exc:
            raise KGError(f"cannot use the Bolt server {config.uri}: {_error_text(exc)}") from exc

    # --- plumbing -------------------------------------------------------------------------------------
    @contextmanager
    def _hold(self) -> Iterator[int]:
        """Hold the run's database for one operation (and, on a shared server, the lease)."""
        self._server.take_lease(self._run)
        with self._server.use(self.database) as generation:
            yield generation

    def _begin(self, session: Any) -> Any:
        """A transaction under the time limit, on a connection that gives up at the deadline."""
        tx = session.begin_transaction(timeout=self._timeout)
        give_up_after(tx, self._deadline)
        return tx

    @contextmanager
    def _transaction(self, *, read: bool = False) -> Iterator[Any]:
        """A transaction in the run's database, under the time limit (``read``: in a read-mode session);
        re-synced first when the database was created anew since this store last synced it (a dropped idle
        database comes back from the state)."""
        with self._hold() as generation:
            if generation != self._generation:
                self._sync()
                self._generation = generation
            with self._server._session(self.database, read=read) as session:
                tx = self._begin(session)
                try:
                    yield tx
                finally:
                    if not tx.closed():
                        tx.rollback()

    def _failure(self, exc: Exception, started: float) -> str:
        """The error a run is told: the driver's, or that the connection gave up at the deadline."""
        import neo4j.exceptions  # the Neo4j driver: loaded when a Bolt database opens

        if isinstance(exc, neo4j.exceptions.DriverError) and time.monotonic() - started >= self._deadline * 0.95:
            return cut_off_text(self._timeout)
        return _error_text(exc)

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
        with self._server._session(self.database) as session:
            tx = self._begin(session)
            try:
                if snapshot_digest(self._current(tx)) != snapshot_digest(self._snapshot):
                    self._replace(tx, self._snapshot)
                    self._snapshot = self._current(tx)
                tx.commit()
            finally:
                if not tx.closed():
                    tx.rollback()

    def _statements(self, code: str, *, read_only: bool = False) -> list[str]:
        return [prepare(s, self.dialect, self.scope_label, read_only=read_only) for s in split_statements(code)]

    # --- sync operations --------------------------------------------------------------------------------
    def clear_sync(self) -> None:
        with self._transaction() as tx:
            tx.run(f"MATCH (n{self._scope}) DETACH DELETE n").consume()
            tx.commit()
        self._snapshot = empty_snapshot()

    def restore_sync(self, snapshot: KGSnapshot) -> None:
        with self._transaction() as tx:
            self._replace(tx, snapshot)
            current = self._current(tx)
            tx.commit()
        self._snapshot = current

    def release(self) -> None:
        """The run is done with the server (a shared server's lease is given back)."""
        self._server.release_lease(self._run)

    def write_sync(self, code: str) -> WriteResult:
        import neo4j.exceptions  # the Neo4j driver: loaded when a Bolt database opens

        try:
            statements = self._statements(code)
        except CypherRejected as exc:
            return WriteResult(False, f"Rejected: {exc}")
        if not statements:
            return WriteResult(False, "the code holds no Cypher statement")
        started = time.monotonic()
        try:
            with self._transaction() as tx:
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
            return WriteResult(False, self._failure(exc, started))
        self._snapshot = snapshot
        return WriteResult(True)

    def read_sync(self, query: str) -> ReadResult:
        import neo4j.exceptions  # the Neo4j driver: loaded when a Bolt database opens

        try:
            statements = self._statements(query, read_only=True)
        except CypherRejected as exc:
            return ReadResult(False, None, f"Rejected: {exc}")
        if not statements:
            return ReadResult(False, None, "the query holds no Cypher statement")
        rows: list[dict[str, Any]] = []
        started = time.monotonic()
        try:
            with self._transaction(read=True) as tx:  # always rolled back: a read never changes the KG
                for statement in statements:
                    rows = [dict(record) for record in tx.run(statement)]
                ends = self._relationship_ends(tx, rows)
        except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, ValueError, TypeError) as exc:
            return ReadResult(False, None, self._failure(exc, started))
        return ReadResult(True, compact_result(rows, lambda v: self._convert(v, ends)))

    def _relationship_ends(self, tx: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Relationships come back with bare end nodes: look up the ``id`` property of their ends."""
        from neo4j.graph import Path, Relationship  # the Neo4j driver: loaded when a Bolt database opens

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
        # the Neo4j driver: loaded when a Bolt database opens
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
        with self._server.use(self.database), self._server._session(self.database, read=True) as session:
            tx = self._begin(session)
            try:
                return self._current(tx)
            finally:
                tx.rollback()
