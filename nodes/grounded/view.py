"""The thought graph of a run as a snapshot (``kgagents show THREAD --kg``)."""

from __future__ import annotations

from typing import Any

from kgagents.nodes.grounded.chains import ordered
from kgagents.nodes.grounded.state import GroundedState
from kgagents.tools.kg.base import KGSnapshot, NodeRecord, RelationshipRecord


def thought_graph(state: GroundedState) -> KGSnapshot:
    """The run's thought graph in the project's snapshot format: one node per thought (labels: its kind and
    whether it was kept, pruned, final or the answer's), an edge from each parent (``merged into`` for GoT's
    merges)."""
    thoughts = state.get("thoughts") or {}
    finals = set(state.get("finals") or [])
    best = state.get("best")
    nodes: list[NodeRecord] = []
    relationships: list[RelationshipRecord] = []
    for t in ordered(thoughts.values()):
        status = ("answer" if t["id"] == best else "final" if t["id"] in finals else "kept" if t.get("kept")
                  else "failed" if t.get("error") else "pruned")
        props: dict[str, Any] = {"depth": t.get("depth", 0), "thought": t.get("thought", "")}
        for key in ("answer", "score", "votes", "error", "observation"):
            if t.get(key) not in (None, ""):
                props[key] = t[key]
        if t.get("actions"):
            props["actions"] = [f"{a['name']}[{', '.join(str(v) for v in a.get('args', {}).values())}] → "
                                f"{str(a.get('observation', ''))[:300]}" for a in t["actions"]]
        if t.get("triples"):
            props["triples"] = [" -> ".join(x) for x in t["triples"]]
        if t.get("attributes"):
            props["attributes"] = list(t["attributes"])
        nodes.append({"id": t["id"], "labels": [t.get("kind", "step"), status], "properties": props})
        for parent in t.get("parents") or []:
            relationships.append({"type": "merged into" if t.get("kind") == "merge" else "next",
                                  "source": parent, "target": t["id"], "properties": {}})
    return {"nodes": nodes, "relationships": relationships}
