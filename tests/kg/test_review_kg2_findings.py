"""Findings of the second review of the embedded FalkorDB restart (issue 34, branch review-kg2).

The restart (``kgagents.tools.kg.servers.end_embedded``, the watchdog, each store following the new server in
``FalkorDBStore._follow``) was attacked for: a run losing its KG across a restart, a healthy server restarted under
load, restarts without bound, and static graphs after a restart. Each test fails on the code as reviewed (98ec93c)
and says what a user would expect instead. No test asserts a duration.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from kgagents.tools.kg import servers
from kgagents.tools.kg.servers import ENDED_GAVE_UP, ServerProcess, embedded, end_embedded, falkordb_limits
from kgagents.tools.kg.stores import open_store
from kgagents.tools.sandbox import SandboxLimits

pytestmark = pytest.mark.slow

SECRET_READ = "MATCH (n:Victim) RETURN n.secret AS s"
#: A write that commits a node and then loops inside one expression (hours): the server cannot stop it, the
#: connection gives up at its deadline and the embedded server is killed (the reviewed fix).
WRITE_THEN_LOOP = ("CREATE (a:Mine {id: 'mine'}) WITH a RETURN reduce(s = 0, x IN range(1, toInteger('100000')) | "
                   "s + reduce(t = 0, y IN range(1, 100000) | t + y)) AS n")
#: A legitimate but heavy read: a cartesian product of 1000 nodes three times (10^9 rows), which the server's own
#: time limit stops (checked between records), answering "Query timed out": no bomb, nothing the checks refuse.
HEAVY_READ = "MATCH (a:P), (b:P), (c:P) WHERE a.v + b.v + c.v < 0 RETURN count(*) AS n"


def _store(thread_id: str, tmp_path: Path) -> Any:
    """A run's KG on the process's embedded FalkorDB server (no URL)."""
    return open_store("falkordb", snapshot=None, work_dir=tmp_path, thread_id=thread_id,
                      limits=SandboxLimits(timeout_s=20), allow_weak_sandbox=True)


def _embedded_with_limit(monkeypatch: pytest.MonkeyPatch, seconds: str) -> Iterator[ServerProcess]:
    monkeypatch.setenv("KGAGENTS_KG_QUERY_TIMEOUT_S", seconds)
    monkeypatch.delenv("FALKORDB_URL", raising=False)
    servers.stop_embedded("falkordb")
    try:
        yield embedded("falkordb")
    finally:
        servers.stop_embedded("falkordb")


@pytest.fixture
def falkordb_2s(monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerProcess]:
    """The process's embedded FalkorDB server, started anew, whose queries stop at 2 s (deadline 4 s)."""
    yield from _embedded_with_limit(monkeypatch, "2")


@pytest.fixture
def falkordb_1s(monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerProcess]:
    """The process's embedded FalkorDB server, started anew, whose queries stop at 1 s (deadline 3 s)."""
    yield from _embedded_with_limit(monkeypatch, "1")


def _victim(tmp_path: Path) -> tuple[Any, str]:
    suffix = uuid.uuid4().hex[:8]
    victim = _store(f"victim-{suffix}", tmp_path)
    assert victim.write_sync("UNWIND range(1, 50) AS i CREATE (:Victim {id: 'v' + toString(i), secret: 'kept'})").ok
    return victim, suffix


def _restart_whose_restore_fails(first: ServerProcess) -> Any:
    """The embedded server is killed as a runaway query has it killed (``end_embedded``), and the new one refuses
    writes for a moment (``maxmemory`` reached: another run's KG, restored or written first, filled it), so a
    store's restore there fails while the server stays up. Returns a client of the new server."""
    import redis

    assert end_embedded(first, ENDED_GAVE_UP)
    second = embedded("falkordb")
    client = redis.Redis(unix_socket_path=second.unix_socket)
    client.config_set("maxmemory", "1")
    return client


