"""Findings of the review of the shared graph servers' resource caps (issue 34, branch review-kgservers), and what
now happens instead.

Each test is a reproduction of a way one run's LLM-written Cypher took a shared FalkorDB server down or stalled
every other run on it, through the store API the graph executor uses, on the process's embedded server (started
by :func:`kgagents.tools.kg.servers.embedded`, with a short time limit). On the code as reviewed (9d52163) the other
runs' queries timed out from then on, or the server was gone; now the embedded server is killed and started again
when a query ran past its client's deadline (the server had not stopped it) or the watchdog's probe went
unanswered, and every run's KG is restored on the new one from the snapshot its store holds (the graph state's).
No test asserts a duration; each asserts what another run sees.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kgagents.tools.kg import servers
from kgagents.tools.kg.falkordb_store import MAX_RESTARTS_PER_RUN, restarts_caused
from kgagents.tools.kg.servers import (
    ServerProcess,
    embedded,
    falkordb_limits,
    query_timeout_s,
    server_memory_mb,
    start_falkordb,
)
from kgagents.tools.kg.stores import open_store
from kgagents.tools.sandbox import SandboxLimits

pytestmark = pytest.mark.slow

SECRET_READ = "MATCH (n:Victim) RETURN n.secret AS s"
#: 10^10 additions inside one expression over a bound the checks cannot see: hours of one server thread
#: (FalkorDB checks its time limit between records, not inside an expression).
LOOP = ("reduce(s = 0, x IN range(1, toInteger('100000')) | "
        "s + reduce(t = 0, y IN range(1, 100000) | t + y))")
#: A write that creates a node first and then loops: FalkorDB takes Redis's global lock to commit the CREATE and
#: keeps it until the query ends, so the whole server (every graph, every command, PING) waits for the loop.
WRITE_THEN_LOOP = f"CREATE (a:Mine {{id: 'mine'}}) WITH a RETURN {LOOP} AS n"
READ_LOOP = f"RETURN {LOOP} AS n"
#: A string that grows through WITH, each step naming it twice: its length is squared (10, 100, 10^4, 10^8,
#: 10^16 characters); FalkorDB's query memory capacity does not count strings, so the server grows until its
#: address-space limit aborts it. The growth check refuses this form.
STRING_SQUARING = ("WITH 'xxxxxxxxxx' AS s WITH replace(s, 'x', s) AS s WITH replace(s, 'x', s) AS s "
                   "WITH replace(s, 'x', s) AS s WITH replace(s, 'x', s) AS s RETURN size(s) AS n")
#: The same through a copy of the string, which the check does not follow (it is a first line, not the wall):
#: it reaches the server, which aborts.
STRING_SQUARING_BY_COPY = ("WITH 'xxxxxxxxxx' AS s " + "WITH s, s AS t WITH replace(s, 'x', t) AS s " * 4
                           + "RETURN size(s) AS n")


def _store(thread_id: str, tmp_path: Path) -> Any:
    """A run's KG on the process's embedded FalkorDB server (no URL)."""
    return open_store("falkordb", snapshot=None, work_dir=tmp_path, thread_id=thread_id,
                      limits=SandboxLimits(timeout_s=20), allow_weak_sandbox=True)


def _victim_and_attacker(tmp_path: Path) -> tuple[Any, Any, str]:
    suffix = uuid.uuid4().hex[:8]
    secret = f"SECRET-{suffix}"
    victim = _store(f"victim-{suffix}", tmp_path)
    attacker = _store(f"attacker-{suffix}", tmp_path)
    assert victim.write_sync(f"CREATE (:Victim {{id: 'victim', secret: '{secret}'}})").ok
    return victim, attacker, secret


@pytest.fixture
def short_falkordb(monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerProcess]:
    """The process's embedded FalkorDB server, started anew for the test with queries that stop at 3 s."""
    monkeypatch.setenv("KGAGENTS_KG_QUERY_TIMEOUT_S", "3")
    monkeypatch.delenv("FALKORDB_URL", raising=False)
    servers.stop_embedded("falkordb")
    try:
        yield embedded("falkordb")
    finally:
        servers.stop_embedded("falkordb")


def _restarted(first: ServerProcess) -> bool:
    """Whether the embedded server is another one than ``first`` now, and ``first`` is gone."""
    return embedded("falkordb").generation > first.generation and not first.alive()


