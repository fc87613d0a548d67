"""A static property graph: directed edges ``(h, r, t, φ)`` with a relation name and key–value qualifiers.

This is the knowledge graph that exploring agents (ARK-V1, Graph-CoT, Agent-G) walk. It is read-only once built,
keeps parallel edges (several edges between the same two entities, even identical ones, never overwrite each
other) and answers the lookups those agents need:

- :meth:`PropertyGraph.heads` — the entities that have at least one outgoing edge (ARK-V1's ``E_head``);
- :meth:`PropertyGraph.relations_of` — the outgoing relations of an entity;
- :meth:`PropertyGraph.triples` — the edges for an (entity, relation) pair, each with a short stable key;
- :meth:`PropertyGraph.nearest_entities` / :meth:`PropertyGraph.nearest_relations` — fuzzy lookup through an
  embedding index (:mod:`tools.pgraph.embeddings`), built on first use for this graph only.

The ARK-V1 exchange format is a list of ``[head, tail, {"relation": r, qualifier: value, ...}]``
(:meth:`PropertyGraph.from_ark`); :func:`load_ark_records` reads files of such graphs (one record as JSON, a list of
records, or JSON lines with an ``id`` per record).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.pgraph.embeddings import Embedder, EmbeddingIndex

#: Length of an edge key; keys that collide with an earlier edge of the same graph are lengthened.
KEY_LENGTH = 4


class GraphFormatError(ValueError):
    """A graph (or a graph file) is not in the ARK-V1 format; the message says where and why."""


@dataclass(frozen=True, slots=True)
class Edge:
    """One directed edge ``(head, relation, tail, qualifiers)``; ``key`` is unique within its graph."""

    head: str
    relation: str
    tail: str
    qualifiers: Mapping[str, Any] = field(default_factory=dict)
    key: str = ""
    index: int = 0
    """Position of the edge in the source list."""

    def as_ark(self) -> list[Any]:
        """The edge in ARK-V1 format ``[head, tail, {"relation": r, **qualifiers}]``."""
        return [self.head, self.tail, {"relation": self.relation, **self.qualifiers}]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-safe record of the edge (for states and traces)."""
        return {"key": self.key, "head": self.head, "relation": self.relation, "tail": self.tail,
                "qualifiers": dict(self.qualifiers)}

    def render(self) -> str:
        """``[key] (head, relation, tail) {qualifiers}`` for a prompt."""
        text = f"[{self.key}] ({self.head}, {self.relation}, {self.tail})"
        if self.qualifiers:
            text += " " + json.dumps(dict(self.qualifiers), ensure_ascii=False)
        return text


def _content_hash(head: str, relation: str, tail: str, qualifiers: Mapping[str, Any], occurrence: int) -> str:
    canonical = json.dumps([head, relation, tail, sorted((str(k), str(v)) for k, v in qualifiers.items()),
                            occurrence], ensure_ascii=False)
    return hashlib.sha1(canonical.encode("utf-8")).hexdigest()


