"""Which local files the file tools may open: one check that every tool that opens a path named by the model
goes through.

A path the model gives (absolute, ``~/...``, ``file://...``, or relative to the run's work directory) is resolved
with every symbolic link followed, and the result must be

- one of the task's attachments (the file itself, not the rest of its folder; an attached folder with what it
  holds),
- inside the run's work directory (tool outputs, extracted archives, files the Python tool wrote), or
- inside a folder the user listed in ``KGAGENTS_FILE_ROOTS`` (``os.pathsep``-separated);

and never inside ``/proc``, ``/sys`` or ``/dev``, whatever the roots say. A refused path is a
:class:`FileAccessError` (a :class:`~kgagents.tools.base.ToolFailure`: a clear tool error, no retries), raised before
the file is looked at, so a refusal says nothing about whether the file exists.

:func:`open_allowed` opens the *resolved* path without following a final symbolic link, refuses anything but a
regular file (a FIFO would block the tool forever) and checks again where the opened file really is, so a link
swapped in between the check and the open (by code in the sandbox, which writes into the work directory) is
caught rather than followed.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urlparse

from kgagents.tools.base import ToolFailure
from kgagents.tools.manager import ToolEnv

#: Never readable, even under a root the user listed (process memory and environment, kernel and devices).
DENIED_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))


class FileAccessError(ToolFailure):
    """A tool asked for a local path outside the files the task may read (the message says which it may)."""


@dataclass(frozen=True)
class FileRoots:
    """What one run's file tools may open, every path resolved."""

    files: tuple[Path, ...]
    """Single files: the task's attachments."""
    folders: tuple[Path, ...]
    """Whole trees: the run's work directory, attached folders, the user's roots."""

    def allows(self, path: Path) -> bool:
        """Whether the resolved ``path`` is one of the files or lies in one of the folders (and in no denied
        root)."""
        if any(path == denied or path.is_relative_to(denied) for denied in DENIED_ROOTS):
            return False
        return path in self.files or any(path.is_relative_to(folder) for folder in self.folders)


def _resolved(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def roots_of(env: ToolEnv) -> FileRoots:
    """The run's :class:`FileRoots`: its attachments, its work directory and the user's roots, resolved now
    (a link changed since the run started is followed to where it points now)."""
    files: list[Path] = []
    folders = [_resolved(env.work_dir)]
    for attachment in env.attachments:
        path = _resolved(attachment)
        (folders if path.is_dir() else files).append(path)
    folders.extend(_resolved(root) for root in env.settings.file_roots)
    return FileRoots(tuple(files), tuple(folders))


def _requested(env: ToolEnv, source: str) -> Path:
    """The path ``source`` names, before links are resolved: ``file://`` URLs and ``~`` expanded, relative paths
    in the work directory, or, for a bare file name that is not there, the attachment of that name."""
    raw = source.strip()
    if raw.lower().startswith("file://"):
        raw = unquote(urlparse(raw).path)
    path = Path(raw).expanduser()
    if path.is_absolute():
        return path
    in_work_dir = Path(env.work_dir) / path
    if len(path.parts) == 1 and not in_work_dir.exists():
        named = [Path(a) for a in env.attachments if Path(a).name == path.name]
        if len(named) == 1:
            return named[0]
    return in_work_dir


def _refusal(env: ToolEnv, source: str, path: Path) -> FileAccessError:
    denied = next((d for d in DENIED_ROOTS if path == d or path.is_relative_to(d)), None)
    if denied is not None:
        return FileAccessError(f"{source} lies in {denied}, which the file tools never read")
    extra = " and the folders in KGAGENTS_FILE_ROOTS" if env.settings.file_roots else ""
    return FileAccessError(f"{source} is outside the files this task may read: its attachments, the run's work "
                           f"directory {_resolved(env.work_dir)}{extra}. Only the user can allow more folders "
                           "(KGAGENTS_FILE_ROOTS)")


def allowed_path(env: ToolEnv, source: str, roots: FileRoots | None = None) -> Path:
    """The resolved local path ``source`` names, if the run's file tools may open it (see the module docstring);
    :class:`FileAccessError` otherwise. The file need not exist."""
    if not source or not source.strip():
        raise ToolFailure("no file path was given")
    if "\0" in source:
        raise FileAccessError(f"{source!r} holds a NUL character: it is no file path")
    roots = roots or roots_of(env)
    path = _resolved(_requested(env, source))
    if not roots.allows(path):
        raise _refusal(env, source, path)
    return path


def _opened_path(fd: int, fallback: Path) -> Path:
    """Where the open file ``fd`` really is (Linux: ``/proc/self/fd``; elsewhere the path it was opened by)."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return fallback


def open_allowed(env: ToolEnv, source: str, roots: FileRoots | None = None) -> tuple[BinaryIO, Path]:
    """Open the regular file ``source`` names for reading, if the run may read it (see the module docstring).

    Returns the open binary file and its resolved path. Blocking: call it from a worker thread."""
    roots = roots or roots_of(env)
    path = allowed_path(env, source, roots)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as exc:
        raise ToolFailure(f"file not found: {source} (looked at {path})") from exc
    except OSError as exc:
        raise ToolFailure(f"cannot open {source}: {exc.strerror or exc}") from exc
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ToolFailure(f"{source} is not a file (it is a folder)")
        if not stat.S_ISREG(mode):
            raise ToolFailure(f"{source} is not a regular file")
        if not roots.allows(_opened_path(fd, path)):
            raise _refusal(env, source, _opened_path(fd, path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), path
    except BaseException:
        os.close(fd)
        raise


def read_allowed(env: ToolEnv, source: str, max_bytes: int, roots: FileRoots | None = None) -> tuple[bytes, Path]:
    """The bytes of the file ``source`` names (:func:`open_allowed`), refused without reading when it is larger
    than ``max_bytes``. Blocking: call it from a worker thread."""
    handle, path = open_allowed(env, source, roots)
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise ToolFailure(f"{path.name} is {size / 2**20:.1f} MB; the limit is {max_bytes / 2**20:.0f} MB")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew while it was read
        raise ToolFailure(f"{path.name} is larger than the limit of {max_bytes / 2**20:.0f} MB")
    return data, path

