"""The embedded task KG: a NetworkX ``MultiDiGraph`` whose whole content lives in the graph state.

LLM-written insert and read code never runs in this process: it runs in the sandbox
(:mod:`kgagents.tools.sandbox`) against a copy of the KG built from the snapshot, and a write returns the new KG
as a snapshot, validated before it is accepted. The code sees:

- ``G`` — a ``networkx.MultiDiGraph``; a node has a ``label`` attribute (its type) and property attributes;
  an edge has a ``relationship`` attribute (its type) and property attributes;
- ``nx`` — the networkx module.

Read code leaves its answer in a variable named ``result`` (or prints it).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, cast

from kgagents.tools.kg.base import KGSnapshot, ReadResult, WriteResult, empty_snapshot, render_snapshot
from kgagents.tools.sandbox import Sandbox, SandboxLimits

_PRELUDE = """
import json, math, re, collections, itertools, statistics, datetime
import networkx as nx

def _load_kg(kg):
    g = nx.MultiDiGraph()
    for node in kg["nodes"]:
        labels = node.get("labels") or []
        g.add_node(node["id"], label=(labels[0] if len(labels) == 1 else ":".join(labels)), **node["properties"])
    for rel in kg["relationships"]:
        g.add_edge(rel["source"], rel["target"], relationship=rel["type"], **rel["properties"])
    return g

G = _load_kg(inputs["kg"])
del _load_kg
"""

_WRITE_POSTLUDE = """
class KGValidationError(Exception):
    pass

def _jsonable(value, where):
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        if isinstance(value, (set, frozenset, tuple)):
            return _jsonable(sorted(value, key=str) if isinstance(value, (set, frozenset)) else list(value), where)
        raise KGValidationError(f"{where} is not JSON-serialisable ({type(value).__name__}): {exc}")

_nodes, _rels = [], []
for _id, _attrs in G.nodes(data=True):
    if not isinstance(_id, (str, int)) or isinstance(_id, bool):
        raise KGValidationError(f"node id {_id!r} must be a string or an integer")
    _attrs = dict(_attrs)
    _label = _attrs.pop("label", None)
    if not isinstance(_label, str) or not _label.strip():
        raise KGValidationError(f"node {_id!r} has no 'label' attribute (give every node label='SomeType')")
    _nodes.append({"id": str(_id), "labels": [_l for _l in _label.split(":") if _l],
                   "properties": {str(k): _jsonable(v, f"property {k!r} of node {_id!r}") for k, v in _attrs.items()}})
for _s, _t, _attrs in G.edges(data=True):
    _attrs = dict(_attrs)
    _type = _attrs.pop("relationship", None) or _attrs.pop("label", None) or _attrs.pop("type", None)
    if not isinstance(_type, str) or not _type.strip():
        raise KGValidationError(f"edge {_s!r}->{_t!r} has no 'relationship' attribute "
                                "(give every edge relationship='SOME_TYPE')")
    _rels.append({"type": _type, "source": str(_s), "target": str(_t),
                  "properties": {str(k): _jsonable(v, f"property {k!r} of edge {_s!r}->{_t!r}")
                                 for k, v in _attrs.items()}})
__kg_result__ = {"nodes": _nodes, "relationships": _rels}
"""

_READ_POSTLUDE = """
try:
    result
except NameError:
    result = None
"""


class NetworkXStore:
    """A task KG held as a snapshot; reads and writes run in the sandbox."""

    name = "networkx"
    query_language = "python"

    def __init__(self, snapshot: KGSnapshot | None = None, *, work_dir: str | Path,
                 limits: SandboxLimits | None = None, allow_weak_sandbox: bool = False) -> None:
        self._snapshot: KGSnapshot = copy.deepcopy(snapshot) if snapshot else empty_snapshot()
        self._sandbox = Sandbox(work_dir, limits or SandboxLimits(), allow_weak=allow_weak_sandbox)

    async def clear(self) -> None:
        self._snapshot = empty_snapshot()

    async def render(self) -> str:
        return render_snapshot(self._snapshot)

    async def snapshot(self) -> KGSnapshot:
        return copy.deepcopy(self._snapshot)

    async def restore(self, snapshot: KGSnapshot) -> None:
        self._snapshot = copy.deepcopy(snapshot)

    async def write(self, code: str) -> WriteResult:
        """Run insert code; on success the KG becomes the validated result."""
        run = await self._sandbox.run(code, inputs={"kg": self._snapshot}, prelude=_PRELUDE,
                                      postlude=_WRITE_POSTLUDE, result_var="__kg_result__")
        if not run.ok:
            return WriteResult(False, run.error or "the code failed", run.stdout)
        new: Any = run.result
        if not isinstance(new, dict) or "nodes" not in new:
            return WriteResult(False, "the code did not leave a valid graph in G", run.stdout)
        self._snapshot = cast(KGSnapshot, new)
        return WriteResult(True, None, run.stdout)

    async def read(self, query: str) -> ReadResult:
        """Run read code; its answer is ``result`` (or, when unset, what it printed)."""
        run = await self._sandbox.run(query, inputs={"kg": self._snapshot}, prelude=_PRELUDE,
                                      postlude=_READ_POSTLUDE, result_var="result")
        if not run.ok:
            return ReadResult(False, None, run.error or "the code failed", run.stdout)
        result = run.result if run.result is not None else (run.stdout.strip() or None)
        return ReadResult(True, result, None, run.stdout)