class PropertyGraph:
    """A read-only property graph with head/relation/triple lookups and a lazily built embedding index."""

    def __init__(self, edges: Iterable[tuple[str, str, str, Mapping[str, Any]]], *,
                 embedder: Embedder | None = None, name: str = "graph") -> None:
        """Build from ``(head, relation, tail, qualifiers)`` tuples (see :meth:`from_ark` for the file format).

        ``embedder`` serves the fuzzy lookups; ``None`` loads the packaged model when one is first needed.
        """
        self.name = name
        self.embedder = embedder
        built: list[Edge] = []
        keys: set[str] = set()
        seen: dict[str, int] = {}
        self._out: dict[str, dict[str, list[int]]] = {}
        entities: dict[str, None] = {}
        relations: dict[str, None] = {}
        for i, (head, relation, tail, qualifiers) in enumerate(edges):
            quals = dict(qualifiers)
            base = _content_hash(head, relation, tail, quals, 0)
            occurrence = seen.get(base, 0)
            seen[base] = occurrence + 1
            digest = base if occurrence == 0 else _content_hash(head, relation, tail, quals, occurrence)
            length = KEY_LENGTH
            while digest[:length] in keys and length < len(digest):
                length += 1
            key = digest[:length]
            keys.add(key)
            built.append(Edge(head, relation, tail, quals, key, i))
            self._out.setdefault(head, {}).setdefault(relation, []).append(i)
            entities.setdefault(head)
            entities.setdefault(tail)
            relations.setdefault(relation)
        self.edges: tuple[Edge, ...] = tuple(built)
        self._by_key = {e.key: e for e in built}
        self._entities = list(entities)
        self._entity_set = set(entities)
        self._relations = list(relations)
        self._entity_index: EmbeddingIndex | None = None
        self._head_index: EmbeddingIndex | None = None
        self._relation_index: EmbeddingIndex | None = None

    # -- construction ------------------------------------------------------------------------------------------
    @classmethod
    def from_ark(cls, data: Any, *, embedder: Embedder | None = None, name: str = "graph") -> PropertyGraph:
        """Build from the ARK-V1 format ``[[head, tail, {"relation": r, qualifier: value, ...}], ...]``.

        Heads and tails must be strings (numbers are accepted and written as text); every edge needs a non-empty
        ``relation``. A malformed edge raises :class:`GraphFormatError` naming its position.
        """
        if not isinstance(data, Sequence) or isinstance(data, (str, bytes)):
            raise GraphFormatError(f"{name}: expected a list of [head, tail, {{\"relation\": ...}}] edges, "
                                   f"got {type(data).__name__}")
        return cls(_parse_ark_edges(data, name), embedder=embedder, name=name)

    def to_ark(self) -> list[list[Any]]:
        """The graph in ARK-V1 format (the inverse of :meth:`from_ark`)."""
        return [e.as_ark() for e in self.edges]

    def fingerprint(self) -> str:
        """A content hash of the graph (the same edges in the same order give the same fingerprint)."""
        digest = hashlib.sha1()
        for e in self.edges:
            digest.update(e.key.encode("ascii"))
            digest.update(b"\x00")
        return digest.hexdigest()[:16]

    # -- lookups -----------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.edges)

    def __repr__(self) -> str:
        return (f"PropertyGraph({self.name!r}: {len(self.edges)} edges, {len(self._entities)} entities, "
                f"{len(self._out)} heads, {len(self._relations)} relations)")

    def entities(self) -> list[str]:
        """Every entity (head or tail), in order of first appearance."""
        return list(self._entities)

    def heads(self) -> list[str]:
        """The entities with at least one outgoing edge, in order of first appearance."""
        return list(self._out)

    def relations(self) -> list[str]:
        """Every relation name, in order of first appearance."""
        return list(self._relations)

    def is_head(self, entity: str) -> bool:
        return entity in self._out

    def has_entity(self, entity: str) -> bool:
        return entity in self._entity_set

    def relations_of(self, entity: str) -> list[str]:
        """The outgoing relations of ``entity`` (each once, in order of first appearance); ``[]`` if none."""
        return list(self._out.get(entity, {}))

    def triples(self, entity: str, relation: str) -> list[Edge]:
        """Every edge ``(entity, relation, *, *)``, parallel edges included, in source order."""
        return [self.edges[i] for i in self._out.get(entity, {}).get(relation, [])]

    def outgoing(self, entity: str) -> list[Edge]:
        """Every outgoing edge of ``entity``."""
        return [self.edges[i] for rel in self._out.get(entity, {}).values() for i in rel]

    def edge(self, key: str) -> Edge | None:
        """The edge with this key, if any."""
        return self._by_key.get(key)

    # -- fuzzy lookup ------------------------------------------------------------------------------------------
    def _embedder(self) -> Embedder:
        if self.embedder is None:
            from tools.pgraph.embeddings import load_embedder

            self.embedder = load_embedder()
        return self.embedder

    def nearest_entities(self, text: str, k: int = 5, *, heads_only: bool = True) -> list[tuple[str, float]]:
        """The ``k`` entities (by default: head entities) whose names are closest to ``text``, with cosine scores."""
        if heads_only:
            if self._head_index is None:
                self._head_index = EmbeddingIndex(self.heads(), self._embedder())
            return self._head_index.search(text, k)
        if self._entity_index is None:
            self._entity_index = EmbeddingIndex(self._entities, self._embedder())
        return self._entity_index.search(text, k)

    def nearest_relations(self, text: str, k: int = 5, *, among: Sequence[str] | None = None
                          ) -> list[tuple[str, float]]:
        """The ``k`` relations closest to ``text``; ``among`` restricts them (e.g. to an entity's relations)."""
        if self._relation_index is None:
            self._relation_index = EmbeddingIndex(self._relations, self._embedder())
        return self._relation_index.search(text, k, among=among)


