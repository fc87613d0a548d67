"""Opening a static-KG backend by name: where a built graph's triples live (its manifest's ``backend``).

``compact`` (the memory-mapped store of :mod:`kgagents.tools.pgraph.compact`, the default), ``neo4j`` and
``falkordb`` (a graph imported into a database, :mod:`kgagents.tools.pgraph.cypher`) are built in; another
backend registers an opener with :func:`register_backend`, as the task-KG backends do
(:func:`kgagents.tools.kg.stores.register_backend`). An opener receives the graph's directory, its manifest and
its reference, and returns a :class:`~kgagents.tools.pgraph.model.StaticKG`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kgagents.tools.pgraph.compact import CompactGraph
from kgagents.tools.pgraph.model import GraphFormatError, GraphRef, StaticKG

BackendOpener = Callable[[Path, Mapping[str, Any], GraphRef], StaticKG]

_backends: dict[str, BackendOpener] = {}


def register_backend(name: str, opener: BackendOpener) -> None:
    """Open the graphs whose manifest names ``backend: name`` with ``opener(directory, manifest, ref)``."""
    _backends[name] = opener


def backend_names() -> list[str]:
    """The static-KG backends that can be opened."""
    return sorted(_backends)


def open_backend(location: Path, manifest: Mapping[str, Any], ref: GraphRef) -> StaticKG:
    """The graph built at ``location``, opened by the backend its manifest names (``compact`` when none)."""
    backend = str(manifest.get("backend", "compact"))
    opener = _backends.get(backend)
    if opener is None:
        raise GraphFormatError(f"{location}: unknown graph backend {backend!r}; known: {', '.join(backend_names())}")
    return opener(location, manifest, ref)


def _compact(location: Path, manifest: Mapping[str, Any], ref: GraphRef) -> StaticKG:
    return CompactGraph(location, ref=ref)


def _database(location: Path, manifest: Mapping[str, Any], ref: GraphRef) -> StaticKG:
    # the database clients' support (Bolt, FalkorDB, their servers): loaded when such a graph opens
    from kgagents.tools.pgraph.cypher import CypherGraph

    return CypherGraph.from_manifest(location, dict(manifest), ref=ref)


register_backend("compact", _compact)
register_backend("neo4j", _database)
register_backend("falkordb", _database)
