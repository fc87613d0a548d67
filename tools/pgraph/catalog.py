"""The graphs directory and the compact builds in it: names, manifests, fingerprints, building a source.

The layer under :mod:`kgagents.tools.pgraph.registry` (which finds and shares open graphs) and the database
imports of :mod:`kgagents.tools.pgraph.cypher`, which both build and name graphs the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kgagents.core.config import data_folder, data_home
from kgagents.tools.pgraph.build import FORMAT_VERSION, GraphBuilder
from kgagents.tools.pgraph.limits import ImportLimits
from kgagents.tools.pgraph.loaders import FORMATS, LOADERS, detect_format, source_files
from kgagents.tools.pgraph.model import GraphFormatError, GraphRef

GRAPHS_DIR_ENV = "KGAGENTS_GRAPHS_DIR"
#: Sources of at least this size get a progress bar while they are built.
PROGRESS_FROM_BYTES = 64 << 20


def graphs_dir() -> Path:
    """The directory of imported and cached graphs: ``KGAGENTS_GRAPHS_DIR``, else ``graphs`` in the data
    directory (:func:`kgagents.core.config.data_home`)."""
    value = os.environ.get(GRAPHS_DIR_ENV, "").strip()
    if value:
        return Path(value).expanduser()
    return data_home()[0] / "graphs"


def private_graphs_dir() -> Path:
    """:func:`graphs_dir` for writing: created (or tightened) readable by its owner only
    (:func:`kgagents.core.config.data_folder`)."""
    return data_folder(graphs_dir())


# ----------------------------------------------------------------------------------------------------------
# Fingerprints
# ----------------------------------------------------------------------------------------------------------
def content_hash(files: Sequence[Path]) -> str:
    """SHA-256 over the files' names (relative) and bytes."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode("utf-8") + b"\0")
        with open(path, "rb") as f:
            while chunk := f.read(1 << 22):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()


def source_signature(files: Sequence[Path]) -> list[list[Any]]:
    return [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in files]


def build_fingerprint(fmt: str, record: str | None, merge: bool, digest: str) -> str:
    text = json.dumps([FORMAT_VERSION, fmt, record, merge, digest])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def read_manifest(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def ref_of(directory: Path, manifest: Mapping[str, Any]) -> GraphRef:
    ref = GraphRef(name=str(manifest.get("name") or directory.name), location=str(directory.resolve()),
                   fingerprint=str(manifest["fingerprint"]))
    if manifest.get("backend", "compact") != "compact":
        ref["backend"] = str(manifest["backend"])
    source = manifest.get("source") or {}
    for key in ("source", "format", "record"):
        value = source.get("path" if key == "source" else key)
        if value is not None:
            ref[key] = str(value)
    return ref


# ----------------------------------------------------------------------------------------------------------
# Building
# ----------------------------------------------------------------------------------------------------------
def progress_bar(total: int, label: str) -> Any:
    if total < PROGRESS_FROM_BYTES:
        return None
    from tqdm import tqdm  # only for the progress bar of a big build (the CLI's startup does without it)

    return tqdm(total=total, desc=f"building {label}", unit="B", unit_scale=True, file=sys.stderr)


def swap_in(tmp: Path, target: Path) -> None:
    """Put a finished build at ``target``, replacing what was there (open instances keep their files)."""
    if target.exists():
        old = target.with_name(f"{target.name}.old-{os.getpid()}-{threading.get_ident()}")
        os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, target)


def build(source: str | Path, target: str | Path, *, format: str | None = None,  # noqa: A002
          record: str | None = None, merge: bool = False, name: str | None = None,
          progress: bool | None = None, limits: ImportLimits | None = None) -> GraphRef:
    """Build the compact store of ``source`` into ``target`` (replacing a previous build there), within
    ``limits`` (default: :meth:`ImportLimits.from_env`)."""
    path = Path(source).resolve()
    check_source(path)
    fmt = format or detect_format(path)
    if fmt not in LOADERS:
        raise GraphFormatError(f"unknown graph format {fmt!r}; known: {', '.join(FORMATS)}")
    files = source_files(path, fmt)
    target = Path(target)
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    builder = GraphBuilder(tmp, limits, source=str(path))
    label = name or path.name
    bar = progress_bar(sum(p.stat().st_size for p in files), label) if progress is not False else None
    last = [0]

    def report(done: int) -> None:
        if bar is not None:
            bar.update(max(0, done - last[0]))
            last[0] = done

    try:
        signature = source_signature(files)
        LOADERS[fmt](builder, path, record=record, merge=merge, progress=report)
        digest = content_hash(files)
        manifest_source = {"path": str(path), "format": fmt, "record": record, "merge": merge,
                           "files": signature, "sha256": digest}
        builder.finish(name=label, fingerprint=build_fingerprint(fmt, record, merge, digest), source=manifest_source)
    except BaseException:
        builder.abort()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if bar is not None:
            bar.close()
    swap_in(tmp, target)
    return ref_of(target, read_manifest(target) or {})


def check_source(path: Path) -> None:
    """Refuse a graph source that does not exist or is neither a regular file nor a folder: a named pipe, a
    socket or a device would be waited on (or read without end) instead of imported."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise GraphFormatError(f"no such graph source: {path}") from exc
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "no regular file")
        raise GraphFormatError(f"{path}: {kind}, not a file or folder; a graph is imported from files")


def default_name(path: Path, record: str | None) -> str:
    """The name of a graph imported from ``path`` (and ``record``) when none is given."""
    stem = path.name.split(".")[0] if path.is_file() else path.name
    if stem == "graph" and path.parent.name:  # GRBench keeps graph.json in a folder named after its domain
        stem = path.parent.name
    return f"{stem}-{record}" if record else stem


#: What a graph's name may be (a folder of the graphs directory).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,120}")


def check_name(name: str) -> None:
    """Refuse a graph name that :data:`NAME` does not allow."""
    if not NAME.fullmatch(name):
        raise GraphFormatError(f"a graph name uses letters, digits, '.', '_' and '-' only: {name!r}")