# ------------------------------------------------------------------------------------------------------------
# A restore that fails on the new server
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.timeout(120)
def test_review_kg2_a_restore_that_fails_on_the_new_server_loses_the_run_s_kg(falkordb_2s, tmp_path):
    """HIGH. ``_follow`` moves the store to the new server (``self._server = embedded(...)``) before it restores
    the KG there; when the restore fails (memory full, the time limit, a refused command) the store believes it is
    in step with a server that holds none or part of its KG. Its next read answers an 'empty key' error (or, after
    a partial restore, from part of the KG, silently); its next write succeeds and the store's snapshot -- the one
    the graph state and the checkpoint take -- becomes the new node alone: 50 nodes of the run's KG are lost
    without a word. The store should move to the new server only once the restore succeeded (or retry it at every
    operation until it does)."""
    victim, _ = _victim(tmp_path)
    client = _restart_whose_restore_fails(falkordb_2s)
    try:
        victim.read_sync(SECRET_READ)  # the restore fails (the server refuses it)
    except Exception:  # noqa: BLE001 - what it raises is the next test's finding
        pass
    client.config_set("maxmemory", str(servers.server_memory_mb() * 1024 * 1024))  # memory is free again
    read = victim.read_sync("MATCH (n:Victim) RETURN count(n) AS c")
    assert read.ok and read.result == [{"c": 50}], read
    assert victim.write_sync("CREATE (:Note {id: 'note'})").ok
    assert len(asyncio.run(victim.snapshot())["nodes"]) == 51


@pytest.mark.timeout(120)
def test_review_kg2_a_restore_that_fails_raises_out_of_read_sync(falkordb_2s, tmp_path):
    """LOW-MEDIUM. When the restore on the new server fails with the server's error (not a lost connection),
    ``_twice`` re-raises it: ``read_sync`` raises ``redis.exceptions.OutOfMemoryError`` instead of answering a
    ``ReadResult`` the fix loop can act on (house rule: an error, never a traceback). The same happens to every
    write of a run whose KG grew past ``QUERY_MEM_CAPACITY`` (a quarter of the memory): ``_export`` is refused,
    then ``_undo``'s export too, and the server's error escapes ``write_sync``."""
    victim, _ = _victim(tmp_path)
    client = _restart_whose_restore_fails(falkordb_2s)
    try:
        result = victim.read_sync(SECRET_READ)
    finally:
        client.config_set("maxmemory", str(servers.server_memory_mb() * 1024 * 1024))
    assert not result.ok and "memory" in result.error, result


# ------------------------------------------------------------------------------------------------------------
# A healthy, busy server restarted
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.timeout(240)
def test_review_kg2_reads_the_time_limit_stops_get_a_healthy_server_restarted(falkordb_2s, tmp_path):
    """MEDIUM-HIGH. FalkorDB's time limit counts from when a query thread starts the query, not from when the
    server received it (measured: 12 reads stopped at 2 s on 4 threads answered at 2, 4 and 6 s). A query queued
    behind THREAD_COUNT reads that each run to the limit waits past its connection's deadline (the limit and half
    again, at least 2 s more): the connection gives up, the store blames that query ("cut off ... restarted",
    not retried) or the unanswered watchdog probe, and the healthy server is killed: every run's in-flight query
    fails or runs again and every KG is restored. No query here is a bomb (each is stopped by the server's own
    limit), so legitimate load does this, and an attacker can do it at will without ever being the one blamed.
    Expected: the victim's trivial read is answered and the server is not restarted (e.g. a client-side
    semaphore of THREAD_COUNT - 1 queries in flight on the embedded server, the deadline counted once a slot is
    held, so that a query the server receives starts at once)."""
    limits = falkordb_limits(servers.server_memory_mb(), servers.query_timeout_s())
    threads = int(limits.module_args[limits.module_args.index("THREAD_COUNT") + 1])
    victim, suffix = _victim(tmp_path)
    heavy = []
    for i in range(2 * threads + 1):
        store = _store(f"heavy-{suffix}-{i}", tmp_path)
        assert store.write_sync("UNWIND range(1, 1000) AS i CREATE (:P {id: 'p' + toString(i), v: i})").ok
        heavy.append(store)
    results: list[Any] = []
    workers = [threading.Thread(target=lambda s=s: results.append(s.read_sync(HEAVY_READ))) for s in heavy]
    for worker in workers:
        worker.start()
    time.sleep(0.5)  # the heavy reads are at the server (a later read only waits less)
    after = victim.read_sync(SECRET_READ)
    for worker in workers:
        worker.join()
    assert after.ok and after.result == [{"s": "kept"}] * 50, after
    assert embedded("falkordb") is falkordb_2s, "a healthy server under legitimate load was restarted"
    assert all(not r.ok and "timed out" in r.error for r in results), results


