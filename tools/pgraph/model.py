"""The static knowledge graph every exploring workflow reads (ARK-V1, grounded Graph-CoT/ToT/GoT, Agent-G).

A static KG is a heterogeneous directed multigraph: nodes with an id, a type, a name and text features
(key → value); edges with a relation name and optional qualifiers (key → value); parallel edges are kept.
It is read-only once built.

:class:`StaticKG` is the one read-only interface the workflows use. A backend implements a handful of
primitives (look a node up, list a node's adjacency runs, read strings); everything built on them — the
triples of (node, relation) with stable short keys, neighbours and degrees per relation and direction,
ego-graphs up to radius 2, their intersection, verbalised reasoning paths, exports to the snapshot format —
is written once here, so the embedded compact store (:mod:`kgagents.tools.pgraph.compact`) and the Cypher databases
(:mod:`kgagents.tools.pgraph.cypher`) answer them identically.

Node ids are the graph's own (GRBench ids, STaRK indices, entity names for ARK-V1 and triple files); the
methods take and return them as strings. Looking up an id that is not in the graph gives an empty answer
(``node()`` is ``None``, lists are empty), never an exception, so an agent's invalid action becomes a clear
observation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO, TypedDict

from kgagents.core.errors import KGAgentsError
from kgagents.tools.kg.base import KGSnapshot, NodeRecord, RelationshipRecord

Direction = Literal["out", "in", "both"]

#: Length of an edge key; a key that collides with another edge of the same listing is lengthened.
KEY_LENGTH = 4


class GraphFormatError(KGAgentsError, ValueError):
    """A graph source is missing or malformed; the message says where and why."""


class GraphRef(TypedDict, total=False):
    """What a workflow's state holds of its graph: enough to reopen it, never the graph itself."""

    name: str
    """A display name (the imported graph's name, or the source file with its record id)."""
    location: str
    """The directory of the built graph (compact arrays, or the manifest of a database-backed graph)."""
    source: str
    """The source it was built from (a path, ``inline``), when it was built from one."""
    format: str
    record: str
    fingerprint: str
    """The graph's identity: a hash of its source content and build options."""
    backend: str
    """``neo4j`` or ``falkordb`` for a graph held in a database; absent for the compact store."""


@dataclass(frozen=True, slots=True)
class Node:
    """A node: its id, type (``""`` when the source has none) and name."""

    id: str
    type: str
    name: str


