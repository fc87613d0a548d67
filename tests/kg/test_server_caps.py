"""Resource bombs against the graph servers kgagents starts: one run's query does not take down or stall the server
that every run's KG lives on.

The query checks refuse the bombs they can see (``tests/kg/test_cypher_limits.py``); here the bombs reach the
servers -- with the checks switched off, or in a form the checks cannot see (a bound computed at run time) -- and
the servers' own caps and the connections' deadlines stop them: FalkorDB's query memory capacity and
``maxmemory``, the ArcadeDB JVM's heap, the deadline at which a connection gives up on a query the server does not
stop. No test here asserts a duration: each asserts what stopped the bomb (its error), that another run's reads
went on and the server is up, and has a generous pytest time limit.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kgagents.tools.kg.servers import ServerProcess, server_memory_mb, start_arcadedb_bolt, start_falkordb
from kgagents.tools.kg.stores import open_store
from kgagents.tools.sandbox import SandboxLimits
from tests.kg.conftest import Backend
from tests.kg.test_hostile_corpus import switch_checks_off

pytestmark = pytest.mark.slow

#: A loop inside one expression, which neither server's time limit stops (each checks it between rows or in
#: scans), over a bound the checks cannot see: 10^10 additions, hours of one server thread.
CPU_BOMB = ("RETURN reduce(s = 0, x IN range(1, toInteger('100000')) | "
            "s + reduce(t = 0, y IN range(1, 100000) | t + y)) AS n")
SECRET_READ = "MATCH (n:Victim) RETURN n.secret AS s"


def _store(kind: str, url: str, thread_id: str, tmp_path: Path) -> Any:
    return open_store(kind, snapshot=None, work_dir=tmp_path, thread_id=thread_id, limits=SandboxLimits(timeout_s=20),
                      allow_weak_sandbox=True, url=url)


def _peak_rss_mb(pid: int) -> float:
    """The most resident memory the process ever had (``VmHWM``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _read_while(store: Any, busy: threading.Thread) -> list[Any]:
    """Read the victim's secret again and again while ``busy`` runs; the results."""
    results = []
    while busy.is_alive():
        results.append(store.read_sync(SECRET_READ))
        busy.join(0.2)
    return results


@pytest.fixture
def arcadedb_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A fresh ArcadeDB server of its own, whose commands stop at 5 s (a bomb here leaves a busy thread behind,
    which stopping the server ends), selected for the neo4j backend with a database per run."""
    monkeypatch.setenv("KGAGENTS_KG_QUERY_TIMEOUT_S", "5")
    server = start_arcadedb_bolt()
    for name in ("KGAGENTS_BOLT_CONCURRENT", "KGAGENTS_BOLT_ISOLATION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NEO4J_URI", server.url)  # NEO4J_USER / NEO4J_PASSWORD go only to NEO4J_URI's server
    monkeypatch.setenv("NEO4J_USER", server.extra["user"])
    monkeypatch.setenv("NEO4J_PASSWORD", server.extra["password"])
    monkeypatch.setenv("NEO4J_DATABASE", server.extra["database"])
    monkeypatch.setenv("KGAGENTS_ARCADEDB_HTTP", f"http://127.0.0.1:{server.extra['http_port']}")
    try:
        yield server
    finally:
        from kgagents.tools.kg.cypher_store import close_drivers

        close_drivers()
        server.stop()


@pytest.fixture
def own_falkordb(monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerProcess]:
    """A fresh FalkorDB server of its own, whose queries stop at 5 s."""
    monkeypatch.setenv("KGAGENTS_KG_QUERY_TIMEOUT_S", "5")
    monkeypatch.delenv("FALKORDB_URL", raising=False)
    server = start_falkordb()
    try:
        yield server
    finally:
        server.stop()


def _victim_and_attacker(kind: str, url: str, tmp_path: Path) -> tuple[Any, Any, str]:
    suffix = uuid.uuid4().hex[:8]
    secret = f"SECRET-{suffix}"
    victim = _store(kind, url, f"victim-{suffix}", tmp_path)
    attacker = _store(kind, url, f"attacker-{suffix}", tmp_path)
    assert victim.write_sync(f"CREATE (:Victim {{id: 'victim', secret: '{secret}'}})").ok
    return victim, attacker, secret


# ------------------------------------------------------------------------------------------------------------
# FalkorDB
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.timeout(180)
def test_a_falkordb_memory_bomb_fails_alone_and_the_server_stays_up(falkordb_server, tmp_path, monkeypatch):
    """A list of 10^8 elements (1.6 GB) whose size the checks cannot see: FalkorDB's query memory capacity stops
    the query; the server and another run's KG are untouched. The literal form never reaches the server."""
    victim, attacker, secret = _victim_and_attacker("falkordb", falkordb_server.url, tmp_path)
    literal = attacker.read_sync("RETURN size(range(1, 3000000000)) AS n")
    assert not literal.ok and literal.error.startswith("Rejected") and "3,000,000,000 elements" in literal.error
    computed = attacker.read_sync("RETURN size(range(1, toInteger('100000000'))) AS n")
    assert not computed.ok and "mem consumption exceeded capacity" in computed.error, computed
    assert falkordb_server.alive()
    assert victim.read_sync(SECRET_READ).result == [{"s": secret}]
    assert attacker.read_sync("RETURN 1 AS one").result == [{"one": 1}]


@pytest.mark.timeout(180)
def test_falkordb_refuses_writes_beyond_its_memory_and_evicts_no_run_s_graph(tmp_path, monkeypatch):
    """A server of 64 MB filled by one client: its writes are refused once the server holds its memory, and the
    graph of another run, written before, is still there (no eviction)."""
    import falkordb

    monkeypatch.setenv("KGAGENTS_KG_SERVER_MEMORY_MB", "64")
    server = start_falkordb()
    try:
        victim, _, secret = _victim_and_attacker("falkordb", server.url, tmp_path)
        filler = falkordb.FalkorDB(host="127.0.0.1", port=server.port).select_graph("filler")
        refused = None
        for _ in range(100):  # 2 MB a write: 200 MB in all unless refused
            try:
                filler.query("UNWIND range(1, 2000) AS i CREATE (:Fill {i: i, s: '" + "x" * 1000 + "'})")
            except Exception as exc:  # noqa: BLE001 - the refusal is what the test looks for
                refused = str(exc)
                break
        assert refused is not None and "maxmemory" in refused, refused
        assert server.alive()
        assert victim.read_sync(SECRET_READ).result == [{"s": secret}]  # reads go on
    finally:
        server.stop()


@pytest.mark.timeout(240)
def test_a_falkordb_query_its_time_limit_does_not_stop_is_cut_off_and_others_go_on(own_falkordb, tmp_path):
    """Hours of one expression: the connection gives up at the deadline, the run is told so, and another run's
    reads go on meanwhile (the server thread stays busy until the server stops: the fixture's end)."""
    from kgagents.tools.kg.cypher_store import cut_off_text

    victim, attacker, secret = _victim_and_attacker("falkordb", own_falkordb.url, tmp_path)
    outcome: dict[str, Any] = {}
    bomb = threading.Thread(target=lambda: outcome.update(result=attacker.read_sync(CPU_BOMB)))
    bomb.start()
    reads = _read_while(victim, bomb)
    assert outcome["result"].error == cut_off_text(5.0)
    assert reads and all(r.result == [{"s": secret}] for r in reads)
    assert own_falkordb.alive() and victim.read_sync(SECRET_READ).result == [{"s": secret}]


# ------------------------------------------------------------------------------------------------------------
# ArcadeDB (Bolt)
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.timeout(240)
def test_an_arcadedb_doubling_reduce_is_stopped_by_the_heap_cap_and_other_runs_read_on(arcadedb_env, tmp_path,
                                                                                        monkeypatch):
    """``reduce(l = [1], x IN range(1, 40) | l + l)`` past the checks: the JVM's heap cap ends it (or the
    deadline ends the wait for it) while another run's reads keep answering; the server's memory never went much
    past its heap."""
    victim, attacker, secret = _victim_and_attacker("neo4j", arcadedb_env.url, tmp_path)
    switch_checks_off(monkeypatch)
    outcome: dict[str, Any] = {}
    bomb = threading.Thread(target=lambda: outcome.update(
        result=attacker.read_sync("RETURN size(reduce(l = [1], x IN range(1, 40) | l + l)) AS n")))
    bomb.start()
    reads = _read_while(victim, bomb)
    result = outcome["result"]
    assert not result.ok and any(word in result.error for word in ("cut off", "defunct", "OutOfMemory", "memory")), \
        result.error
    assert reads and all(r.result == [{"s": secret}] for r in reads)
    assert arcadedb_env.alive() and victim.read_sync(SECRET_READ).result == [{"s": secret}]
    assert _peak_rss_mb(arcadedb_env.proc.pid) < server_memory_mb() + 700


@pytest.mark.timeout(240)
def test_an_arcadedb_query_its_time_limit_does_not_stop_is_cut_off_and_others_go_on(arcadedb_env, tmp_path):
    from kgagents.tools.kg.cypher_store import cut_off_text

    victim, attacker, secret = _victim_and_attacker("neo4j", arcadedb_env.url, tmp_path)
    outcome: dict[str, Any] = {}
    bomb = threading.Thread(target=lambda: outcome.update(result=attacker.read_sync(CPU_BOMB)))
    bomb.start()
    reads = _read_while(victim, bomb)
    assert outcome["result"].error == cut_off_text(5.0)
    assert reads and all(r.result == [{"s": secret}] for r in reads)
    assert arcadedb_env.alive() and victim.read_sync(SECRET_READ).result == [{"s": secret}]


# ------------------------------------------------------------------------------------------------------------
# reads cannot write
# ------------------------------------------------------------------------------------------------------------
READS_THAT_WRITE = [
    "CALL { CREATE (:Planted {id: 'planted'}) } IN TRANSACTIONS RETURN 1 AS one",
    "MATCH (n) CALL { WITH n SET n.pwned = true } IN TRANSACTIONS RETURN 1 AS one",
    "MATCH (n) CALL { WITH n DETACH DELETE n } IN TRANSACTIONS RETURN 1 AS one",
    "CREATE (:Planted {id: 'planted'}) RETURN 1 AS one",
    "MATCH (n) SET n.pwned = true RETURN n.id AS id",
    "MATCH (n) DETACH DELETE n RETURN 1 AS one",
]


@pytest.mark.parametrize("query", READS_THAT_WRITE)
async def test_a_read_leaves_the_kg_unchanged(cypher_backend: Backend, tmp_path, query):
    """On ArcadeDB a read's ``CALL { ... } IN TRANSACTIONS`` committed its writes although the read's transaction
    was rolled back; now a read with a write clause is refused, and runs in a read-mode, rolled-back transaction."""
    store = cypher_backend.open(f"reader-{uuid.uuid4().hex[:8]}", None, tmp_path)
    assert (await store.write("CREATE (:Keep {id: 'keep', v: 1})-[:R]->(:Keep {id: 'other', v: 2})")).ok
    before = cypher_backend.db_snapshot(store)
    result = await store.read(query)
    assert not result.ok and result.error.startswith("Rejected"), result
    assert cypher_backend.db_snapshot(store) == before
    assert "planted" not in json.dumps(cypher_backend.db_snapshot(store))


async def test_a_bolt_read_asks_for_a_read_mode_session(cypher_backend: Backend, tmp_path, monkeypatch):
    """Below the check: a read's session asks the server for read access (Neo4j refuses writes there), a write's
    for write access."""
    if cypher_backend.backend != "neo4j":
        pytest.skip("Bolt only")
    import neo4j

    store = cypher_backend.open(f"mode-{uuid.uuid4().hex[:8]}", None, tmp_path)
    driver = store._server.driver  # type: ignore[attr-defined]
    modes: list[str] = []
    original = driver.session

    def session(*args: Any, **kwargs: Any) -> Any:
        modes.append(kwargs.get("default_access_mode", neo4j.WRITE_ACCESS))
        return original(*args, **kwargs)

    monkeypatch.setattr(driver, "session", session)
    assert (await store.read("MATCH (n) RETURN count(n) AS c")).ok
    assert modes and modes[-1] == neo4j.READ_ACCESS
    assert (await store.write("CREATE (:W {id: 'w'})")).ok
    assert modes[-1] == neo4j.WRITE_ACCESS


def test_without_the_deadline_the_bolt_store_still_works(arcadedb_server, tmp_path, monkeypatch):
    """Without the driver's private read timeout (a driver that changed it), queries still run; only the server's
    own limit stops them then."""
    from kgagents.tools.kg import cypher_store

    assert not cypher_store.give_up_after(object(), 1.0)  # no connection under it: nothing to set
    monkeypatch.setattr(cypher_store, "give_up_after", lambda tx, seconds: False)
    for name, value in (("NEO4J_URI", arcadedb_server.url), ("NEO4J_USER", arcadedb_server.extra["user"]),
                        ("NEO4J_PASSWORD", arcadedb_server.extra["password"]),
                        ("NEO4J_DATABASE", arcadedb_server.extra["database"]),
                        ("KGAGENTS_ARCADEDB_HTTP", f"http://127.0.0.1:{arcadedb_server.extra['http_port']}")):
        monkeypatch.setenv(name, value)
    store = _store("neo4j", arcadedb_server.url, f"nodeadline-{uuid.uuid4().hex[:8]}", tmp_path)
    assert store.write_sync("CREATE (:A {id: 'a'})").ok
    assert store.read_sync("MATCH (n:A) RETURN n.id AS id").result == [{"id": "a"}]