@pytest.mark.timeout(240)
def test_review_falkordb_write_that_creates_then_loops_stalls_every_run(short_falkordb, tmp_path):
    """HIGH. One write (CREATE, then a loop in one expression) held Redis's global lock until the loop ended
    (hours), and every other run's reads and writes timed out from then on. Now the attacker's connection gives up
    at the deadline, the server is killed and started again, the attacker is told both, and the victim's KG is
    back on the new server; the attacker's KG is as before its write."""
    victim, attacker, secret = _victim_and_attacker(tmp_path)
    result = attacker.write_sync(WRITE_THEN_LOOP)
    assert not result.ok and "cut off" in result.error and "restarted" in result.error, result
    after = victim.read_sync(SECRET_READ)
    assert after.ok and after.result == [{"s": secret}], after
    assert _restarted(short_falkordb)
    assert attacker.read_sync("MATCH (n:Mine) RETURN count(n) AS c").result == [{"c": 0}]


@pytest.mark.timeout(240)
def test_review_falkordb_a_victim_query_in_flight_during_the_restart_is_answered(short_falkordb, tmp_path):
    """A victim's write that waits behind the attacker's lock when the server is killed is not lost and not
    blamed: its KG is restored on the new server and the write runs once more there."""
    victim, attacker, secret = _victim_and_attacker(tmp_path)
    outcome: dict[str, Any] = {}
    bomb = threading.Thread(target=lambda: outcome.update(result=attacker.write_sync(WRITE_THEN_LOOP)))
    bomb.start()
    time.sleep(1)  # the attacker holds the lock (not a duration asserted: a later write only waits less)
    write = victim.write_sync("CREATE (:Victim2 {id: 'victim2', v: 2})")
    bomb.join()
    assert write.ok, write
    assert not outcome["result"].ok
    assert victim.read_sync("MATCH (n) RETURN n.id AS id ORDER BY id").result == [{"id": "victim"},
                                                                                 {"id": "victim2"}]
    assert victim.read_sync(SECRET_READ).result == [{"s": secret}]


@pytest.mark.timeout(300)
def test_review_falkordb_a_few_cut_off_reads_take_every_query_thread(short_falkordb, tmp_path):
    """HIGH. A read the time limit does not stop kept one of FalkorDB's THREAD_COUNT query threads for hours after
    the connection gave up on it; the same run sent it again until every thread was taken and no run's query was
    answered. Now every such read ends the server that runs it, until the run has had it restarted
    MAX_RESTARTS_PER_RUN times; its further reads are refused unsent (review-kg2); the victim's KG is there on the
    last one."""
    limits = falkordb_limits(server_memory_mb(), query_timeout_s())
    threads = int(limits.module_args[limits.module_args.index("THREAD_COUNT") + 1])
    victim, attacker, secret = _victim_and_attacker(tmp_path)
    for _ in range(threads):
        result = attacker.read_sync(READ_LOOP)
        assert not result.ok and "restarted" in result.error, result
    after = victim.read_sync(SECRET_READ)
    assert after.ok and after.result == [{"s": secret}], after
    assert embedded("falkordb").generation >= short_falkordb.generation + min(threads, MAX_RESTARTS_PER_RUN)
    assert "refused" in result.error and restarts_caused(attacker.graph_name) == MAX_RESTARTS_PER_RUN, result


@pytest.mark.timeout(240)
def test_review_falkordb_a_stall_from_another_client_is_ended_by_the_watchdog(short_falkordb, tmp_path):
    """A client that never gives up (not a kgagents store) holds the global lock: the watchdog's probe goes
    unanswered and the server is killed, or the victim's own query, sent while the server was not answering,
    gives up and is not blamed: either way the victim gets its answer."""
    import redis

    victim, _, secret = _victim_and_attacker(tmp_path)
    stalled = threading.Event()

    def hold() -> None:
        client = redis.Redis(unix_socket_path=short_falkordb.unix_socket)  # no socket timeout
        stalled.set()
        try:
            client.execute_command("GRAPH.QUERY", "outside", WRITE_THEN_LOOP)
        except Exception:  # noqa: BLE001 - the server is killed under it
            pass

    threading.Thread(target=hold, daemon=True).start()
    stalled.wait()
    time.sleep(3)  # the watchdog has sent a probe that is not answered (a later read only finds it sooner)
    after = victim.read_sync(SECRET_READ)
    assert after.ok and after.result == [{"s": secret}], after
    assert _restarted(short_falkordb)


