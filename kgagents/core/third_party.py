"""The private parts of other libraries that kgagents uses, each with a public path to fall back on, and the one
warning that says a fallback was taken.

A library's private symbol (a name that starts with ``_``) can change in any release, patch releases included. Each
use is registered here where it is made (:func:`private_part`): the symbol, its library (as pip names it), the
version it was tested with and the public path used without it. docs/dependencies.md lists the same parts in its
table ("Private parts of libraries"); ``tests/test_third_party.py`` checks that the two agree.

Where a private part fails — missing, or raising when it is built or called — the code takes the public path and
calls :func:`fell_back`: one warning per part and process names the symbol, the library's installed version, what
went wrong and the public path now taken; later failures of the same part are logged at debug level only, so a
drifted library costs one line, not one per call.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from importlib import metadata

__all__ = ["PrivatePart", "fell_back", "installed_version", "private_part", "registered"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrivatePart:
    """One private symbol of another library that kgagents uses, and the public path it falls back to."""

    #: The library as pip names it (``httpx2``, ``langchain-openai``): its installed version is read by this name.
    library: str
    #: The symbol as the library's source names it (``AsyncClient._init_transport``).
    symbol: str
    #: The version of ``library`` the use was tested with (docs/dependencies.md's "library (tested)").
    tested: str
    #: The public path taken without it, as the warning says it.
    fallback: str


_parts: dict[tuple[str, str], PrivatePart] = {}
_warned: set[tuple[str, str]] = set()
_lock = threading.Lock()


def private_part(library: str, symbol: str, *, tested: str, fallback: str) -> PrivatePart:
    """Register one use of ``library``'s private ``symbol`` (at the top of the module that uses it) and return it,
    for :func:`fell_back`. Registering the same part again returns the first registration."""
    part = PrivatePart(library, symbol, tested, fallback)
    with _lock:
        return _parts.setdefault((library, symbol), part)


def registered() -> list[PrivatePart]:
    """Every private part registered so far (by the modules imported so far), in registration order."""
    with _lock:
        return list(_parts.values())


def installed_version(library: str) -> str:
    """The installed version of ``library`` ("not installed" where pip does not know it)."""
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return "not installed"


def fell_back(part: PrivatePart, reason: BaseException | str) -> bool:
    """Say that ``part`` failed (``reason``: the exception, or what was found instead) and its public path is
    taken: a warning the first time in this process, a debug line after that. True when this call warned."""
    why = f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else reason
    with _lock:
        first = (part.library, part.symbol) not in _warned
        _warned.add((part.library, part.symbol))
    if first:
        log.warning("%s %s: its private %s is not usable (%s); using the public path instead: %s "
                    "(tested with %s %s; said once per process)", part.library, installed_version(part.library),
                    part.symbol, why[:300], part.fallback, part.library, part.tested)
    else:
        log.debug("%s: private %s not usable again (%s)", part.library, part.symbol, why[:300])
    return first
