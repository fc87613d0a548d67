"""Entity names, ids, labels, relationship types, property keys and thread ids with Cypher and SPARQL
metacharacters go through every query kgagents builds itself (snapshot restores, clears, exports, the scope
rewrite, per-run graph names) as data: they come back exactly, and another run's KG stays as it was."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from kgagents.tools.kg.base import KGSnapshot, KGStore
from kgagents.tools.kg.cypher import snapshot_digest
from tests.kg.conftest import CODE, Backend

HOSTILE = [
    "a'b\"c\\d",
    "x}) DETACH DELETE n //",
    "`tick`]->(m) DETACH DELETE m //",
    "'; MATCH (m) DETACH DELETE m; //",
    "<http://x> ; DROP ALL ; INSERT DATA { <a> <b> <c> }",
    "} } ; CLEAR ALL # \"\"\" '''",
    "$rows {rows} ${id}",
    "line\nbreak\r\ttab",
    "ünïcödé 😀 中文 \u202e",
]


def hostile_snapshot(names: list[str], identifier: Callable[[str], str] = str) -> KGSnapshot:
    """One node per name: the name as id and value, in its label and a property key; a chain of relationships
    with the names in their types and properties. ``identifier`` adapts a name for labels, types and keys
    (labels and types differ: ArcadeDB keeps both in one namespace)."""
    nodes = [{"id": name, "labels": [identifier(f"Label {name}")],
              "properties": {identifier(name): name, "text": f"{name} and {name}"}} for name in names]
    rels = [{"type": identifier(f"REL {names[i]}"), "source": names[i], "target": names[i + 1],
             "properties": {"why": names[i]}} for i in range(len(names) - 1)]
    return {"nodes": nodes, "relationships": rels}


def identifiers_of(backend: Backend) -> Callable[[str], str]:
    """FalkorDB has no escaped backticks in names (its parser refuses them, so its KGs never hold them)."""
    return (lambda name: name.replace("`", "´")) if backend.backend == "falkordb" else str


def values(snapshot: KGSnapshot) -> list[str]:
    """Every node's ``text`` property (kept exactly by every backend)."""
    return sorted(n["properties"]["text"] for n in snapshot["nodes"])


async def victim_of(backend: Backend, tmp_path: Path) -> tuple[str, KGStore, KGSnapshot]:
    """A suffix for this test's thread ids, and another run's KG with what it holds."""
    suffix = uuid.uuid4().hex[:6]
    victim = backend.open(f"victim-{suffix}", None, tmp_path / "v")
    assert (await victim.write(CODE[backend.language]["write_array"])).ok
    return suffix, victim, backend.db_snapshot(victim)


@pytest.mark.slow
async def test_hostile_names_restore_as_data_and_stay_in_their_run(backend: Backend, tmp_path):
    suffix, victim, kept = await victim_of(backend, tmp_path)
    names = HOSTILE
    snapshot = hostile_snapshot(names, identifiers_of(backend))
    for thread in HOSTILE[::3]:  # thread ids with metacharacters too: each gets its own graph / scope
        store = backend.open(f"{thread}-{suffix}", snapshot, tmp_path / "h")
        restored = backend.db_snapshot(store)
        assert values(restored) == values(snapshot)
        assert len(restored["nodes"]) == len(names) and len(restored["relationships"]) == len(names) - 1
        if backend.language != "sparql":  # SPARQL names are IRIs: a name that is no IRI is stored percent-encoded
            assert snapshot_digest(restored) == snapshot_digest(snapshot)
        again = backend.open(f"{thread}-{suffix}-again", restored, tmp_path / "h2")
        assert backend.db_snapshot(again) == restored  # what the store exports restores unchanged
        await store.clear()
        assert backend.db_snapshot(store)["nodes"] == []
        assert backend.db_snapshot(victim) == kept
        await again.clear()


QUOTED_WRITES = {
    "python": "G.add_node('e', label='Entity', name={name}, note={name})",
    "cypher": "CREATE (:Entity {{id: 'e', name: {name}, note: {name}}})",
    "sparql": "INSERT DATA {{ kg:e a kg:Entity ; kg:name {name} ; kg:note {name} . }}",
}


def quoted(name: str, language: str) -> str:
    """``name`` as a string literal of the language (JSON's escapes are valid in Cypher and SPARQL strings)."""
    return repr(name) if language == "python" else json.dumps(name, ensure_ascii=False)


@pytest.mark.slow
async def test_string_literals_with_metacharacters_in_llm_writes_are_kept_as_written(backend: Backend, tmp_path):
    """The scope rewrite (Bolt) and the statement splitting read string literals as literals."""
    suffix, victim, kept = await victim_of(backend, tmp_path)
    for name in HOSTILE:
        writer = backend.open(f"writer-{suffix}-{HOSTILE.index(name)}", None, tmp_path / "w")
        text = QUOTED_WRITES[backend.language].format(name=quoted(name, backend.language))
        result = await writer.write(text)
        assert result.ok, (name, result.error)
        [node] = backend.db_snapshot(writer)["nodes"]
        assert node["properties"]["name"] == name and node["properties"]["note"] == name
        assert backend.db_snapshot(victim) == kept
        await writer.clear()
