"""Static KGs in a Cypher database: a Bolt server through the ``neo4j`` driver (Neo4j, ArcadeDB, ...) or FalkorDB.

For graphs that outgrow one machine's memory. :func:`import_to_cypher` (``kgagents graph import SOURCE --neo4j
[URI]`` / ``--falkordb [URL]``) builds the source into a temporary compact store with the usual loaders, streams
it into the database in batches of parameterised ``UNWIND $rows`` queries, and writes a local manifest to
``<graphs dir>/<name>/manifest.json``, so workflows name the graph like any other; :class:`CypherGraph` answers
the :class:`~kgagents.tools.pgraph.model.StaticKG` interface from the database with small parameterised queries.

Layout in the database (one *namespace* per import, ``KGStatic_<name>_<random hex>``):

- a node per graph node, labelled with the namespace, with ``_i`` (its position: the row of the embedding
  indexes), ``id``, ``name``, ``type`` (absent when the node has none), ``features`` (a JSON object as a string:
  values keep their JSON type, and FalkorDB and ArcadeDB store only scalars and arrays), and its relations in
  each direction in order of first appearance with their edge counts (``_out`` / ``_in``, JSON strings, absent
  when empty); indexes on ``_i``, ``id`` and ``name``;
- a relationship of the one type ``KGStaticEdge`` per edge (parallel edges are kept), with ``relation``,
  ``qualifiers`` (a JSON string, absent when empty), ``_s`` (its position among the head's outgoing edges in
  source order) and ``_t`` (its position among the tail's incoming edges): the relation is a property, so any
  relation name works, whatever characters it has;
- a catalog node ``KGStaticGraph {namespace, name, fingerprint, state}`` per import.

On FalkorDB each namespace is also a graph of its own (a Redis key) and the catalog is the graph
``KGStatic__catalog``; on a Bolt server every namespace and the catalog share the database. Importing a name
again loads a new namespace, swaps the manifest and then drops the name's other namespaces, so a failed or
killed import leaves the previous graph in place (and the next import of the name removes what it left).

Credentials come from the environment as for KGoT's backends (``NEO4J_USER``, ``NEO4J_PASSWORD``,
``FALKORDB_URL`` with its user and password), go only to the server their URL names (a manifest naming
another server connects without them) and are never written to the manifest; without a URL the
process's embedded server is used (ArcadeDB over Bolt, falkordblite), which keeps the graph only while the
process that started it runs. The embedding indexes of a database-backed graph live in its local directory.

Every read runs under the server's time limit (``KGAGENTS_KG_QUERY_TIMEOUT_S``) on a connection that gives up at
:func:`~kgagents.tools.kg.servers.client_deadline_s`, like KGoT's backends; a read whose node has ended sends no
further query (:mod:`kgagents.tools.pgraph.reads`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from tqdm import tqdm

from kgagents.core.keys import same_server
from kgagents.tools.kg.base import KGError
from kgagents.tools.kg.cypher import quote_name
from kgagents.tools.kg.cypher_store import BoltConfig, bolt_config, driver_for, give_up_after
from kgagents.tools.kg.falkordb_store import client_for, forget_client
from kgagents.tools.kg.servers import (
    client_deadline_s,
    embedded,
    embedded_server_at,
    query_slot,
    query_timeout_s,
    why_ended,
)
from kgagents.tools.pgraph.catalog import build, check_name, default_name, private_graphs_dir, ref_of, swap_in
from kgagents.tools.pgraph.compact import CompactGraph
from kgagents.tools.pgraph.limits import ImportLimits
from kgagents.tools.pgraph.model import GraphFormatError, GraphRef, GraphStats, Node, StaticKG, Triple
from kgagents.tools.pgraph.reads import check_read
from kgagents.tools.pgraph.vectors import BATCH as EMBED_BATCH
from kgagents.tools.pgraph.vectors import IndexSet, file_lock

BACKENDS = ("neo4j", "falkordb")
#: Version of the layout in the database; a graph of another version must be imported again.
LAYOUT_VERSION = 1
EDGE_TYPE = "KGStaticEdge"
CATALOG_LABEL = "KGStaticGraph"
#: FalkorDB: the graph that holds the catalog (on a Bolt server the catalog shares the database).
CATALOG_GRAPH = "KGStatic__catalog"
NAMESPACE_PREFIX = "KGStatic_"
_NAMESPACE = re.compile(r"KGStatic_[A-Za-z0-9_]{1,160}")
#: Nodes per page when a whole-graph read walks the nodes (``iter_nodes``, ``iter_triples``).
PAGE = 2000
#: How many node ids, nodes and feature sets an open graph keeps in memory (feature sets: two batches of texts
#: to embed, which ``node_texts`` puts there and reads back).
CACHE_NODES = 100_000
CACHE_FEATURES = 2 * EMBED_BATCH
#: Imports of at least this many rows (nodes + edges) show a progress bar unless told otherwise.
PROGRESS_FROM_ROWS = 100_000


class GraphDatabaseError(GraphFormatError):
    """The database of a database-backed graph cannot be reached or used; the message names it."""


# ----------------------------------------------------------------------------------------------------------
# Connections
# ----------------------------------------------------------------------------------------------------------
def redact(url: str) -> str:
    """``url`` without its user and password (what a manifest and a message may show)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _short(exc: BaseException) -> str:
    text = " ".join((getattr(exc, "message", None) or str(exc)).split())
    return f"{type(exc).__name__}: {text[:400]}"