def _parse_ark_edges(data: Sequence[Any], name: str) -> list[tuple[str, str, str, dict[str, Any]]]:
    edges = []
    for i, item in enumerate(data):
        where = f"{name}: edge {i}"
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            raise GraphFormatError(f"{where}: expected [head, tail, {{\"relation\": ...}}], got {str(item)[:200]}")
        head, tail, props = item
        if not isinstance(props, Mapping):
            raise GraphFormatError(f"{where}: the third element must be an object with a \"relation\", "
                                   f"got {str(props)[:200]}")
        relation = props.get("relation")
        for label, value in (("head", head), ("tail", tail), ("relation", relation)):
            if isinstance(value, bool) or not isinstance(value, (str, int, float)) or str(value).strip() == "":
                raise GraphFormatError(f"{where}: the {label} must be a non-empty string, got {value!r}")
        qualifiers = {str(k): v for k, v in props.items() if k != "relation"}
        edges.append((str(head), str(relation), str(tail), qualifiers))
    return edges


# ---------------------------------------------------------------------------------------------------------------
# Files of graphs
# ---------------------------------------------------------------------------------------------------------------
def load_ark_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of an ARK-V1 graph file.

    Accepted: one record ``{"question": ..., "graph": [...]}`` (``example_data.json``), a list of records, a bare
    graph (a list of edges), or JSON lines with one record per line (``customized_dataset.jsonl``).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GraphFormatError(f"cannot read the graph file {path}: {exc}") from exc
    if path.suffix == ".jsonl":
        records = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError as exc:
                raise GraphFormatError(f"{path}, line {n}: not valid JSON: {exc}") from exc
    else:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise GraphFormatError(f"{path}: not valid JSON: {exc}") from exc
        if isinstance(data, dict):
            records = [data]
        elif isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
            records = data
        elif isinstance(data, list):
            records = [{"graph": data}]
        else:
            raise GraphFormatError(f"{path}: expected a record, a list of records or a list of edges")
    for n, record in enumerate(records):
        if not isinstance(record, dict) or "graph" not in record:
            raise GraphFormatError(f"{path}: record {n} has no \"graph\"")
    return records


def load_ark_record(path: str | Path, record_id: str | None = None, *, question: str | None = None
                    ) -> dict[str, Any]:
    """One record of a graph file: by ``id``, else by question text, else the only one."""
    path = Path(path)
    if record_id is not None and path.suffix == ".jsonl":
        # JSON lines: parse only the lines that can hold the id (a file of many large graphs)
        needle = json.dumps(str(record_id))
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise GraphFormatError(f"cannot read the graph file {path}: {exc}") from exc
        for n, line in enumerate(lines, 1):
            if needle not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise GraphFormatError(f"{path}, line {n}: not valid JSON: {exc}") from exc
            if isinstance(record, dict) and str(record.get("id")) == str(record_id) and "graph" in record:
                return record
        raise GraphFormatError(f"{path}: no record with id {record_id!r}")
    records = load_ark_records(path)
    if record_id is not None:
        found = [r for r in records if str(r.get("id")) == str(record_id)]
        if not found:
            raise GraphFormatError(f"{path}: no record with id {record_id!r}")
        return found[0]
    if len(records) == 1:
        return records[0]
    if question is not None:
        found = [r for r in records if str(r.get("question", "")).strip() == question.strip()]
        if len(found) == 1:
            return found[0]
    raise GraphFormatError(f"{path} holds {len(records)} graphs: say which one (its id)")