@pytest.mark.timeout(240)
def test_review_falkordb_one_read_that_squares_a_string_aborts_the_server(tmp_path, monkeypatch):
    """MEDIUM-HIGH. A read whose string grows through WITH passed every check, was not counted by
    QUERY_MEM_CAPACITY and grew the server to its address-space limit, which aborted it. Now the check refuses
    it; a form the check does not see (through a copy) still ends the server, and the victim's KG is back on the
    new one: the attacker is told the server stopped, the victim, whose store follows the restart, its secret."""
    monkeypatch.setenv("KGAGENTS_KG_QUERY_TIMEOUT_S", "30")  # the default: the client waits for the outcome
    monkeypatch.delenv("FALKORDB_URL", raising=False)
    servers.stop_embedded("falkordb")
    try:
        first = embedded("falkordb")
        victim, attacker, secret = _victim_and_attacker(tmp_path)
        refused = attacker.read_sync(STRING_SQUARING)
        assert not refused.ok and refused.error.startswith("Rejected") and "WITH" in refused.error, refused
        assert first.alive() and victim.read_sync(SECRET_READ).result == [{"s": secret}]
        result = attacker.read_sync(STRING_SQUARING_BY_COPY)
        assert not result.ok, result
        after = victim.read_sync(SECRET_READ)
        assert after.ok and after.result == [{"s": secret}], after
        assert embedded("falkordb").alive()
    finally:
        servers.stop_embedded("falkordb")


@pytest.mark.timeout(120)
def test_review_a_falkordb_that_lost_its_graphs_gets_the_run_s_kg_back(tmp_path, monkeypatch):
    """A server kgagents did not start (a test server, as ``FALKORDB_URL`` names one) and cannot restart: when its
    supervisor restarted it without its data, a run's read answered an error about an empty key and its next write
    kept only its own nodes. Now the run's store finds its graph gone and restores it from the graph state."""
    import redis

    monkeypatch.delenv("FALKORDB_URL", raising=False)
    server = start_falkordb()
    try:
        store = open_store("falkordb", snapshot=None, work_dir=tmp_path, thread_id=f"lost-{uuid.uuid4().hex[:8]}",
                           limits=SandboxLimits(timeout_s=20), allow_weak_sandbox=True, url=server.url)
        assert store.write_sync("CREATE (:Victim {id: 'victim', secret: 'kept'})").ok
        redis.Redis(host="127.0.0.1", port=server.port).flushall()  # what a restart without persistence leaves
        assert store.read_sync(SECRET_READ).result == [{"s": "kept"}]
        redis.Redis(host="127.0.0.1", port=server.port).flushall()
        assert store.write_sync("CREATE (:New {id: 'new'})").ok
        assert store.read_sync("MATCH (n) RETURN n.id AS id ORDER BY id").result == [{"id": "new"},
                                                                                    {"id": "victim"}]
    finally:
        server.stop()


_ORPHAN_SCRIPT = textwrap.dedent("""
    import os, sys, time
    os.environ["KGAGENTS_KG_QUERY_TIMEOUT_S"] = "3"
    import falkordb
    from kgagents.tools.kg.servers import start_falkordb
    server = start_falkordb()
    print(server.proc.pid, flush=True)
    graph = falkordb.FalkorDB(host="127.0.0.1", port=server.port, socket_timeout=2).select_graph("g")
    try:
        graph.query(sys.argv[1])
    except Exception:
        pass
    os._exit(0)  # the process ends without its atexit hooks (as when it is killed): PDEATHSIG must stop the server
""")


@pytest.mark.timeout(120)
def test_review_a_stalled_falkordb_outlives_the_process_that_started_it(tmp_path):
    """MEDIUM. The death signal is SIGTERM, which redis-server handles on its main thread; a server stuck in the
    global lock (the first finding) never gets to it, so it outlives kgagents, busy, its socket folder left behind."""
    proc = subprocess.run([sys.executable, "-c", _ORPHAN_SCRIPT, WRITE_THEN_LOOP], capture_output=True, text=True,
                          timeout=90, cwd=str(Path(__file__).resolve().parents[2]),
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    pid = int(proc.stdout.split()[0])
    try:
        for _ in range(100):  # up to 10 s for the death signal to end it
            if not Path(f"/proc/{pid}").exists() or "Z" in _state(pid):
                break
            time.sleep(0.1)
        assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid), "the server outlived its parent"
    finally:
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, 9)


def _state(pid: int) -> str:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line.split()[1]
    except OSError:
        return "Z"
    return ""