class Database:
    """One server: runs parameterised queries on a namespace, creates its indexes and drops it.

    Every query is written once in the Cypher subset that Neo4j, ArcadeDB and FalkorDB all accept; the two
    dialects differ only in where a namespace lives (see the module docstring) and how indexes are made.
    """

    backend: str
    describes: str
    """The server for messages and ``stats()``: the redacted URL, or the embedded server's."""
    _errors: tuple[type[BaseException], ...] = ()

    def run(self, graph: str, query: str, params: Mapping[str, Any] | None = None, *,
            write: bool = False) -> list[list[Any]]:
        """The rows of ``query`` on ``graph`` (a namespace, or :data:`CATALOG_GRAPH`); none once the node that
        asked for this read has ended (:func:`~kgagents.tools.pgraph.reads.check_read`)."""
        check_read()
        with self._guard():
            return self._run(graph, query, dict(params or {}), write)

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Driver errors become a :class:`GraphDatabaseError` that names the database."""
        try:
            yield
        except self._errors as exc:
            self._forget()
            raise GraphDatabaseError(f"cannot use the {self.backend} database at {self.describes}: "
                                     f"{_short(exc)}") from exc

    def create_indexes(self, namespace: str) -> None:
        raise NotImplementedError

    def drop(self, namespace: str) -> None:
        """Delete every node and edge of a namespace and its indexes."""
        raise NotImplementedError

    def _run(self, graph: str, query: str, params: dict[str, Any], write: bool) -> list[list[Any]]:
        raise NotImplementedError

    def _forget(self) -> None:
        """Drop a cached connection after an error (the next query makes a new one)."""


class BoltDatabase(Database):
    """A Bolt server through the ``neo4j`` driver (one pooled driver per server and user for the process)."""

    backend = "neo4j"

    def __init__(self, config: Any, describes: str) -> None:
        import neo4j.exceptions  # the Neo4j driver: loaded when a Bolt database opens

        self.config = config
        self.describes = describes
        self._errors = (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, OSError)
        self._driver = driver_for(config)

    def _run(self, graph: str, query: str, params: dict[str, Any], write: bool) -> list[list[Any]]:
        """One query; a read runs under the server's time limit (:func:`query_timeout_s`) on a connection that gives
        up at :func:`client_deadline_s` (an import's writes are not limited: they take as long as the graph)."""
        database = {"database": self.config.database} if self.config.database else {}
        with self._driver.session(**database) as session:
            if write:
                return [record.values() for record in session.run(query, params)]
            tx = session.begin_transaction(timeout=query_timeout_s())
            try:
                give_up_after(tx, client_deadline_s())
                rows = [record.values() for record in tx.run(query, params)]
                tx.commit()
                return rows
            finally:
                if not tx.closed():
                    tx.rollback()

    def create_indexes(self, namespace: str) -> None:
        for key in ("_i", "id", "name"):
            self.run(namespace, f"CREATE INDEX {namespace}_{key.strip('_')} IF NOT EXISTS "
                                f"FOR (n:{quote_name(namespace)}) ON (n.{key})", write=True)

    def drop(self, namespace: str) -> None:
        query = f"MATCH (n:{quote_name(namespace)}) WITH n LIMIT $batch DETACH DELETE n RETURN count(*)"
        while self.run(namespace, query, {"batch": 10_000}, write=True)[0][0]:
            pass
        for key in ("i", "id", "name"):
            self.run(namespace, f"DROP INDEX {namespace}_{key} IF EXISTS", write=True)


class FalkorDatabase(Database):
    """A FalkorDB server (one client per URL for the process); a namespace is a graph of its own."""

    backend = "falkordb"

    def __init__(self, url: str, describes: str) -> None:
        import redis.exceptions  # falkordb's client (the falkordb extra)

        self.url = url
        self.describes = describes
        self._errors = (redis.exceptions.RedisError, OSError, KGError)
        #: the process's embedded server, when ``url`` is its socket: its graphs end with it
        self._server = embedded_server_at(url)
        with self._guard():
            self._client = client_for(url)

    def _run(self, graph: str, query: str, params: dict[str, Any], write: bool) -> list[list[Any]]:
        """The rows of one query, holding a query slot of the embedded server while it is there. A namespace that
        is gone is an error (never no rows): it was imported again or dropped, or its embedded server ended."""
        self._check_server()
        selected = self._client.select_graph(graph)
        try:
            with query_slot(self._server):
                if write:
                    return selected.query(query, params).result_set
                # a read stops at the server's time limit; the client gives up at its deadline (client_for)
                return selected.ro_query(query, params, timeout=int(query_timeout_s() * 1000)).result_set
        except self._errors as exc:
            self._check_server(wait=2.0)
            if not write and _never_written(exc):
                if graph == CATALOG_GRAPH:  # no graph was ever imported here
                    return []
                raise GraphDatabaseError(namespace_gone_text(graph, self.describes)) from exc
            raise

    def _check_server(self, wait: float = 0.0) -> None:
        """A :class:`GraphDatabaseError` when the embedded server this connection uses has ended since (its graphs
        ended with it)."""
        if self._server is not None and why_ended(self._server, wait=wait) is not None:
            raise GraphDatabaseError(restarted_text(self.describes))

    def _forget(self) -> None:
        forget_client(self.url)

    def create_indexes(self, namespace: str) -> None:
        for key in ("_i", "id", "name"):
            self.run(namespace, f"CREATE INDEX FOR (n:{quote_name(namespace)}) ON (n.{key})", write=True)

    def drop(self, namespace: str) -> None:
        with self._guard():
            try:
                self._client.select_graph(namespace).delete()
            except self._errors as exc:
                if not _never_written(exc):
                    raise


def namespace_gone_text(namespace: str, describes: str) -> str:
    """What a lookup is told whose graph's namespace is no longer in the database."""
    return (f"this graph's data (namespace {namespace}) is no longer in the falkordb database at {describes}: the "
            "graph was imported again or removed since it was opened; open it again (a new run), or import it again")


def restarted_text(describes: str) -> str:
    """What a lookup is told whose graph was in an embedded FalkorDB server that has ended since."""
    return (f"the embedded falkordb server that held this graph ({describes}) was restarted (a query ran past the "
            "time limit, or the server stopped), and the graphs imported into it ended with it: import the graph "
            "again (`kgagents graph import SOURCE --falkordb`), or give a FALKORDB_URL for a lasting graph")


def _never_written(exc: BaseException) -> bool:
    """FalkorDB's answer about a graph (Redis key) that does not exist."""
    return "empty key" in str(exc) or "Invalid graph" in str(exc)


@dataclass(frozen=True)
class Location:
    """Where a database-backed graph lives, as its manifest records it (never with credentials)."""

    backend: str
    url: str | None
    """The server's URL without user and password; ``None`` for the process's embedded server."""
    database: str | None = None
    """Bolt: the database sessions name (``NEO4J_DATABASE`` at import time; the server's default when none)."""

    @classmethod
    def of_import(cls, backend: str, url: str | None) -> tuple[Location, str | None]:
        """Where an import goes: ``url``, else ``NEO4J_URI`` / ``FALKORDB_URL``, else the embedded server;
        with the URL as given (credentials included) for the import's own connection."""
        if backend not in BACKENDS:
            raise GraphFormatError(f"unknown graph database {backend!r}; use one of {', '.join(BACKENDS)}")
        variable = "NEO4J_URI" if backend == "neo4j" else "FALKORDB_URL"
        given = (url or "").strip() or os.environ.get(variable, "").strip() or None
        database = (os.environ.get("NEO4J_DATABASE") or None) if backend == "neo4j" and given else None
        return cls(backend, None if given is None else redact(given), database), given

    @classmethod
    def of_manifest(cls, manifest: Mapping[str, Any]) -> Location:
        place = manifest.get("database") or {}
        return cls(str(manifest.get("backend")), place.get("url"), place.get("database"))

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "embedded": self.url is None, "database": self.database}

    def open(self, url: str | None = None) -> Database:
        """A connection to this place. ``url``: the same server's URL with credentials, when the caller has
        it; otherwise credentials come from the environment, only when its URL names this server (``NEO4J_USER``
        / ``NEO4J_PASSWORD`` when ``NEO4J_URI`` does, the user and password of ``FALKORDB_URL``): a manifest that
        names another server gets none (:mod:`kgagents.core.keys`)."""
        try:
            if self.backend == "neo4j":
                if self.url is None:
                    server = embedded("arcadedb")
                    config = BoltConfig(server.url, server.extra["user"], server.extra["password"],
                                        server.extra["database"])
                    return BoltDatabase(config, f"{server.url} (embedded)")
                return BoltDatabase(replace(bolt_config(redact(url or self.url)), database=self.database), self.url)
            if self.url is None:
                socket_url = embedded("falkordb").url
                return FalkorDatabase(socket_url, f"{socket_url} (embedded)")
            from_env = os.environ.get("FALKORDB_URL", "").strip()
            # FALKORDB_URL's user and password go only to its own server (scheme, host and port)
            return FalkorDatabase(url or (from_env if same_server(from_env, self.url) else self.url), self.url)
        except KGError as exc:
            raise GraphDatabaseError(f"cannot start or reach the {self.backend} database: {exc}") from exc


