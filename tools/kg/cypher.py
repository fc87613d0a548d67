"""What the Cypher backends (Bolt servers through the ``neo4j`` driver, FalkorDB) share besides the statement checks.

- the node-id convention: every node carries a unique string property ``id`` (the id the prompt shows);
  nodes written without one get a readable id (``person_1``) right after the write, in a deterministic way;
- the snapshot export and restore queries, written in the Cypher subset that Neo4j, Memgraph, ArcadeDB and
  FalkorDB all accept (no APOC, no ``elementId()`` on FalkorDB, no ``EXISTS {}``);
- turning driver values (nodes, relationships, paths, temporal and spatial values) into compact JSON for the LLM.

The dialects are in :mod:`kgagents.tools.kg.cypher_dialects`, the tokenizer in :mod:`kgagents.tools.kg.cypher_text` and
the checks and scope rewrite of LLM-written statements in :mod:`kgagents.tools.kg.cypher_scope`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kgagents.tools.kg.base import KGSnapshot, NodeRecord, RelationshipRecord

MAX_RESULT_ROWS = 200


def quote_name(name: str) -> str:
    """A label, relationship type or property key as a backtick-quoted Cypher name."""
    return "`" + str(name).replace("`", "``") + "`"


# ------------------------------------------------------------------------------------------------------------
# Node ids, snapshots, restore
# ------------------------------------------------------------------------------------------------------------
def slug(text: str) -> str:
    value = re.sub(r"[^0-9a-zA-Z]+", "_", text).strip("_").lower()
    return value[:30] or "node"


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def plain_value(value: Any) -> Any:
    """A property value as JSON: temporal values become ISO strings, spatial points Cypher's ``point({...})``
    text (a point is a tuple to the driver, but its coordinates alone would lose what it is)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    srid = getattr(value, "srid", None)
    if srid is not None and isinstance(value, tuple):
        names = ("x", "y", "z")[:len(value)]
        return "point({" + ", ".join([f"srid: {srid}"] + [f"{k}: {v!r}" for k, v in zip(names, value,
                                                                                        strict=False)]) + "})"
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain_value(v) for k, v in value.items()}
    iso = getattr(value, "iso_format", None) or getattr(value, "isoformat", None)
    if callable(iso):
        return iso()
    return str(value)


@dataclass
class NodeRow:
    iid: Any  # the database's own id (elementId on Bolt, id() on FalkorDB)
    id: Any
    labels: list[str]
    props: dict[str, Any]


@dataclass
class RelRow:
    source: Any  # internal ids
    target: Any
    type: str
    props: dict[str, Any]


def plan_ids(nodes: list[NodeRow], hidden_labels: Iterable[str] = ()) -> tuple[dict[Any, str], list[str]]:
    """Which nodes need their ``id`` set (internal id -> new id) and the problems that forbid the write.

    Nodes without an ``id`` get ``<first label>_<n>`` (the smallest unused n), in a deterministic order; a
    non-string id becomes its string form; two nodes with one id is an error.
    """
    assign: dict[Any, str] = {}
    used: dict[str, int] = {}
    for row in nodes:
        if row.id is None:
            continue
        ident = row.id if isinstance(row.id, str) else (canonical(row.id) if isinstance(row.id, (list, dict))
                                                        else str(plain_value(row.id)))
        if ident != row.id:
            assign[row.iid] = ident
        used[ident] = used.get(ident, 0) + 1
    problems = [f"{count} nodes have the id {ident!r}: ids must be unique (reuse the existing node instead)"
                for ident, count in used.items() if count > 1]
    hidden = set(hidden_labels)
    missing = sorted((r for r in nodes if r.id is None),
                     key=lambda r: (sorted(lb for lb in r.labels if lb not in hidden), canonical(r.props), str(r.iid)))
    counters: dict[str, int] = {}
    for row in missing:
        labels = sorted(lb for lb in row.labels if lb not in hidden)
        base = slug(labels[0]) if labels else "node"
        k = counters.get(base, 0)
        while True:
            k += 1
            candidate = f"{base}_{k}"
            if candidate not in used:
                break
        counters[base] = k
        used[candidate] = 1
        assign[row.iid] = candidate
    return assign, problems


