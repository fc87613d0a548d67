"""Where built graphs live, how a reference finds one, and the one shared instance per graph and process.

Layout under the graphs directory (``KGAGENTS_GRAPHS_DIR``, default ``graphs`` in the data directory)::

    <name>/                 a graph imported under a name (``kgagents graph import SRC --name NAME``)
    cache/<format>-<key>/   a source opened by path: built on first use, reused while the source is unchanged
    cache/inline-<hash>/    a graph given inline (e.g. ARK-V1 edges in a run's input), by content

A *reference* is a name, a path (a built graph directory, or a source file or folder), or a :class:`GraphRef`
from a run's state. :func:`open_graph` turns it into a :class:`~kgagents.tools.pgraph.model.StaticKG`: every run of the
process that opens the same graph gets the same read-only instance (keyed by the fingerprint), with its
embedding indexes; nothing is copied per run and nothing is put in a checkpoint but the reference.

A stored reference is trusted as far as whoever could write it: a run's own state (the CLI, Python) is rebuilt from
its source when its build is gone or changed; one that a caller of a server may have written is only a pointer to a
build of the catalog, opened as that build's manifest says (:func:`catalog_ref`).

A cached build is checked against its source by size and modification time, then (when those differ) by the
SHA-256 of its content: an unchanged file that was touched or copied is not rebuilt, a changed one is. Builds
take a file lock, so concurrent processes build a graph once; they write to a temporary directory that is
renamed into place, so a killed build leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kgagents.tools.pgraph.backends import open_backend
from kgagents.tools.pgraph.build import FORMAT_VERSION, GraphBuilder
from kgagents.tools.pgraph.catalog import (
    NAME,
    build,
    build_fingerprint,
    check_name,
    check_source,
    content_hash,
    default_name,
    graphs_dir,
    private_graphs_dir,
    read_manifest,
    ref_of,
    source_signature,
    swap_in,
)
from kgagents.tools.pgraph.limits import ImportLimits
from kgagents.tools.pgraph.loaders import add_ark_edges, detect_format, parse_ark_edges, source_files
from kgagents.tools.pgraph.model import GraphFormatError, GraphRef, StaticKG
from kgagents.tools.pgraph.vectors import file_lock

#: How many graphs a process keeps open when no run holds them (each costs two file descriptors).
KEEP_OPEN = 64


def import_graph(source: str | Path, *, format: str | None = None, name: str | None = None,  # noqa: A002
                 to: str | Path | None = None, record: str | None = None, merge: bool = False,
                 progress: bool | None = None, limits: ImportLimits | None = None) -> GraphRef:
    """``kgagents graph import``: build ``source`` into ``to`` or ``<graphs dir>/<name>``, within ``limits``."""
    path = Path(source)
    if to is None:
        name = name or default_name(path, record)
        check_name(name)
        to = private_graphs_dir() / name
    target = Path(to)
    with file_lock(target.with_name(f".{target.name}.lock")):
        return build(path, target, format=format, record=record, merge=merge, name=name or target.name,
                     progress=progress, limits=limits)


def cached(source: str | Path, *, format: str | None = None, record: str | None = None,  # noqa: A002
           merge: bool = False, progress: bool | None = None) -> GraphRef:
    """The build of a source in the cache, built or rebuilt when missing or when the source changed."""
    path = Path(source).resolve()
    check_source(path)
    fmt = format or detect_format(path)
    key = hashlib.sha256(json.dumps([str(path), fmt, record, merge]).encode("utf-8")).hexdigest()[:16]
    target = private_graphs_dir() / "cache" / f"{fmt}-{key}"
    files = source_files(path, fmt)
    fresh = _fresh(target, files)
    if fresh is not None:
        return fresh
    with file_lock(target.with_name(f".{target.name}.lock")):
        fresh = _fresh(target, files)
        if fresh is not None:
            return fresh
        name = f"{path.name}#{record}" if record else path.name
        return build(path, target, format=fmt, record=record, merge=merge, name=name, progress=progress)


def _fresh(target: Path, files: Sequence[Path]) -> GraphRef | None:
    """The cached build if its source is unchanged (size+mtime, else content); else ``None``."""
    manifest = read_manifest(target)
    if manifest is None or manifest.get("format_version") != FORMAT_VERSION:
        return None
    source = manifest.get("source") or {}
    try:
        signature = source_signature(files)
    except OSError:
        return None
    if source.get("files") == signature:
        return ref_of(target, manifest)
    if [s[:2] for s in source.get("files") or []] == [s[:2] for s in signature] and \
            source.get("sha256") == content_hash(files):
        source["files"] = signature  # touched or copied, not changed: remember the new times
        with contextlib.suppress(OSError):
            tmp = target / "manifest.json.tmp"
            tmp.write_text(json.dumps(manifest, indent=1, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, target / "manifest.json")
        return ref_of(target, manifest)
    return None


def import_edges(edges: Any, *, name: str = "inline") -> GraphRef:
    """A graph given inline in ARK-V1 format, built into the cache by content (the same edges: the same build)."""
    parsed = parse_ark_edges(edges, name)
    canonical = json.dumps([[h, r, t, sorted(q.items())] for h, r, t, q in parsed], ensure_ascii=False,
                           default=str)
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    target = private_graphs_dir() / "cache" / f"inline-{digest[:16]}"
    manifest = read_manifest(target)
    if manifest is not None and manifest.get("format_version") == FORMAT_VERSION:
        return ref_of(target, manifest)
    with file_lock(target.with_name(f".{target.name}.lock")):
        manifest = read_manifest(target)
        if manifest is not None and manifest.get("format_version") == FORMAT_VERSION:
            return ref_of(target, manifest)
        tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        shutil.rmtree(tmp, ignore_errors=True)
        builder = GraphBuilder(tmp)
        try:
            add_ark_edges(builder, parsed)
            builder.finish(name=name, fingerprint=build_fingerprint("ark", None, False, digest),
                           source={"path": "inline", "format": "ark", "sha256": digest})
        except BaseException:
            builder.abort()
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        swap_in(tmp, target)
    return ref_of(target, read_manifest(target) or {})


# ----------------------------------------------------------------------------------------------------------
# Resolving and opening
# ----------------------------------------------------------------------------------------------------------
def known_graphs() -> list[str]:
    """The names of the graphs imported into the graphs directory."""
    root = graphs_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "manifest.json").is_file())


def resolve(ref: str | Path | Mapping[str, Any], *, format: str | None = None,  # noqa: A002
            record: str | None = None, progress: bool | None = None) -> GraphRef:
    """A :class:`GraphRef` for a name, a path or a stored reference (building a source when needed)."""
    if isinstance(ref, Mapping):
        return _resolve_stored(ref)
    text = str(ref)
    path = Path(text)
    if (path / "manifest.json").is_file() and record is None:
        return ref_of(path, read_manifest(path) or _bad(path))
    named = graphs_dir() / text
    if NAME.fullmatch(text) and (named / "manifest.json").is_file() and record is None:
        return ref_of(named, read_manifest(named) or _bad(named))
    if path.exists():
        return cached(path, format=format, record=record, progress=progress)
    known = known_graphs()
    raise GraphFormatError(f"no graph named or at {text!r}" + (f"; imported graphs: {', '.join(known)}" if known
                                                               else "; import one with `kgagents graph import`"))


def _bad(path: Path) -> dict[str, Any]:
    raise GraphFormatError(f"{path}/manifest.json is unreadable: import the graph again")


#: A folder of the graphs directory's cache: ``<format>-<key>`` (a source opened by path) or ``inline-<hash>``.
CACHE_ENTRY = re.compile(r"[a-z]+-[0-9a-f]{16}")


def catalog_entry(location: str | Path, root: Path) -> Path | None:
    """The catalog entry ``location`` is, every link followed: ``root/<name>`` (an imported graph) or
    ``root/cache/<format>-<key>`` (a cached build), else ``None`` (anything else, in ``root`` or not: a file or
    folder inside a build, a half-written build, a path elsewhere)."""
    try:
        relative = Path(location).resolve().relative_to(root.resolve())
    except (OSError, RuntimeError, ValueError):
        return None
    parts = relative.parts
    if len(parts) == 1 and parts[0] != "cache" and NAME.fullmatch(parts[0]) and ".tmp-" not in parts[0] \
            and ".old-" not in parts[0]:
        return root / parts[0]
    if len(parts) == 2 and parts[0] == "cache" and CACHE_ENTRY.fullmatch(parts[1]):
        return root / "cache" / parts[1]
    return None


def catalog_ref(ref: Mapping[str, Any]) -> GraphRef:
    """The catalog's own reference for a stored one that someone else may have written (a served run's state):
    trusted only as a pointer to a build of the graphs directory (:func:`catalog_entry`) whose manifest has the
    reference's fingerprint. What it returns is read from that manifest; nothing else of the stored reference (its
    source, format, record or name) is used, and nothing is built. The errors quote neither a path nor a file."""
    location = ref.get("location")
    entry = catalog_entry(str(location), graphs_dir()) if isinstance(location, str) and location else None
    manifest = read_manifest(entry) if entry is not None else None
    if entry is None or manifest is None or not manifest.get("fingerprint"):
        raise GraphFormatError("this run's graph reference is not a graph of this server's catalog: name an imported "
                               "graph in the input ('graph'), on a new thread")
    if ref.get("fingerprint") != manifest["fingerprint"]:
        raise GraphFormatError(f"the knowledge graph {manifest.get('name') or entry.name} changed since this run "
                               "started (it was built or imported again): start a new thread")
    return ref_of(entry, manifest)


def _resolve_stored(ref: Mapping[str, Any]) -> GraphRef:
    """A reference from a run's state: its build if still there and the same, else rebuilt from its source."""
    fingerprint = ref.get("fingerprint")
    location = ref.get("location")
    if location:
        manifest = read_manifest(Path(location))
        if manifest is not None and (fingerprint is None or manifest.get("fingerprint") == fingerprint):
            return ref_of(Path(location), manifest)
    source = ref.get("source")
    if source and source != "inline" and Path(source).exists():
        rebuilt = cached(source, format=ref.get("format"), record=ref.get("record"))
        if fingerprint and rebuilt["fingerprint"] != fingerprint:
            raise GraphFormatError(f"the knowledge graph {ref.get('name') or source} changed since this run started "
                                   f"(fingerprint {rebuilt['fingerprint']}, expected {fingerprint})")
        return rebuilt
    if ref.get("name") and not location and not source:
        return resolve(str(ref["name"]))
    raise GraphFormatError(f"the knowledge graph {ref.get('name') or location or source!r} of this run is gone "
                           f"(fingerprint {fingerprint}): import it again, or give the graph once more")