# ----------------------------------------------------------------------------------------------------------
# Import
# ----------------------------------------------------------------------------------------------------------
def import_to_cypher(source: str | Path, *, backend: str, url: str | None = None, name: str | None = None,
                     format: str | None = None, record: str | None = None, merge: bool = False,
                     batch_size: int = 5000, progress: bool | None = None,
                     limits: ImportLimits | None = None) -> GraphRef:
    """``kgagents graph import SOURCE --neo4j/--falkordb``: load ``source`` into the database in batches of
    ``batch_size`` rows and write its manifest to ``<graphs dir>/<name>/`` (replacing a graph of that name)."""
    if int(batch_size) < 1:
        raise GraphFormatError(f"the batch size must be at least 1, not {batch_size}")
    path = Path(source)
    name = name or default_name(path, record)
    check_name(name)
    where, given = Location.of_import(backend, url)
    db = where.open(given)
    db.run(CATALOG_GRAPH, "RETURN 1")  # a database that is down fails here, before the build
    if where.url is None:
        print(f"kgagents: {name} goes into the embedded {backend} server, which keeps it only while this process "
              "runs; give a URL for a lasting graph", file=sys.stderr)
    target = private_graphs_dir() / name
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with file_lock(target.with_name(f".{target.name}.lock")), \
            tempfile.TemporaryDirectory(prefix=f".{name}.import-", dir=target.parent) as tmp:
        build(path, Path(tmp) / "compact", format=format, record=record, merge=merge, name=name, progress=progress,
              limits=limits)
        compact = CompactGraph(Path(tmp) / "compact")
        try:
            manifest = _load(compact, db, where, int(batch_size), progress)
        finally:
            compact.close()
        manifest["import_seconds"] = round(time.monotonic() - started, 3)
        staged = Path(tmp) / "graph"
        staged.mkdir()
        (staged / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False), encoding="utf-8")
        swap_in(staged, target)
        for row in db.run(CATALOG_GRAPH, f"MATCH (g:{CATALOG_LABEL} {{name: $name}}) WHERE g.namespace <> $keep "
                                         "RETURN g.namespace", {"name": name, "keep": manifest["namespace"]}):
            _drop_namespace(db, str(row[0]))
    return ref_of(target, manifest)