def build_snapshot(nodes: list[NodeRow], rels: list[RelRow], assign: dict[Any, str] | None = None,
                   hidden_labels: Iterable[str] = ()) -> KGSnapshot:
    """The snapshot of exported rows (``assign`` gives the ids planned by :func:`plan_ids`), in a canonical
    order: nodes by id, relationships by (source, type, target, properties)."""
    assign = assign or {}
    hidden = set(hidden_labels)
    ids: dict[Any, str] = {}
    out_nodes: list[NodeRecord] = []
    for row in nodes:
        ident = assign.get(row.iid, row.id if isinstance(row.id, str) else str(row.id))
        ids[row.iid] = ident
        props = {str(k): plain_value(v) for k, v in row.props.items() if k != "id" and v is not None}
        out_nodes.append({"id": ident, "labels": sorted(lb for lb in row.labels if lb not in hidden),
                          "properties": dict(sorted(props.items()))})
    out_rels: list[RelationshipRecord] = []
    for rel in rels:
        if rel.source not in ids or rel.target not in ids:
            continue
        props = {str(k): plain_value(v) for k, v in rel.props.items() if v is not None}
        out_rels.append({"type": rel.type, "source": ids[rel.source], "target": ids[rel.target],
                         "properties": dict(sorted(props.items()))})
    out_nodes.sort(key=lambda r: r["id"])
    out_rels.sort(key=lambda r: (r["source"], r["type"], r["target"], canonical(r["properties"])))
    return {"nodes": out_nodes, "relationships": out_rels}


def snapshot_digest(snapshot: KGSnapshot) -> str:
    """A digest of a snapshot's content, independent of the order of its nodes and relationships."""
    nodes = sorted(canonical([n["id"], sorted(n["labels"]), n["properties"]]) for n in snapshot["nodes"])
    rels = sorted(canonical([r["source"], r["type"], r["target"], r["properties"]]) for r in snapshot["relationships"])
    return hashlib.sha256(canonical([nodes, rels]).encode("utf-8")).hexdigest()


def restore_statements(snapshot: KGSnapshot, scope_label: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Statements that create ``snapshot`` in an empty graph (or scope): nodes grouped by label set,
    relationships grouped by type, each group one ``UNWIND``."""
    scope = ":" + quote_name(scope_label) if scope_label else ""
    statements: list[tuple[str, dict[str, Any]]] = []
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for node in snapshot["nodes"]:
        props = {k: v for k, v in node["properties"].items() if v is not None}
        props["id"] = node["id"]
        groups.setdefault(tuple(node["labels"]), []).append(props)
    for labels, rows in groups.items():
        label_text = "".join(":" + quote_name(lb) for lb in labels)
        statements.append((f"UNWIND $rows AS row CREATE (n{label_text}{scope}) SET n = row", {"rows": rows}))
    by_type: dict[str, list[dict[str, Any]]] = {}
    for rel in snapshot["relationships"]:
        by_type.setdefault(rel["type"], []).append({"s": rel["source"], "t": rel["target"],
                                                    "props": dict(rel["properties"])})
    for rel_type, rows in by_type.items():
        query = (f"UNWIND $rows AS row MATCH (a{scope} {{id: row.s}}), (b{scope} {{id: row.t}}) "
                 f"CREATE (a)-[r:{quote_name(rel_type)}]->(b) SET r = row.props")
        statements.append((query, {"rows": rows}))
    return statements


# ------------------------------------------------------------------------------------------------------------
# Read results for the LLM
# ------------------------------------------------------------------------------------------------------------
def compact_result(rows: list[dict[str, Any]], convert: Any) -> Any:
    """Rows as a list of ``{column: value}`` with driver objects converted by ``convert``; long results are
    cut to :data:`MAX_RESULT_ROWS` rows with a note."""
    out = [{k: convert(v) for k, v in row.items()} for row in rows[:MAX_RESULT_ROWS]]
    if len(rows) > MAX_RESULT_ROWS:
        out.append({"note": f"{len(rows) - MAX_RESULT_ROWS} more rows were cut"})
    return out