_open: OrderedDict[str, StaticKG] = OrderedDict()
_open_lock = threading.Lock()
_open_locks: dict[str, threading.Lock] = {}
#: For a database-backed graph: the key in ``_open`` of the instance opened from each location (a graph imported
#: again under its name has the same location and a new namespace, so a new key).
_open_at: dict[str, str] = {}


def open_graph(ref: str | Path | Mapping[str, Any], *, format: str | None = None,  # noqa: A002
               record: str | None = None) -> StaticKG:
    """The process's one instance of the graph ``ref`` resolves to (opened on first use), keyed by its
    fingerprint: compact builds of one source share an instance wherever they lie; a database-backed import of
    the same source (the same fingerprint) is another instance, and each import of it again (a new namespace in
    the database) another one, which replaces the one opened from its location before."""
    resolved = resolve(ref, format=format, record=record)
    fingerprint = resolved["fingerprint"]
    location = None
    if resolved.get("backend", "compact") != "compact":
        location = resolved["location"]
        fingerprint += f"@{location}#{(read_manifest(Path(location)) or {}).get('namespace')}"
    with _open_lock:
        graph = _open.get(fingerprint)
        if graph is not None:
            _open.move_to_end(fingerprint)
            return graph
        lock = _open_locks.setdefault(fingerprint, threading.Lock())
    with lock:
        with _open_lock:
            graph = _open.get(fingerprint)
        if graph is None:
            graph = _instantiate(resolved)
            with _open_lock:
                if location is not None:  # an import replaced what was at this location: drop its instance
                    replaced = _open_at.get(location)
                    if replaced is not None and replaced != fingerprint:
                        _open.pop(replaced, None)
                    _open_at[location] = fingerprint
                _open[fingerprint] = graph
                while len(_open) > KEEP_OPEN:
                    _open.popitem(last=False)  # runs that still hold it keep it alive
        return graph


def _instantiate(ref: GraphRef) -> StaticKG:
    location = Path(ref["location"])
    return open_backend(location, read_manifest(location) or {}, ref)


def graph_from_edges(edges: Any, *, name: str = "inline") -> StaticKG:
    """Open a graph given as ARK-V1 edges ``[[head, tail, {"relation": r, ...}], ...]`` (built into the cache)."""
    return open_graph(import_edges(edges, name=name))


def forget_open_graphs() -> None:
    """Drop the process's open instances (tests; a long-lived process that re-imported graphs)."""
    with _open_lock:
        _open.clear()
        _open_locks.clear()
        _open_at.clear()