def _drop_namespace(db: Database, namespace: str) -> None:
    db.drop(namespace)
    db.run(CATALOG_GRAPH, f"MATCH (g:{CATALOG_LABEL} {{namespace: $ns}}) DELETE g", {"ns": namespace}, write=True)


def _load(compact: Any, db: Database, where: Location, batch_size: int, progress: bool | None) -> dict[str, Any]:
    """Stream a compact build into a new namespace; returns the manifest of the database-backed graph."""
    manifest = compact.manifest
    name = str(manifest["name"])
    namespace = NAMESPACE_PREFIX + re.sub(r"[^A-Za-z0-9]+", "_", name)[:60] + "_" + secrets.token_hex(4)
    label = quote_name(namespace)
    db.run(CATALOG_GRAPH, f"CREATE (:{CATALOG_LABEL} {{namespace: $ns, name: $name, fingerprint: $fp, "
                          "state: 'loading'})", {"ns": namespace, "name": name, "fp": manifest["fingerprint"]},
           write=True)
    n, e = compact.node_count, len(compact)
    bar = None
    if progress or (progress is None and n + e >= PROGRESS_FROM_ROWS):
        bar = tqdm(total=n + e, desc=f"loading {name} into {db.backend}", unit="row", file=sys.stderr)
    try:
        db.create_indexes(namespace)
        nodes = (f"UNWIND $rows AS row CREATE (:{label} {{_i: row.i, id: row.id, name: row.name, type: row.type, "
                 "features: row.features, _out: row.out, _in: row.inc})")
        edges = (f"UNWIND $rows AS row MATCH (a:{label} {{_i: row.h}}) MATCH (b:{label} {{_i: row.t}}) "
                 f"CREATE (a)-[:{EDGE_TYPE} {{relation: row.r, qualifiers: row.q, _s: row.s, _t: row.u}}]->(b)")
        for query, rows in ((nodes, _node_rows(compact)), (edges, _edge_rows(compact))):
            for batch in _batches(rows, batch_size):
                db.run(namespace, query, {"rows": batch}, write=True)
                if bar is not None:
                    bar.update(len(batch))
        db.run(CATALOG_GRAPH, f"MATCH (g:{CATALOG_LABEL} {{namespace: $ns}}) SET g.state = 'ready'",
               {"ns": namespace}, write=True)
    except BaseException:
        try:
            _drop_namespace(db, namespace)
        except GraphDatabaseError:
            pass  # the database went away: the next import of the name removes what is left
        raise
    finally:
        if bar is not None:
            bar.close()
    kept = ("name", "fingerprint", "source", "counts", "types", "relations", "feature_keys", "qualifier_keys",
            "type_features", "schema")
    return {"format_version": LAYOUT_VERSION, "backend": where.backend, **{k: manifest[k] for k in kept},
            "database": where.as_dict(), "namespace": namespace, "type_counts": compact.type_counts(),
            "relation_counts": compact.relation_counts(), "batch_size": batch_size,
            "imported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _batches(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _json_or_none(value: Any) -> str | None:
    return json.dumps(value, ensure_ascii=False) if value else None


def _node_rows(compact: Any) -> Iterator[dict[str, Any]]:
    for index in range(compact.node_count):
        node = compact._node_of(index)
        yield {"i": index, "id": node.id, "name": node.name, "type": node.type or None,
               "features": _json_or_none(compact._features_of(index)),
               "out": _json_or_none(compact._runs(index, "out")), "inc": _json_or_none(compact._runs(index, "in"))}


def _edge_rows(compact: Any) -> Iterator[dict[str, Any]]:
    """Every edge in the compact store's outgoing order (``_s``), with its place in the incoming order (``_t``)
    and its qualifiers. Reads the store's arrays (the layout of :mod:`kgagents.tools.pgraph.build`) directly."""
    a = compact._a
    incoming = np.empty(len(a["in_pos"]), dtype=np.int64)
    incoming[a["in_pos"]] = np.arange(len(a["in_pos"]), dtype=np.int64)
    relations = compact.manifest["relations"]
    for index in range(compact.node_count):
        first, last = compact._run_range(index, "out")
        for run in range(first, last):
            start, end = compact._run_span(run, "out")
            relation = relations[int(a["out_run_rel"][run])]
            for position in range(start, end):
                yield {"h": index, "t": int(a["out_dst"][position]), "r": relation,
                       "q": _json_or_none(compact._qualifiers(position)), "s": position,
                       "u": int(incoming[position])}


# ----------------------------------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------------------------------
class _LRU:
    """A small thread-safe least-recently-used map."""

    def __init__(self, size: int) -> None:
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            if key not in self._data:
                return default
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


@dataclass(frozen=True, slots=True)
class _Record:
    """What an open graph keeps of a node: the node and its relations per direction (with edge counts)."""

    node: Node
    out: tuple[tuple[str, int], ...]
    inc: tuple[tuple[str, int], ...]


_UNKNOWN = object()
#: The columns of a node bound to ``n``, in the order :meth:`CypherGraph._remember` reads them.
_NODE = "n._i, n.id, n.name, n.type, n._out, n._in"


def _runs_of(text: str | None) -> tuple[tuple[str, int], ...]:
    return tuple((str(r), int(c)) for r, c in json.loads(text)) if text else ()


class CypherGraph(StaticKG):
    """A static KG in a Cypher database, read through its local manifest (see the module docstring).

    Node handles are the nodes' ``_i``. Lookups by id, nodes with their relations, and recent feature sets
    are cached in memory (the graph is read-only); everything else is one small query per call.
    """

    def __init__(self, directory: str | Path, manifest: Mapping[str, Any], db: Database, *,
                 ref: GraphRef | None = None) -> None:
        self.directory = Path(directory)
        self.manifest = dict(manifest)
        self.db = db
        self.name = str(manifest.get("name") or self.directory.name)
        self.fingerprint = str(manifest["fingerprint"])
        self.ref = ref or GraphRef(name=self.name, location=str(self.directory), fingerprint=self.fingerprint)
        self.namespace = str(manifest["namespace"])
        self._label = quote_name(self.namespace)
        self._relations: list[str] = list(manifest["relations"])
        self._relation_ids = {r: i for i, r in enumerate(self._relations)}
        self._ids = _LRU(CACHE_NODES)
        self._records = _LRU(CACHE_NODES)
        self._features = _LRU(CACHE_FEATURES)
        self._subsets = _LRU(8)
        self.indexes = IndexSet(self.directory / "index", self)

    @classmethod
    def from_manifest(cls, location: str | Path, manifest: Mapping[str, Any], *,
                      ref: GraphRef | None = None) -> CypherGraph:
        """Open the graph a manifest describes, after checking that the database still holds it."""
        location = Path(location)
        backend = manifest.get("backend")
        if manifest.get("format_version") != LAYOUT_VERSION or backend not in BACKENDS:
            raise GraphFormatError(f"{location} holds a database-backed graph of another layout "
                                   f"(version {manifest.get('format_version')}, {backend}); import it again")
        namespace = str(manifest.get("namespace") or "")
        if not _NAMESPACE.fullmatch(namespace):
            raise GraphFormatError(f"{location}/manifest.json names no valid namespace ({namespace!r})")
        db = Location.of_manifest(manifest).open()
        rows = db.run(CATALOG_GRAPH, f"MATCH (g:{CATALOG_LABEL} {{namespace: $ns}}) RETURN g.state, g.fingerprint",
                      {"ns": namespace})
        if not rows or rows[0][0] != "ready" or rows[0][1] != manifest.get("fingerprint"):
            state = "is being loaded" if rows and rows[0][0] == "loading" else "is no longer there"
            raise GraphDatabaseError(f"the graph {manifest.get('name')!r} {state} in the {backend} database at "
                                     f"{db.describes} (namespace {namespace}): import it again")
        return cls(location, manifest, db, ref=ref)

    def __repr__(self) -> str:
        c = self.manifest["counts"]
        return (f"CypherGraph({self.name!r}: {c['nodes']} nodes, {c['edges']} edges, {self.db.backend} at "
                f"{self.db.describes}, namespace {self.namespace})")

    # The manifest holds the compact build's counts, schema and type features as they were, and relations are
    # numbered by the same vocabulary (``_relations``, ``_relation_ids``) with an ``IndexSet`` (``indexes``)
    # alike: read and search them as the compact store does.
    __len__ = CompactGraph.__len__
    schema = CompactGraph.schema
    type_features = CompactGraph.type_features
    relation_texts = CompactGraph.relation_texts
    nearest_relations = CompactGraph.nearest_relations

    @property
    def node_count(self) -> int:
        return int(self.manifest["counts"]["nodes"])

    def _query(self, query: str, **params: Any) -> list[list[Any]]:
        return self.db.run(self.namespace, query.replace("$LABEL", self._label), params)

    # --- nodes -------------------------------------------------------------------------------------------------
    def _remember(self, row: Sequence[Any]) -> int:
        """Cache a node from the columns of :data:`_NODE`; returns its handle."""
        index = int(row[0])
        self._records.put(index, _Record(Node(str(row[1]), row[3] or "", str(row[2])), _runs_of(row[4]),
                                         _runs_of(row[5])))
        self._ids.put(str(row[1]), index)
        return index

    def _handle(self, node_id: str) -> int | None:
        found = self._ids.get(node_id, _UNKNOWN)
        if found is _UNKNOWN:
            rows = self._query(f"MATCH (n:$LABEL {{id: $id}}) RETURN {_NODE}", id=node_id)
            found = self._remember(rows[0]) if rows else None
            if found is None:
                self._ids.put(node_id, None)
        return found

    def _handles_named(self, name: str) -> list[int]:
        rows = self._query(f"MATCH (n:$LABEL {{name: $name}}) RETURN {_NODE} ORDER BY n._i", name=name)
        return [self._remember(row) for row in rows]

    def _record(self, handle: Any) -> _Record:
        index = int(handle)
        found = self._records.get(index)
        if found is None:
            rows = self._query(f"MATCH (n:$LABEL {{_i: $i}}) RETURN {_NODE}", i=index)
            if not rows:
                raise KeyError(f"{self.name}: no node at position {index}")
            self._remember(rows[0])
            found = self._records.get(index)
        return found

    def _node_of(self, handle: Any) -> Node:
        return self._record(handle).node

    def _features_of(self, handle: Any) -> dict[str, Any]:
        index = int(handle)
        text = self._features.get(index, _UNKNOWN)
        if text is _UNKNOWN:
            rows = self._query("MATCH (n:$LABEL {_i: $i}) RETURN n.features", i=index)
            text = rows[0][0] if rows else None
            self._features.put(index, text)
        return json.loads(text) if text else {}

    # --- adjacency ------------------------------------------------------------------------------------------
    def _runs(self, handle: Any, direction: Literal["out", "in"]) -> list[tuple[str, int]]:
        record = self._record(handle)
        return list(record.out if direction == "out" else record.inc)

    _EDGES: ClassVar[dict[str, str]] = {
        "out": f"MATCH (a:$LABEL {{_i: $i}})-[r:{EDGE_TYPE}]->(n) WHERE r.relation = $relation "
               f"RETURN {_NODE}, r.qualifiers ORDER BY r._s LIMIT $limit",
        "in": f"MATCH (a:$LABEL {{_i: $i}})<-[r:{EDGE_TYPE}]-(n) WHERE r.relation = $relation "
              f"RETURN {_NODE}, r.qualifiers ORDER BY r._t LIMIT $limit",
    }

    def _run_edges(self, handle: Any, relation: str, direction: Literal["out", "in"], *,
                   limit: int | None = None) -> list[tuple[int, Mapping[str, Any]]]:
        count = dict(self._runs(handle, direction)).get(relation, 0)
        wanted = count if limit is None else min(count, max(0, limit))
        if not wanted:
            return []
        rows = self._query(self._EDGES[direction], i=int(handle), relation=relation, limit=wanted)
        return [(self._remember(row), json.loads(row[6]) if row[6] else {}) for row in rows]

    # --- whole graph ----------------------------------------------------------------------------------------
    def stats(self) -> GraphStats:
        m = self.manifest
        c = m["counts"]
        return GraphStats(nodes=c["nodes"], edges=c["edges"], heads=c["heads"], relations=list(self._relations),
                          types=list(m["types"]), feature_keys=list(m["feature_keys"]),
                          qualifier_keys=list(m["qualifier_keys"]),
                          extra={"backend": self.db.backend, "location": str(self.directory),
                                 "database": self.db.describes, "namespace": self.namespace})

    def type_counts(self) -> dict[str, int]:
        return dict(self.manifest.get("type_counts", {}))

    def relation_counts(self) -> dict[str, int]:
        return dict(self.manifest.get("relation_counts", {}))

    def _pages(self, query: str, **params: Any) -> Iterator[list[Any]]:
        """The rows of ``query`` for the nodes ``$lo <= _i < $hi``, page by page over the whole graph."""
        for lo in range(0, self.node_count, PAGE):
            yield from self._query(query, lo=lo, hi=min(self.node_count, lo + PAGE), **params)

    def iter_nodes(self) -> Iterator[Node]:
        for row in self._pages("MATCH (n:$LABEL) WHERE n._i >= $lo AND n._i < $hi "
                               "RETURN n.id, n.type, n.name ORDER BY n._i"):
            yield Node(str(row[0]), row[1] or "", str(row[2]))

    def iter_triples(self) -> Iterator[Triple]:
        for row in self._pages(f"MATCH (a:$LABEL)-[r:{EDGE_TYPE}]->(b) WHERE a._i >= $lo AND a._i < $hi "
                               "RETURN a.id, r.relation, b.id, r.qualifiers ORDER BY r._s"):
            yield Triple(str(row[0]), str(row[1]), str(row[2]), json.loads(row[3]) if row[3] else {})

    def close(self) -> None:
        for cache in (self._ids, self._records, self._features, self._subsets):
            cache.clear()

    # --- embedding indexes -----------------------------------------------------------------------------------
    def node_texts(self, start: int, end: int, field: str, *, max_chars: int | None = 1000) -> list[str]:
        """The texts of nodes ``start..end`` (by ``_i``) for an embedding field (``name`` or ``text``)."""
        if field not in ("name", "text"):
            raise ValueError(f"unknown embedding field {field!r}: use 'name' or 'text'")
        features = ", n.features" if field == "text" else ""  # documents only where the texts need them
        rows = self._query(f"MATCH (n:$LABEL) WHERE n._i >= $lo AND n._i < $hi RETURN {_NODE}{features} "
                           "ORDER BY n._i", lo=start, hi=end)
        if len(rows) != end - start:
            raise GraphDatabaseError(f"the graph {self.name!r} in {self.db.describes} lacks nodes between "
                                     f"{start} and {end}: import it again")
        handles = [self._remember(row) for row in rows]
        if field == "name":
            return [str(row[2]) for row in rows]
        for handle, row in zip(handles, rows, strict=True):
            self._features.put(handle, row[6])  # the cache holds a batch: _text_of reads it back
        return [self._text_of(handle, max_chars) for handle in handles]

    def _subset(self, among: list[str] | None, types: list[str] | None, heads_only: bool) -> np.ndarray:
        """The sorted ``_i`` of the nodes in ``among`` (all when ``None``) of ``types`` (with outgoing edges)."""
        key = (None if types is None else tuple(types), heads_only)
        found = self._subsets.get(key) if among is None else None  # restrictions to a type recur; lists of ids vary
        if found is not None:
            return found
        conditions = [c for c, used in (("n.id IN $ids", among is not None), ("n.type IN $types", types is not None),
                                        ("n._out IS NOT NULL", heads_only)) if used]
        rows = self._query(f"MATCH (n:$LABEL) WHERE {' AND '.join(conditions)} RETURN n._i", ids=among or [],
                           types=types or [])
        subset = np.asarray(sorted(int(r[0]) for r in rows), dtype=np.int64)
        if among is None:
            self._subsets.put(key, subset)
        return subset

    def nearest_nodes(self, text: str, k: int = 5, *, field: str = "name", among: Iterable[str] | None = None,
                      types: Iterable[str] | None = None, heads_only: bool = False,
                      embedder: Any = None, kind: str | None = None,
                      vector: Any = None) -> list[tuple[str, float]]:
        if field not in ("name", "text"):
            raise ValueError(f"unknown embedding field {field!r}: use 'name' or 'text'")
        wanted = None if among is None else sorted({str(i) for i in among})
        kinds = None if types is None else sorted(set(types))
        ids = mask = None
        if wanted is not None and not wanted:
            ids = np.zeros(0, dtype=np.int64)
        elif wanted is not None or kinds is not None or heads_only:
            subset = self._subset(wanted, kinds, heads_only)
            if wanted is None:  # a mask lets a large subset use the FAISS index
                mask = np.zeros(self.node_count, dtype=bool)
                mask[subset] = True
            else:
                ids = subset
        index = self.indexes.get(field, embedder, kind=kind)
        found = index.search(text, k, ids=ids, mask=mask, vector=vector, embedder=embedder)
        return [(self._node_of(int(i)).id, score) for i, score in found]
