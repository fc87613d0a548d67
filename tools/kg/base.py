"""The task knowledge graph's small interface, its snapshot format and its prompt rendering.

Every backend (embedded NetworkX, Cypher databases, SPARQL stores) implements :class:`KGStore`:
``clear``, ``render`` (the KG as "existing data" for a prompt), ``write`` (LLM-written insert code or query),
``read`` (LLM-written read code or query), ``snapshot`` / ``restore``.

One snapshot format serves all backends (KGoT paper, appendix A: "a consistent export format")::

    {"nodes": [{"id": "A1", "labels": ["Array"], "properties": {"values": [42, 23]}}],
     "relationships": [{"type": "SORTED_AS", "source": "A1", "target": "A2", "properties": {}}]}

and exports as JSON lines, one object per node (``"kind": "node"``) and relationship (``"kind": "relationship"``).
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, runtime_checkable

from kgagents.core.errors import KGAgentsError


class NodeRecord(TypedDict):
    id: str
    labels: list[str]
    properties: dict[str, Any]


class RelationshipRecord(TypedDict):
    type: str
    source: str
    target: str
    properties: dict[str, Any]


class KGSnapshot(TypedDict):
    nodes: list[NodeRecord]
    relationships: list[RelationshipRecord]


def empty_snapshot() -> KGSnapshot:
    return {"nodes": [], "relationships": []}


class KGError(KGAgentsError, RuntimeError):
    """A backend could not be used (connection, configuration); not an LLM query error."""


@dataclass
class WriteResult:
    """Outcome of one write: ``ok`` or an ``error`` the fix loop can send back to the LLM."""

    ok: bool
    error: str | None = None
    output: str = ""


@dataclass
class ReadResult:
    """Outcome of one read; ``empty`` when it ran but returned nothing."""

    ok: bool
    result: Any = None
    error: str | None = None
    output: str = ""

    @property
    def empty(self) -> bool:
        return self.ok and _is_empty(self.result)


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip() == ""
    if isinstance(value, (list, tuple, dict, set)):
        return len(value) == 0 or all(_is_empty(v) for v in (value.values() if isinstance(value, dict) else value))
    return False


@runtime_checkable
class KGStore(Protocol):
    """What the KGoT workflow needs from a task KG backend."""

    name: str
    query_language: str  # "python" (NetworkX), "cypher" or "sparql": selects the backend-specific prompts

    async def clear(self) -> None: ...

    async def render(self) -> str: ...

    async def write(self, code: str) -> WriteResult: ...

    async def read(self, query: str) -> ReadResult: ...

    async def snapshot(self) -> KGSnapshot: ...

    async def restore(self, snapshot: KGSnapshot) -> None: ...


class DatabaseStore:
    """The async :class:`KGStore` methods for a backend whose client is synchronous.

    Subclasses keep the run's KG snapshot in ``self._snapshot`` and implement ``clear_sync``, ``write_sync``,
    ``read_sync`` and ``restore_sync``; every database call then runs in a worker thread, off the event loop.
    """

    _snapshot: KGSnapshot

    def clear_sync(self) -> None:
        raise NotImplementedError

    def write_sync(self, code: str) -> WriteResult:
        raise NotImplementedError

    def read_sync(self, query: str) -> ReadResult:
        raise NotImplementedError

    def restore_sync(self, snapshot: KGSnapshot) -> None:
        raise NotImplementedError

    async def clear(self) -> None:
        await asyncio.to_thread(self.clear_sync)

    async def render(self) -> str:
        return render_snapshot(self._snapshot)

    async def write(self, code: str) -> WriteResult:
        return await asyncio.to_thread(self.write_sync, code)

    async def read(self, query: str) -> ReadResult:
        return await asyncio.to_thread(self.read_sync, query)

    async def snapshot(self) -> KGSnapshot:
        return copy.deepcopy(self._snapshot)

    async def restore(self, snapshot: KGSnapshot) -> None:
        await asyncio.to_thread(self.restore_sync, snapshot)


def _fmt_value(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_fmt_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_fmt_value(v) for v in value) + "]"
    return json.dumps(value) if value is None or isinstance(value, bool) else str(value)


def render_snapshot(snapshot: KGSnapshot, *, max_chars: int = 60_000) -> str:
    """The KG in the paper's "existing data" form (appendix A.1): nodes grouped by label with their ids and
    properties, relationships grouped by label with source, target and properties."""
    if not snapshot["nodes"] and not snapshot["relationships"]:
        return "The knowledge graph is empty: there are no nodes and no relationships yet."
    by_label: dict[str, list[str]] = {}
    label_of: dict[str, str] = {}
    for node in snapshot["nodes"]:
        label = ":".join(node["labels"]) or "None"
        label_of[str(node["id"])] = label
        by_label.setdefault(label, []).append(f"{{id:{node['id']}, properties:{_fmt_value(node['properties'])}}}")
    lines = ["Existing Nodes:"]
    for label, items in by_label.items():
        lines.append(f"Label: {label}")
        lines.extend(f"  {item}" for item in items)
    by_type: dict[str, list[str]] = {}
    for rel in snapshot["relationships"]:
        src, dst = str(rel["source"]), str(rel["target"])
        by_type.setdefault(rel["type"] or "None", []).append(
            f"{{source: {{id: {src}, label: {label_of.get(src, 'None')}}}, "
            f"target: {{id: {dst}, label: {label_of.get(dst, 'None')}}}, "
            f"properties: {_fmt_value(rel['properties'])}}}"
        )
    lines.append("Existing Relationships:")
    if not by_type:
        lines.append("  (none)")
    for rel_type, items in by_type.items():
        lines.append(f"Label: {rel_type}")
        lines.extend(f"  {item}" for item in items)
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n[... knowledge graph cut: {len(text) - max_chars} more characters ...]"
    return text


def snapshot_to_jsonl(snapshot: KGSnapshot) -> str:
    """JSON lines: one object per node, then one per relationship."""
    lines = [json.dumps({"kind": "node", **n}, ensure_ascii=False, sort_keys=True) for n in snapshot["nodes"]]
    lines += [json.dumps({"kind": "relationship", **r}, ensure_ascii=False, sort_keys=True)
              for r in snapshot["relationships"]]
    return "\n".join(lines) + ("\n" if lines else "")


def snapshot_from_jsonl(text: str) -> KGSnapshot:
    """Parse :func:`snapshot_to_jsonl` output; a malformed line raises ``ValueError`` naming its number."""
    snap = empty_snapshot()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            kind = obj.pop("kind")
        except (ValueError, KeyError, AttributeError) as exc:
            raise ValueError(f"snapshot line {number} is not a node/relationship object: {exc}") from exc
        if kind == "node":
            snap["nodes"].append({"id": str(obj["id"]), "labels": list(obj.get("labels", [])),
                                  "properties": dict(obj.get("properties", {}))})
        elif kind == "relationship":
            snap["relationships"].append({"type": str(obj["type"]), "source": str(obj["source"]),
                                          "target": str(obj["target"]),
                                          "properties": dict(obj.get("properties", {}))})
        else:
            raise ValueError(f"snapshot line {number}: unknown kind {kind!r}")
    return snap