# ------------------------------------------------------------------------------------------------------------
# Restarts without bound
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.timeout(240)
def test_review_kg2_one_run_restarts_the_server_again_and_again(falkordb_1s, tmp_path):
    """MEDIUM. Each runaway write is told it was cut off and the server restarted, and nothing remembers it: the
    same run (its fix loop, or a hostile model on purpose) sends it again and restarts the server again, with no
    bound and no backoff, and every other run's in-flight query fails or runs again and every KG is restored each
    time (a victim whose retry meets the next restart gets "did not complete ... run the query again", a clear
    error, but no progress while the storm lasts). Expected: after a few restarts caused by one run's KG, that
    run's queries are refused without reaching the server (a clear error naming the restarts), so the storm
    ends; at most 3 restarts from 5 bombs here."""
    attacker = _store(f"attacker-{uuid.uuid4().hex[:8]}", tmp_path)
    outcomes = [attacker.write_sync(WRITE_THEN_LOOP) for _ in range(5)]
    assert all(not o.ok for o in outcomes), outcomes
    restarts = embedded("falkordb").generation - falkordb_1s.generation
    assert restarts <= 3, f"one run restarted the shared server {restarts} times: {outcomes[-1].error}"


# ------------------------------------------------------------------------------------------------------------
# Static graphs in the embedded server
# ------------------------------------------------------------------------------------------------------------
@pytest.fixture
def ark_source(tmp_path: Path) -> Path:
    example = json.loads((resources.files("kgagents") / "data" / "ark" / "example_data.json").read_text("utf-8"))
    path = tmp_path / "yui.json"
    path.write_text(json.dumps(example), encoding="utf-8")
    return path


@pytest.mark.timeout(180)
def test_review_kg2_a_static_graph_imported_again_after_a_restart_stays_unreachable(falkordb_2s, ark_source):
    """LOW-MEDIUM. The docs say a static graph imported into the embedded server is lost with a restart and must
    be imported again. Imported again, it still cannot be used in this process: ``open_graph`` keeps one instance
    per fingerprint and location, and the new import has the same ones, so the cached ``CypherGraph`` -- bound to
    the dead server's socket and the dropped namespace -- is returned, and every lookup fails with a connection
    error about a socket file that no longer exists ("cannot use the falkordb database at unix:///tmp/...: ...
    No such file or directory"), which does not say the server was restarted. Expected: the import replaces the
    open instance (or the instance reopens its server and namespace), and the error before the re-import says
    the embedded server was restarted and the graph must be imported again."""
    from kgagents.tools.pgraph import open_graph
    from kgagents.tools.pgraph.cypher import CypherGraph, import_to_cypher
    from kgagents.tools.pgraph.registry import forget_open_graphs

    forget_open_graphs()
    try:
        import_to_cypher(ark_source, backend="falkordb", name="yui")
        graph = open_graph("yui")
        assert isinstance(graph, CypherGraph) and graph.triples("Sablé", "animal breed")[0].key == "27ea"
        assert end_embedded(falkordb_2s, ENDED_GAVE_UP)
        import_to_cypher(ark_source, backend="falkordb", name="yui")
        again = open_graph("yui")
        assert again.triples("Sablé", "animal breed")[0].key == "27ea"
    finally:
        forget_open_graphs()


@pytest.mark.timeout(180)
def test_review_kg2_a_static_graph_imported_again_answers_empty_from_the_dropped_namespace(falkordb_2s, ark_source):
    """MEDIUM (no restart needed). Importing a graph again under its name loads a new namespace and drops the old
    one, but ``open_graph`` still returns the instance opened before (same fingerprint, same location), which
    reads the dropped namespace: FalkorDB answers a read of a graph (Redis key) that does not exist with an
    'empty key' error, ``FalkorDatabase._run`` turns that into no rows, and every uncached lookup answers
    nothing -- wrong answers (an entity "not found") instead of an error. This is also what a user meets who
    follows the docs' advice after a restart in a process whose server URL did not change. Expected: the import
    replaces the open instance; a read of a namespace that is gone raises 'import it again'."""
    from kgagents.tools.pgraph import open_graph
    from kgagents.tools.pgraph.cypher import import_to_cypher
    from kgagents.tools.pgraph.registry import forget_open_graphs

    forget_open_graphs()
    try:
        import_to_cypher(ark_source, backend="falkordb", name="yui")
        assert len(open_graph("yui").triples("Yui Yuigahama", "sex or gender")) == 1
        import_to_cypher(ark_source, backend="falkordb", name="yui")
        assert len(open_graph("yui").triples("Yui Yuigahama", "present in work")) == 1
    finally:
        forget_open_graphs()
