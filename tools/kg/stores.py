"""Opening a task-KG backend by name.

``networkx`` (embedded, the default) is built in; other backends register a factory with
:func:`register_backend`. A factory receives the run's parameters as keyword arguments and returns a
:class:`tools.kg.base.KGStore`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from tools.kg.base import KGSnapshot, KGStore
from tools.kg.networkx_store import NetworkXStore
from tools.sandbox import SandboxLimits

BackendFactory = Callable[..., KGStore]

_backends: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    """Make a backend available under ``name``."""
    _backends[name] = factory


def backend_names() -> list[str]:
    return sorted(_backends)


def _networkx(*, snapshot: KGSnapshot | None, work_dir: Path, limits: SandboxLimits, allow_weak_sandbox: bool,
              **_: Any) -> KGStore:
    return NetworkXStore(snapshot, work_dir=work_dir / "kg", limits=limits, allow_weak_sandbox=allow_weak_sandbox)


register_backend("networkx", _networkx)


def open_store(name: str, *, snapshot: KGSnapshot | None, work_dir: Path, thread_id: str,
               limits: SandboxLimits, allow_weak_sandbox: bool = False, **options: Any) -> KGStore:
    """The task KG of one run. ``snapshot`` is the KG the state holds (database backends restore it)."""
    if name not in _backends:
        raise ValueError(f"unknown KG backend {name!r}; available: {', '.join(backend_names())}")
    return _backends[name](snapshot=snapshot, work_dir=work_dir, thread_id=thread_id, limits=limits,
                           allow_weak_sandbox=allow_weak_sandbox, **options)
