"""Every task-KG backend behind the one interface: write, read, render, snapshot, restore, errors, reopen."""

from __future__ import annotations

import uuid

import pytest

from kgagents.tools.kg.base import KGStore, snapshot_from_jsonl, snapshot_to_jsonl
from tests.kg.conftest import CODE, Backend


def thread() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


async def fresh(backend: Backend, tmp_path) -> KGStore:
    return backend.open(thread(), None, tmp_path)


@pytest.mark.slow
async def test_write_read_render_snapshot(backend: Backend, tmp_path):
    code = CODE[backend.language]
    store = await fresh(backend, tmp_path)
    assert store.query_language == backend.language
    assert "empty" in await store.render()
    result = await store.write(code["write_array"])
    assert result.ok, result.error
    snap = await store.snapshot()
    assert sorted(n["id"] for n in snap["nodes"]) == ["array", "sorted_array"]
    assert {tuple(n["labels"]) for n in snap["nodes"]} == {("Array",), ("SortedArray",)}
    [rel] = snap["relationships"]
    assert (rel["source"], rel["type"], rel["target"]) == ("array", "SORTED_AS", "sorted_array")
    rendered = await store.render()
    assert "Label: SortedArray" in rendered and "id:sorted_array" in rendered and "SORTED_AS" in rendered
    read = await store.read(code["read_sorted"])
    assert read.ok and not read.empty, read.error
    assert "23" in str(read.result) and "42" in str(read.result)
    assert backend.db_snapshot(store) == snap
    # the one snapshot format round-trips through JSON lines
    assert snapshot_from_jsonl(snapshot_to_jsonl(snap)) == snap


@pytest.mark.slow
async def test_engine_errors_are_reported_and_change_nothing(backend: Backend, tmp_path):
    code = CODE[backend.language]
    store = await fresh(backend, tmp_path)
    assert (await store.write(code["write_array"])).ok
    before = await store.snapshot()
    bad = await store.write(code["broken_write"])
    assert not bad.ok and bad.error
    assert await store.snapshot() == before and backend.db_snapshot(store) == before
    failed = await store.read(code["broken_read"])
    assert not failed.ok and failed.error
    empty = await store.read(code["empty_read"])
    assert empty.ok and empty.empty


@pytest.mark.slow
async def test_reopening_restores_the_state_snapshot(backend: Backend, tmp_path):
    """The state's snapshot is the truth: a write the checkpoint never saw is undone on reopen (resume)."""
    code = CODE[backend.language]
    tid = thread()
    store = backend.open(tid, None, tmp_path)
    assert (await store.write(code["write_array"])).ok
    checkpointed = await store.snapshot()
    assert (await store.write(code["write_total"])).ok  # "crash" before this write is checkpointed
    reopened = backend.open(tid, checkpointed, tmp_path)
    assert await reopened.snapshot() == checkpointed
    assert backend.db_snapshot(reopened) == checkpointed
    assert (await reopened.write(code["write_total"])).ok
    assert backend.db_snapshot(reopened) == await reopened.snapshot()
    assert len((await reopened.snapshot())["nodes"]) == 3  # no duplicates
    # reopening with an unchanged snapshot keeps the database as it is
    again = backend.open(tid, await reopened.snapshot(), tmp_path)
    assert backend.db_snapshot(again) == await reopened.snapshot()


@pytest.mark.slow
async def test_clear_and_restore(backend: Backend, tmp_path):
    code = CODE[backend.language]
    store = await fresh(backend, tmp_path)
    assert (await store.write(code["write_array"])).ok
    snap = await store.snapshot()
    await store.clear()
    assert (await store.snapshot())["nodes"] == [] and backend.db_snapshot(store)["nodes"] == []
    await store.restore(snap)
    assert await store.snapshot() == snap and backend.db_snapshot(store) == snap


