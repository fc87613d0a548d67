"""Opening a task-KG backend by name.

``networkx`` (embedded, the default) is built in; other backends register a factory with
:func:`register_backend`. A factory receives the run's parameters as keyword arguments and returns a
:class:`kgagents.tools.kg.base.KGStore`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kgagents.core.extras import require
from kgagents.tools.kg.base import KGSnapshot, KGStore
from kgagents.tools.kg.cypher_store import Neo4jStore, bolt_config
from kgagents.tools.kg.cypher_store import release_run as release_bolt
from kgagents.tools.kg.falkordb_store import FalkorDBStore, falkordb_url
from kgagents.tools.kg.networkx_store import NetworkXStore
from kgagents.tools.kg.sparql_store import SparqlStore, database_for
from kgagents.tools.sandbox import SandboxLimits

BackendFactory = Callable[..., KGStore]

_backends: dict[str, BackendFactory] = {}
_languages: dict[str, str] = {}
_without_io: set[str] = set()
_requires: dict[str, tuple[str, ...]] = {}


def register_backend(name: str, factory: BackendFactory, query_language: str = "python", *,
                     opens_without_io: bool = False, requires: tuple[str, ...] = ()) -> None:
    """Make a backend available under ``name`` (``query_language`` selects its prompts).

    ``opens_without_io``: the factory touches no file, socket or subprocess once the run's work dir is
    prepared (``kgagents.tools.sandbox.prepare_work_dir``), so runs open it on the event loop; otherwise in a thread.
    ``requires``: modules of an extra (:mod:`kgagents.core.extras`) the backend needs.
    """
    _backends[name] = factory
    _languages[name] = query_language
    _requires[name] = requires
    if opens_without_io:
        _without_io.add(name)
    else:
        _without_io.discard(name)


def opens_without_io(name: str) -> bool:
    """Whether backend ``name`` opens without blocking I/O (see :func:`register_backend`)."""
    return name in _without_io


def backend_language(name: str) -> str:
    """The query language of a backend (``python``, ``cypher``, ``sparql``) without opening it."""
    if name not in _languages:
        raise ValueError(f"unknown KG backend {name!r}; available: {', '.join(backend_names())}")
    return _languages[name]


def backend_names() -> list[str]:
    return sorted(_backends)


def check_backend(name: str, url: str | None = None) -> None:
    """Refuse a backend that does not exist or whose extra is not installed
    (:class:`kgagents.core.extras.MissingExtra` names it), before anything is started. ``url``: the backend's
    database, if one is given (the neo4j backend needs an extra only for its embedded server)."""
    backend_language(name)
    needs = _requires.get(name, ())
    if name == "neo4j" and (url or os.environ.get("NEO4J_URI")):
        needs = ()
    for module in needs:
        require(module, f"the {name} backend")


def _networkx(*, snapshot: KGSnapshot | None, work_dir: Path, limits: SandboxLimits, allow_weak_sandbox: bool,
              **_: Any) -> KGStore:
    return NetworkXStore(snapshot, work_dir=work_dir / "kg", limits=limits, allow_weak_sandbox=allow_weak_sandbox)


register_backend("networkx", _networkx, opens_without_io=True)


# The database backends import their clients (and start an embedded server) only when a run opens them.
# ``sync=False`` opens without making the database equal to ``snapshot`` (diagnostics and tests only).
def _neo4j(*, snapshot: KGSnapshot | None, thread_id: str, url: str | None = None, sync: bool = True,
           run_id: str | None = None, **_: Any) -> KGStore:
    return Neo4jStore(snapshot, thread_id=thread_id, config=bolt_config(url), run_id=run_id, sync=sync)


def _falkordb(*, snapshot: KGSnapshot | None, thread_id: str, url: str | None = None, sync: bool = True,
              **_: Any) -> KGStore:
    return FalkorDBStore(snapshot, thread_id=thread_id, url=falkordb_url(url), sync=sync)


def _sparql(*, snapshot: KGSnapshot | None, thread_id: str, work_dir: Path, limits: SandboxLimits,
            allow_weak_sandbox: bool, url: str | None = None, sync: bool = True, **_: Any) -> KGStore:
    return SparqlStore(snapshot, thread_id=thread_id, database=database_for(url), work_dir=work_dir / "kg",
                       limits=limits, allow_weak_sandbox=allow_weak_sandbox, sync=sync)


register_backend("neo4j", _neo4j, "cypher", requires=("arcadedb_embedded",))  # without NEO4J_URI: embedded
register_backend("falkordb", _falkordb, "cypher", requires=("falkordb",))
register_backend("sparql", _sparql, "sparql", requires=("pyoxigraph",))


def release_run(name: str, *, run_id: str, url: str | None = None) -> None:
    """Run ``run_id`` is done with backend ``name``: a single-tenant Bolt server is free for the next run."""
    if name == "neo4j":
        release_bolt(url, run_id)


def open_store(name: str, *, snapshot: KGSnapshot | None, work_dir: Path, thread_id: str,
               limits: SandboxLimits, allow_weak_sandbox: bool = False, **options: Any) -> KGStore:
    """The task KG of one run. ``snapshot`` is the KG the state holds (database backends restore it);
    ``thread_id`` names the KG (a run's thread, or ``thread/variant`` for fusion variants) and the option
    ``run_id`` the run that holds it."""
    check_backend(name, options.get("url"))
    return _backends[name](snapshot=snapshot, work_dir=work_dir, thread_id=thread_id, limits=limits,
                           allow_weak_sandbox=allow_weak_sandbox, **options)
