"""The walls around the embedded FalkorDB's restart (issue 34, review-kg2): query slots, the per-run restart
bound, exports in pages, and static graphs whose namespace or server is gone. The server tests are slow (they
start the embedded server); the rest are the pure decisions. No test asserts a duration."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from kgagents.tools.kg import falkordb_store, servers
from kgagents.tools.kg.falkordb_store import (
    MAX_RESTARTS_PER_RUN,
    count_restart,
    pages,
    refused_text,
    restarts_caused,
    server_error,
)
from kgagents.tools.kg.servers import (
    ENDED_GAVE_UP,
    ServerBusy,
    ServerProcess,
    embedded,
    end_embedded,
    overdue,
    query_slot,
)
from kgagents.tools.kg.stores import open_store
from kgagents.tools.sandbox import SandboxLimits


def _fake_server(slots: int) -> ServerProcess:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return ServerProcess("falkordb", proc, Path("server.log"), slots=threading.BoundedSemaphore(slots))


def test_a_query_that_finds_every_slot_taken_is_told_the_server_is_busy():
    server = _fake_server(1)
    with query_slot(server, wait=0.01):
        assert len(server.in_flight) == 1
        with pytest.raises(ServerBusy, match="the graph server is busy"), query_slot(server, wait=0.01):
            pass
    assert server.in_flight == {}
    with query_slot(server, wait=0.01):  # the slot was given back
        pass
    with query_slot(None):  # a server kgagents did not start: not counted
        pass


def test_only_a_query_past_its_deadline_makes_the_server_overdue():
    server = _fake_server(2)
    server.in_flight[1] = 100.0
    assert not overdue(server, deadline=5.0, now=104.0)
    assert not overdue(server, deadline=5.0, now=105.0)
    assert overdue(server, deadline=5.0, now=105.5)
    server.in_flight.clear()
    assert not overdue(server, deadline=5.0, now=1e9)


def test_a_run_is_refused_once_its_queries_restarted_the_server_too_often():
    name = "kgagents_refusal_test"
    assert restarts_caused(name) == 0 and refused_text(0) is None
    for expected in range(1, MAX_RESTARTS_PER_RUN + 1):
        assert count_restart(name) == expected
    assert refused_text(MAX_RESTARTS_PER_RUN - 1) is None
    text = refused_text(restarts_caused(name))
    assert text is not None and f"{MAX_RESTARTS_PER_RUN} times" in text and "refused" in text
    assert restarts_caused("kgagents_another_run") == 0


def test_pages_and_server_errors():
    assert pages([], 3) == [] and pages([1, 2, 3, 4], 3) == [[1, 2, 3], [4]]
    import redis

    assert server_error(redis.exceptions.OutOfMemoryError("full"))
    assert not server_error(ValueError("a bug"))


# ------------------------------------------------------------------------------------------------------------
# On the embedded server
# ------------------------------------------------------------------------------------------------------------
@pytest.fixture
def falkordb_2s(monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerProcess]:
    monkeypatch.setenv("KGAGENTS_KG_QUERY_TIMEOUT_S", "2")
    monkeypatch.delenv("FALKORDB_URL", raising=False)
    servers.stop_embedded("falkordb")
    try:
        yield embedded("falkordb")
    finally:
        servers.stop_embedded("falkordb")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_kg_larger_than_a_page_is_exported_and_restored_whole(falkordb_2s, tmp_path, monkeypatch):
    monkeypatch.setattr(falkordb_store, "PAGE_ROWS", 3)
    store = open_store("falkordb", snapshot=None, work_dir=tmp_path, thread_id="paged-export",
                       limits=SandboxLimits(timeout_s=20), allow_weak_sandbox=True)
    assert store.write_sync("UNWIND range(1, 10) AS i CREATE (:P {id: 'p' + toString(i), v: i})").ok
    assert store.write_sync("MATCH (a:P), (b:P) WHERE b.v = a.v + 1 CREATE (a)-[:NEXT]->(b)").ok
    before = store.database_snapshot()
    assert len(before["nodes"]) == 10 and len(before["relationships"]) == 9
    assert end_embedded(falkordb_2s, ENDED_GAVE_UP)
    read = store.read_sync("MATCH (:P)-[r:NEXT]->(:P) RETURN count(r) AS c")  # restored on the new server
    assert read.ok and read.result == [{"c": 9}], read
    assert store.database_snapshot() == before


@pytest.fixture
def ark_source(tmp_path: Path) -> Path:
    example = json.loads((resources.files("kgagents") / "data" / "ark" / "example_data.json").read_text("utf-8"))
    path = tmp_path / "yui.json"
    path.write_text(json.dumps(example), encoding="utf-8")
    return path


def _import_and_open(ark_source: Path) -> Any:
    from kgagents.tools.pgraph import open_graph
    from kgagents.tools.pgraph.cypher import import_to_cypher

    import_to_cypher(ark_source, backend="falkordb", name="yui")
    return open_graph("yui")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_static_graph_whose_server_was_restarted_says_to_import_it_again(falkordb_2s, ark_source):
    from kgagents.tools.pgraph.cypher import GraphDatabaseError
    from kgagents.tools.pgraph.registry import forget_open_graphs

    forget_open_graphs()
    try:
        graph = _import_and_open(ark_source)
        assert end_embedded(falkordb_2s, ENDED_GAVE_UP)
        with pytest.raises(GraphDatabaseError, match=r"was restarted.*import the graph again"):
            graph.triples("Yui Yuigahama", "sex or gender")
    finally:
        forget_open_graphs()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_an_instance_whose_namespace_was_dropped_raises_instead_of_answering_nothing(falkordb_2s, ark_source):
    from kgagents.tools.pgraph.cypher import GraphDatabaseError, import_to_cypher
    from kgagents.tools.pgraph.registry import forget_open_graphs

    forget_open_graphs()
    try:
        old = _import_and_open(ark_source)
        import_to_cypher(ark_source, backend="falkordb", name="yui")  # drops the namespace `old` reads
        with pytest.raises(GraphDatabaseError, match=r"no longer in the falkordb database.*import it again"):
            old.triples("Yui Yuigahama", "sex or gender")
    finally:
        forget_open_graphs()
