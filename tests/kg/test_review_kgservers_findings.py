"""Findings of the review of the shared graph servers' resource caps (issue 34, branch review-kgservers).

Each test is a minimal reproduction of a way one run's LLM-written Cypher still takes a shared FalkorDB server down
or stalls every other run on it, through the store API the graph executor uses, on a server started the way the
embedded one is (:func:`kgagents.tools.kg.servers.start_falkordb`). They FAIL on the code as merged (efc195c): that
is the finding. No test asserts a duration; each asserts what another run sees.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kgagents.tools.kg.servers import ServerProcess, falkordb_limits, query_timeout_s, server_memory_mb, start_falkordb
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
#: A string that grows outside reduce() and SET, which the growth check does not look at: each WITH squares its
#: length (10, 100, 10^4, 10^8, 10^16 characters); FalkorDB's query memory capacity does not count strings, so the
#: server grows until its address-space limit aborts it.
STRING_SQUARING = ("WITH 'xxxxxxxxxx' AS s WITH replace(s, 'x', s) AS s WITH replace(s, 'x', s) AS s "
                   "WITH replace(s, 'x', s) AS s WITH replace(s, 'x', s) AS s RETURN size(s) AS n")


def _store(url: str, thread_id: str, tmp_path: Path) -> Any:
    return open_store("falkordb", snapshot=None, work_dir=tmp_path, thread_id=thread_id,
                      limits=SandboxLimits(timeout_s=20), allow_weak_sandbox=True, url=url)


def _victim_and_attacker(url: str, tmp_path: Path) -> tuple[Any, Any, str]:
    suffix = uuid.uuid4().hex[:8]
    secret = f"SECRET-{suffix}"
    victim = _store(url, f"victim-{suffix}", tmp_path)
    attacker = _store(url, f"attacker-{suffix}", tmp_path)
    assert victim.write_sync(f"CREATE (:Victim {{id: 'victim', secret: '{secret}'}})").ok
    return victim, attacker, secret


@pytest.fixture
def short_falkordb(monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerProcess]:
    """A FalkorDB server of its own (the embedded server's caps), whose queries stop at 3 s."""
    monkeypatch.setenv("KGAGENTS_KG_QUERY_TIMEOUT_S", "3")
    monkeypatch.delenv("FALKORDB_URL", raising=False)
    server = start_falkordb()
    try:
        yield server
    finally:
        server.stop()  # SIGTERM, then SIGKILL: a server stuck in the global lock ignores SIGTERM


@pytest.mark.timeout(240)
def test_review_falkordb_write_that_creates_then_loops_stalls_every_run(short_falkordb, tmp_path):
    """HIGH. One write (CREATE, then a loop in one expression) holds Redis's global lock until the loop ends
    (hours): the attacker's connection gives up at the deadline, but every other run's reads and writes -- on
    their own graphs -- time out from then on, and the server is alive, so nothing restarts it."""
    victim, attacker, secret = _victim_and_attacker(short_falkordb.url, tmp_path)
    result = attacker.write_sync(WRITE_THEN_LOOP)
    assert not result.ok  # cut off at the client deadline (or refused, once fixed)
    after = victim.read_sync(SECRET_READ)
    assert after.ok and after.result == [{"s": secret}], after


@pytest.mark.timeout(240)
def test_review_falkordb_a_few_cut_off_reads_take_every_query_thread(short_falkordb, tmp_path):
    """HIGH. A read the time limit does not stop keeps one of FalkorDB's THREAD_COUNT query threads for hours after
    the connection gave up on it; the same run sends it again (one read a few seconds apart, the fix loop does
    this on its own) until every thread is taken: from then on no run's query is answered."""
    limits = falkordb_limits(server_memory_mb(), query_timeout_s())
    threads = int(limits.module_args[limits.module_args.index("THREAD_COUNT") + 1])
    victim, attacker, secret = _victim_and_attacker(short_falkordb.url, tmp_path)
    for _ in range(threads):
        assert not attacker.read_sync(READ_LOOP).ok
    after = victim.read_sync(SECRET_READ)
    assert after.ok and after.result == [{"s": secret}], after


@pytest.mark.timeout(240)
def test_review_falkordb_one_read_that_squares_a_string_aborts_the_server(tmp_path, monkeypatch):
    """MEDIUM-HIGH. A read whose string grows through WITH (no reduce, no SET: the growth check does not look) passes
    every check, is not counted by QUERY_MEM_CAPACITY and grows the server to its address-space limit, which
    aborts it within seconds: every run's in-flight query fails and every KG on the server is gone (the embedded
    server is restarted and restored at each run's next open; a FALKORDB_URL or test server is not)."""
    monkeypatch.setenv("KGAGENTS_KG_QUERY_TIMEOUT_S", "30")  # the default: the client waits for the outcome
    monkeypatch.delenv("FALKORDB_URL", raising=False)
    server = start_falkordb()
    try:
        victim, attacker, secret = _victim_and_attacker(server.url, tmp_path)
        result = attacker.read_sync(STRING_SQUARING)
        assert not result.ok
        for _ in range(200):  # up to 20 s for what the server still does with the query
            if not server.alive():
                break
            time.sleep(0.1)
        assert server.alive(), f"the server died ({server.proc.returncode}); the attacker was told: {result.error}"
        assert victim.read_sync(SECRET_READ).result == [{"s": secret}]
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