@dataclass(frozen=True, slots=True)
class Triple:
    """One directed edge ``(head, relation, tail, qualifiers)``.

    ``key`` is a short stable key, unique among the edges of one listing (the triples of one node and
    relation): the same edge gets the same key in every run and on every backend.
    """

    head: str
    relation: str
    tail: str
    qualifiers: Mapping[str, Any] = field(default_factory=dict)
    key: str = ""

    def as_ark(self) -> list[Any]:
        """The edge in ARK-V1 format ``[head, tail, {"relation": r, **qualifiers}]``."""
        return [self.head, self.tail, {"relation": self.relation, **self.qualifiers}]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-safe record of the edge (for states and traces)."""
        return {"key": self.key, "head": self.head, "relation": self.relation, "tail": self.tail,
                "qualifiers": dict(self.qualifiers)}

    def render(self) -> str:
        """``[key] (head, relation, tail) {qualifiers}`` for a prompt."""
        text = f"[{self.key}] ({self.head}, {self.relation}, {self.tail})" if self.key else \
            f"({self.head}, {self.relation}, {self.tail})"
        if self.qualifiers:
            text += " " + json.dumps(dict(self.qualifiers), ensure_ascii=False)
        return text


@dataclass(frozen=True, slots=True)
class Hop:
    """One step of a path: the relation followed, its direction, and the node reached."""

    relation: str
    direction: Literal["out", "in"]
    node: str


@dataclass(frozen=True, slots=True)
class ReasoningPath:
    """A path from a topic entity to a node reached, verbalised as ``{e} → {r} → … → {n}``."""

    start: str
    hops: tuple[Hop, ...]

    @property
    def end(self) -> str:
        return self.hops[-1].node if self.hops else self.start

    def text(self, name: Callable[[str], str] = str) -> str:
        """``e → r → n`` along an edge, ``e ← r ← n`` against one (the edge is ``n → r → e``)."""
        parts = [name(self.start)]
        for hop in self.hops:
            arrow = "→" if hop.direction == "out" else "←"
            parts += [arrow, hop.relation, arrow, name(hop.node)]
        return " ".join(parts)


@dataclass
class EgoGraph:
    """The nodes within ``radius`` hops of some seeds along some relations, with one shortest path to each."""

    seeds: list[str]
    radius: int
    relations: list[str] | None
    hops: dict[str, int]
    """Every node reached (seeds included) and its distance."""
    paths: dict[str, ReasoningPath]
    """One shortest path from a seed to each node reached (seeds have none)."""
    truncated: bool = False
    """True when ``max_nodes`` stopped the search before the radius was exhausted."""

    @property
    def nodes(self) -> list[str]:
        return list(self.hops)

    def reached(self) -> list[str]:
        """The nodes reached, seeds excluded, nearest first."""
        return [n for n, d in sorted(self.hops.items(), key=lambda item: item[1]) if d > 0]


@dataclass(frozen=True)
class GraphStats:
    """Counts and vocabularies of a graph (``kgagents graph info``)."""

    nodes: int
    edges: int
    heads: int
    relations: list[str]
    types: list[str]
    feature_keys: list[str]
    qualifier_keys: list[str]
    extra: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------------------
# Edge keys
# ----------------------------------------------------------------------------------------------------------
def _content_hash(head: str, relation: str, tail: str, qualifiers: Mapping[str, Any], occurrence: int) -> str:
    canonical = json.dumps([head, relation, tail, sorted((str(k), str(v)) for k, v in qualifiers.items()),
                            occurrence], ensure_ascii=False)
    return hashlib.sha1(canonical.encode("utf-8")).hexdigest()


def keyed(edges: Iterable[tuple[str, str, str, Mapping[str, Any]]]) -> list[Triple]:
    """Triples with their keys: a content hash (with the occurrence among identical parallel edges) cut to
    :data:`KEY_LENGTH` characters, lengthened where two edges of the listing would share a key. A key depends
    only on its edge and the identical edges before it, so it is stable across runs, opens and backends."""
    out: list[Triple] = []
    used: set[str] = set()
    seen: dict[str, int] = {}
    for head, relation, tail, qualifiers in edges:
        base = _content_hash(head, relation, tail, qualifiers, 0)
        occurrence = seen.get(base, 0)
        seen[base] = occurrence + 1
        digest = base if occurrence == 0 else _content_hash(head, relation, tail, qualifiers, occurrence)
        length = KEY_LENGTH
        while digest[:length] in used and length < len(digest):
            length += 1
        used.add(digest[:length])
        out.append(Triple(head, relation, tail, dict(qualifiers), digest[:length]))
    return out


# ----------------------------------------------------------------------------------------------------------
# The interface
# ----------------------------------------------------------------------------------------------------------
class StaticKG:
    """The read-only interface of a static KG (see the module docstring).

    A backend implements the primitives in the first block; node *handles* are whatever the backend finds
    cheapest (integers for the compact store, ids for a database), and never leave the backend.
    """

    ref: GraphRef

    @property
    def meta(self) -> dict[str, Any]:
        """What the graph's loader recorded of its source (e.g. ``{"stark": {"dataset": "mag", ...}}``); empty when
        it recorded nothing."""
        return {}

    # --- primitives (backends) ---------------------------------------------------------------------------
    def _handle(self, node_id: str) -> Hashable | None:
        """The handle of a node id, ``None`` when the graph has no such node."""
        raise NotImplementedError

    def _handles_named(self, name: str) -> Sequence[Hashable]:
        raise NotImplementedError

    def _node_of(self, handle: Hashable) -> Node:
        raise NotImplementedError

    def _id_of(self, handle: Hashable) -> str:
        return self._node_of(handle).id

    def _features_of(self, handle: Hashable) -> dict[str, Any]:
        raise NotImplementedError

    def _runs(self, handle: Hashable, direction: Literal["out", "in"]) -> list[tuple[str, int]]:
        """The node's relations in one direction, in order of first appearance, with their edge counts."""
        raise NotImplementedError

    def _run_edges(self, handle: Hashable, relation: str, direction: Literal["out", "in"], *,
                   limit: int | None = None) -> Sequence[tuple[Hashable, Mapping[str, Any]]]:
        """The other ends (handles) and qualifiers of the node's edges of one relation and direction, in source
        order (parallel edges included)."""
        raise NotImplementedError

    def stats(self) -> GraphStats:
        raise NotImplementedError

    def nearest_nodes(self, text: str, k: int = 5, *, field: str = "name", among: Iterable[str] | None = None,
                      types: Iterable[str] | None = None, heads_only: bool = False,
                      embedder: Any = None, kind: str | None = None,
                      vector: Any = None) -> list[tuple[str, float]]:
        """The ``k`` node ids whose ``field`` (``name`` or ``text``) embeds closest to ``text`` (or to the query
        embedding ``vector``), with cosine scores, best first; restricted to the ids in ``among``, the node
        ``types``, or nodes with outgoing edges (``heads_only``) when asked. ``kind``: ``flat`` for exact search,
        ``ivf`` for the approximate index, ``None`` for what the graph's size gives
        (:mod:`kgagents.tools.pgraph.vectors`)."""
        raise NotImplementedError

    def nearest_relations(self, text: str, k: int = 5, *, among: Iterable[str] | None = None,
                          embedder: Any = None) -> list[tuple[str, float]]:
        """The ``k`` relation names closest to ``text`` (restricted to ``among``), with cosine scores."""
        raise NotImplementedError

    def schema(self) -> list[tuple[str, str, str, int]]:
        """The (head type, relation, tail type, edge count) patterns of the edges, most frequent first."""
        raise NotImplementedError

    def type_features(self) -> dict[str, list[str]]:
        """The feature keys that nodes of each type have."""
        raise NotImplementedError

    def iter_nodes(self) -> Iterator[Node]:
        raise NotImplementedError

    def iter_triples(self) -> Iterator[Triple]:
        """Every edge (without keys), grouped by head node."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the backend holds (files, connections)."""

    # --- nodes -----------------------------------------------------------------------------------------------
    def node(self, node_id: str) -> Node | None:
        """The node with this id, or ``None``."""
        handle = self._handle(str(node_id))
        return None if handle is None else self._node_of(handle)

    def has_node(self, node_id: str) -> bool:
        return self._handle(str(node_id)) is not None

    def nodes_named(self, name: str) -> list[Node]:
        """The nodes whose name is exactly ``name`` (names need not be unique)."""
        return [self._node_of(h) for h in self._handles_named(name)]

    def node_type(self, node_id: str) -> str | None:
        node = self.node(node_id)
        return None if node is None else node.type

    def features(self, node_id: str) -> dict[str, Any]:
        """Every feature of the node (``{}`` for an unknown node)."""
        handle = self._handle(str(node_id))
        return {} if handle is None else self._features_of(handle)

    def feature(self, node_id: str, key: str) -> Any:
        """One feature; ``KeyError`` naming the node's features when it has no such feature."""
        values = self.features(node_id)
        if key not in values:
            raise KeyError(f"node {node_id!r} has no feature {key!r}; its features: "
                           f"{', '.join(values) or '(none)'}")
        return values[key]

    def node_text(self, node_id: str, *, max_chars: int = 2000) -> str:
        """The node as one text: its name, type and features (what the ``text`` embedding field holds)."""
        handle = self._handle(str(node_id))
        return "" if handle is None else self._text_of(handle, max_chars)

    def _text_of(self, handle: Hashable, max_chars: int | None = 2000) -> str:
        node = self._node_of(handle)
        features = self._features_of(handle)
        if isinstance(features.get("text"), str) and features["text"].strip():
            text = features["text"]  # a document (STaRK-style KBs)
        else:
            parts = [node.name + (f" ({node.type})" if node.type else "")]
            parts += [f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
                      for k, v in features.items() if not (isinstance(v, str) and v == node.name)]
            text = "; ".join(parts)
        return text if max_chars is None else text[:max_chars]

    def definition(self, *, max_patterns: int = 60) -> str:
        """The graph's definition for a prompt: its node types with their features, and which relations link
        which types (Graph-CoT's "graph definition", written from the graph itself)."""
        stats = self.stats()
        features = self.type_features()
        lines = [f"The graph has {stats.nodes} nodes and {stats.edges} edges."]
        types = [t for t in stats.types if t] or [""]
        for t in types:
            keys = features.get(t, [])
            label = f"{t} nodes" if t else "Nodes"
            lines.append(f"{label} have a name" + (f" and the features: {', '.join(keys)}." if keys else "."))
        patterns = self.schema()
        if patterns:
            lines.append("Edges (head node type -[edge type]-> tail node type):")
            lines += [f"  {h or 'node'} -[{r}]-> {t or 'node'}" for h, r, t, _ in patterns[:max_patterns]]
            if len(patterns) > max_patterns:
                lines.append(f"  … and {len(patterns) - max_patterns} more patterns")
        return "\n".join(lines)

    # --- adjacency ---------------------------------------------------------------------------------------------
    def relations_of(self, node_id: str, direction: Direction = "out") -> list[str]:
        """The node's relations in ``direction``, each once, in order of first appearance."""
        handle = self._handle(str(node_id))
        if handle is None:
            return []
        names: dict[str, None] = {}
        for d in _directions(direction):
            for relation, _ in self._runs(handle, d):
                names.setdefault(relation)
        return list(names)

    def is_head(self, node_id: str) -> bool:
        """True when the node has at least one outgoing edge (ARK-V1's head entities)."""
        handle = self._handle(str(node_id))
        return handle is not None and bool(self._runs(handle, "out"))

    def degree(self, node_id: str, relation: str | None = None, direction: Direction = "out") -> int:
        """How many edges of ``relation`` (any when ``None``) the node has in ``direction``."""
        handle = self._handle(str(node_id))
        if handle is None:
            return 0
        return sum(count for d in _directions(direction) for r, count in self._runs(handle, d)
                   if relation is None or r == relation)

    def neighbours(self, node_id: str, relation: str | None = None, direction: Direction = "out", *,
                   limit: int | None = None) -> list[str]:
        """The node ids at the other end of the node's edges of ``relation`` (all when ``None``), in source order,
        once per edge (parallel edges repeat a neighbour)."""
        handle = self._handle(str(node_id))
        if handle is None:
            return []
        out: list[str] = []
        for d in _directions(direction):
            for rel in self._relations_to_read(handle, relation, d):
                if limit is not None and len(out) >= limit:
                    return out
                ends = self._run_edges(handle, rel, d, limit=None if limit is None else limit - len(out))
                out += [self._id_of(h) for h, _ in ends]
        return out

    def _relations_to_read(self, handle: Hashable, relation: str | None, direction: Literal["out", "in"]
                           ) -> list[str]:
        return [r for r, _ in self._runs(handle, direction)] if relation is None else [relation]

    def edges(self, node_id: str, relation: str | None = None, direction: Direction = "out", *,
              limit: int | None = None) -> list[Triple]:
        """The node's edges as triples (outgoing ones with their keys)."""
        return [t for _, t in self._edges(str(node_id), relation, direction, limit=limit)]

    def triples(self, node_id: str, relation: str) -> list[Triple]:
        """Every edge ``(node, relation, *, *)``, parallel edges included, in source order, with keys."""
        return self.edges(node_id, relation, "out")

    def _edges(self, node_id: str, relation: str | None, direction: Direction, *,
               limit: int | None = None) -> list[tuple[str, Triple]]:
        handle = self._handle(node_id)
        if handle is None:
            return []
        out: list[tuple[str, Triple]] = []
        for d in _directions(direction):
            for rel in self._relations_to_read(handle, relation, d):
                remaining = None if limit is None else limit - len(out)
                if remaining is not None and remaining <= 0:
                    return out
                ends = self._run_edges(handle, rel, d, limit=remaining)
                if d == "out":
                    rows = [(node_id, rel, self._id_of(h), q) for h, q in ends]
                    out += [("out", t) for t in keyed(rows)]
                else:
                    out += [("in", Triple(self._id_of(h), rel, node_id, dict(q))) for h, q in ends]
        return out

    # --- ego-graphs and reasoning paths (Agent-G) ----------------------------------------------------------
    def ego_graph(self, seeds: Iterable[str], relations: Iterable[str] | None = None, *, radius: int = 2,
                  direction: Direction = "both", max_nodes: int | None = 20_000) -> EgoGraph:
        """The nodes within ``radius`` (≤ 2 for Agent-G; any is allowed) hops of the seeds along ``relations``
        (all when ``None``), breadth first, with one shortest path to each node. Unknown seeds are skipped;
        ``max_nodes`` bounds the search around hubs (``truncated`` says when it did; ``None``: no bound)."""
        wanted = None if relations is None else set(relations)
        seed_ids = [s for s in dict.fromkeys(str(s) for s in seeds) if self._handle(s) is not None]
        hops: dict[str, int] = {s: 0 for s in seed_ids}
        paths: dict[str, ReasoningPath] = {}
        handles: dict[str, Hashable] = {s: self._handle(s) for s in seed_ids}
        frontier = list(seed_ids)
        truncated = False
        for depth in range(1, max(0, radius) + 1):
            following: list[str] = []
            for current in frontier:
                handle = handles[current]
                for d in _directions(direction):
                    for rel, _ in self._runs(handle, d):
                        if wanted is not None and rel not in wanted:
                            continue
                        for other, _q in self._run_edges(handle, rel, d):
                            other_id = self._id_of(other)
                            if other_id in hops:
                                continue
                            if max_nodes is not None and len(hops) >= max_nodes:
                                truncated = True
                                break
                            hops[other_id] = depth
                            handles[other_id] = other
                            prefix = paths[current].hops if current in paths else ()
                            start = paths[current].start if current in paths else current
                            paths[other_id] = ReasoningPath(start, (*prefix, Hop(rel, d, other_id)))
                            following.append(other_id)
            frontier = following
            if not frontier:
                break
        return EgoGraph(seed_ids, radius, None if wanted is None else sorted(wanted), hops, paths, truncated)

    @staticmethod
    def intersection(egos: Sequence[EgoGraph]) -> list[str]:
        """The nodes every ego-graph reached (seeds of each excluded), nearest first by their summed distance."""
        if not egos:
            return []
        common = set(egos[0].reached())
        for ego in egos[1:]:
            common &= set(ego.reached())
        return sorted(common, key=lambda n: (sum(e.hops[n] for e in egos), n))

    def reasoning_paths(self, seeds: Iterable[str], relations: Iterable[str] | None = None, *, radius: int = 2,
                        direction: Direction = "both", targets: Iterable[str] | None = None,
                        max_nodes: int | None = 20_000) -> list[ReasoningPath]:
        """The verbalisable paths from each seed to the nodes its ego-graph reached (to ``targets`` only when
        given, e.g. the intersection of several ego-graphs), one shortest path per (seed, node)."""
        wanted = None if targets is None else set(targets)
        out: list[ReasoningPath] = []
        for seed in dict.fromkeys(str(s) for s in seeds):
            ego = self.ego_graph([seed], relations, radius=radius, direction=direction, max_nodes=max_nodes)
            out += [ego.paths[n] for n in ego.reached() if wanted is None or n in wanted]
        return out

    def verbalise(self, path: ReasoningPath, *, ids: bool = False) -> str:
        """A path with node names instead of ids (``{e} → {r} → … → {n}``); ``ids`` adds each node's id where it
        differs from its name."""
        return path.text(self.display_name if ids else self._name)

    def _name(self, node_id: str) -> str:
        node = self.node(node_id)
        return node_id if node is None else node.name

    def display_name(self, node_id: str) -> str:
        node = self.node(node_id)
        if node is None:
            return node_id
        return node.name if node.name == node.id else f"{node.name} [{node.id}]"

    # --- exports ------------------------------------------------------------------------------------------------
    def export(self, node_ids: Iterable[str] | None = None, *, max_edges_per_node: int | None = None
               ) -> KGSnapshot:
        """The graph (or the subgraph induced by ``node_ids``) in the project's snapshot format: nodes with their
        type as label and their name and features as properties, edges with their relation and qualifiers."""
        if node_ids is None:
            nodes = list(self.iter_nodes())
            triples = list(self.iter_triples())
        else:
            nodes = [n for n in (self.node(i) for i in dict.fromkeys(str(i) for i in node_ids)) if n is not None]
            keep = {n.id for n in nodes}
            triples = [t for n in nodes for t in self.edges(n.id, limit=max_edges_per_node) if t.tail in keep]
        return {"nodes": [self._node_record(n) for n in nodes],
                "relationships": [_edge_record(t) for t in triples]}

    def export_jsonl(self, out: TextIO) -> int:
        """Stream the whole graph as snapshot JSON lines (the format of
        :func:`kgagents.tools.kg.base.snapshot_to_jsonl`); returns the number of lines."""
        lines = 0
        for node in self.iter_nodes():
            out.write(json.dumps({"kind": "node", **self._node_record(node)}, ensure_ascii=False, sort_keys=True)
                      + "\n")
            lines += 1
        for triple in self.iter_triples():
            out.write(json.dumps({"kind": "relationship", **_edge_record(triple)}, ensure_ascii=False,
                                 sort_keys=True) + "\n")
            lines += 1
        return lines

    def _node_record(self, node: Node) -> NodeRecord:
        return {"id": node.id, "labels": [node.type] if node.type else [],
                "properties": {"name": node.name, **self.features(node.id)}}

    def neighbourhood(self, node_id: str, *, radius: int = 1, max_nodes: int = 200) -> KGSnapshot:
        """The node and what lies within ``radius`` hops (both directions), as a snapshot (``graph show``)."""
        ego = self.ego_graph([node_id], radius=radius, max_nodes=max_nodes)
        return self.export(ego.nodes, max_edges_per_node=max_nodes)

    def describe(self, node_id: str, *, max_per_relation: int = 10) -> str:
        """A node as text: type, name, features, and its edges per relation in both directions."""
        node = self.node(node_id)
        if node is None:
            return f"no node with id {node_id!r}"
        lines = [f"{node.id}  type: {node.type or '(none)'}  name: {node.name}"]
        for key, value in self.features(node_id).items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines.append(f"  {key}: {text[:300]}{'…' if len(text) > 300 else ''}")
        for d, arrow in (("out", "→"), ("in", "←")):
            for relation in self.relations_of(node_id, d):  # type: ignore[arg-type]
                count = self.degree(node_id, relation, d)  # type: ignore[arg-type]
                ends = self.neighbours(node_id, relation, d, limit=max_per_relation)  # type: ignore[arg-type]
                more = f" … ({count - len(ends)} more)" if count > len(ends) else ""
                lines.append(f"  {arrow} {relation} ({count}): " + ", ".join(self.display_name(e) for e in ends) + more)
        return "\n".join(lines)


def _edge_record(triple: Triple) -> RelationshipRecord:
    return {"type": triple.relation, "source": triple.head, "target": triple.tail,
            "properties": dict(triple.qualifiers)}


def _directions(direction: Direction) -> tuple[Literal["out", "in"], ...]:
    if direction == "out":
        return ("out",)
    if direction == "in":
        return ("in",)
    if direction == "both":
        return ("out", "in")
    raise ValueError(f"direction must be 'out', 'in' or 'both', not {direction!r}")