async def test_cypher_ids_are_assigned_and_must_be_unique(cypher_backend: Backend, tmp_path):
    db_backend = cypher_backend
    store = await fresh(db_backend, tmp_path)
    assert (await store.write("CREATE (:Person {name: 'Ann'}), (:Person {name: 'Bob'}), (:City {id: 7})")).ok
    ids = sorted(n["id"] for n in (await store.snapshot())["nodes"])
    assert ids == ["7", "person_1", "person_2"]
    assert db_backend.db_snapshot(store) == await store.snapshot()
    dup = await store.write("CREATE (:Person {id: 'person_1', name: 'Eve'})")
    assert not dup.ok and "person_1" in dup.error
    assert len(db_backend.db_snapshot(store)["nodes"]) == 3


async def test_cypher_reads_cannot_write(cypher_backend: Backend, tmp_path):
    db_backend = cypher_backend
    store = await fresh(db_backend, tmp_path)
    result = await store.read("CREATE (:Sneaky {id: 'x'}) RETURN 1 AS one")
    assert db_backend.db_snapshot(store)["nodes"] == []
    assert not result.ok or result.result == [{"one": 1}]


@pytest.mark.slow
async def test_cypher_results_are_compact(cypher_backend: Backend, tmp_path):
    db_backend = cypher_backend
    store = await fresh(db_backend, tmp_path)
    assert (await store.write(CODE["cypher"]["write_array"])).ok
    result = await store.read("MATCH (a:Array)-[r]->(s) RETURN a, r, s.values AS v, labels(s) AS l")
    assert result.ok, result.error
    [row] = result.result
    assert row["a"] == {"id": "array", "labels": ["Array"], "properties": {"values": [42, 23, 2, 88, 37, 15]}}
    assert row["r"] == {"type": "SORTED_AS", "source": "array", "target": "sorted_array", "properties": {}}
    assert row["l"] == ["SortedArray"]  # no scope label


@pytest.mark.slow
async def test_sparql_rdf_terms(sparql_backend: Backend, tmp_path):
    db_backend = sparql_backend
    store = await fresh(db_backend, tmp_path)
    ok = await store.write('INSERT DATA { kg:ann a kg:Person, schema:Person ; kg:name "Ann"@en ; kg:born '
                           '"1990-01-02"^^xsd:date ; kg:height 1.7 ; kg:tags "a", "b" ; kg:KNOWS [ kg:name "Bob" ] . '
                           '<http://example.org/x> kg:SEES kg:ann . }')
    assert ok.ok, ok.error
    snap = await store.snapshot()
    ann = next(n for n in snap["nodes"] if n["id"] == "ann")
    assert ann["labels"] == ["Person", "schema:Person"]
    assert ann["properties"] == {"born": {"@value": "1990-01-02", "@type": "xsd:date"}, "height": 1.7,
                                 "name": {"@value": "Ann", "@language": "en"}, "tags": ["a", "b"]}
    assert {(r["source"], r["type"], r["target"]) for r in snap["relationships"]} == {
        ("ann", "KNOWS", "_b1"), ("http://example.org/x", "SEES", "ann")}
    assert db_backend.db_snapshot(store) == snap
    named = await store.write("INSERT DATA { GRAPH kg:g { kg:a kg:p 1 } }")
    assert not named.ok and "default graph" in named.error
    for forbidden in ("LOAD <http://127.0.0.1:9/x>", "SELECT * WHERE { SERVICE <http://127.0.0.1:9/> { ?s ?p ?o } }"):
        assert "Rejected" in ((await store.write(forbidden)).error or "")
        assert "Rejected" in ((await store.read(forbidden)).error or "")


@pytest.mark.slow
async def test_a_write_that_fails_half_way_changes_nothing(cypher_backend: Backend, tmp_path):
    """Bolt: one transaction; FalkorDB: the statements that went through are undone from the snapshot."""
    store = await fresh(cypher_backend, tmp_path)
    assert (await store.write(CODE["cypher"]["write_array"])).ok
    before = await store.snapshot()
    result = await store.write("CREATE (:Extra {id: 'extra'});\nMATCH (n {id: 'array'}) SET n.bad = {nested: 1}")
    assert not result.ok and result.error
    assert cypher_backend.db_snapshot(store) == before and await store.snapshot() == before
