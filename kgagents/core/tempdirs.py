"""The folders kgagents makes in the system's temporary directory, and their removal.

A process that needs scratch space of its own makes one folder, ``kgagents-proc-<pid>-<random>``, in the
temporary directory (``tempfile.gettempdir()``: ``$TMPDIR``, else ``/tmp``) the first time it needs it:

* ``runs/<run key>/``: the work dir of each run without a checkpointer and without ``Context.work_dir`` (its
  sandboxes, the tools' files), kept while the process lives, so a caller can still look at it after the run;
* ``etc/``: the sandbox's synthetic ``/etc`` files, only where bubblewrap is too old to take them from a pipe.

A folder that lives shorter than its process (the sandbox's trial run of bubblewrap) is named the same way,
``kgagents-proc-<pid>-<kind>-<random>`` (:func:`short_lived_prefix`), so that a process which needs no folder
of its own makes none, and what it leaves when it is killed meanwhile is found all the same.

The folder is removed when the process exits (normally, or as a ``multiprocessing`` worker, which skips
``atexit``). A process that is killed (a signal, ``os._exit``) leaves it behind: :func:`stale_dirs` finds
such folders and ``kgagents clean`` removes them. A folder is in use while its process lives or while anyone
holds the shared ``flock`` its process takes on it (a process in another pid namespace that shares the
temporary directory). Folders that earlier versions made without a pid (``kgagents-sandbox-etc-*``,
``kgagents-ephemeral-*``) count as stale once nothing has changed in them for a day (no sign tells whether a
process of an earlier version still uses one, and a long-lived one would fail without it). Folders the user
names (``Context.work_dir``, ``KGAGENTS_RUNS_DIR``) are never made or removed here.

This module is a leaf, like :mod:`kgagents.core.config`: the tools may import it.
"""

from __future__ import annotations

import fcntl
import multiprocessing.util
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

#: The start of the name of every process's folder: ``kgagents-proc-<pid>-<random>``.
PREFIX = "kgagents-proc-"
_PROCESS_DIR = re.compile(re.escape(PREFIX) + r"(\d+)-[-A-Za-z0-9_]+")
#: Folders of earlier versions (no pid in the name): what may be in them, and their name.
_LEGACY = {
    "sandbox /etc": (re.compile(r"kgagents-sandbox-etc-[a-z0-9_]{8}"),
                     {"passwd", "group", "hosts", "nsswitch.conf"}),
    "run without a checkpointer": (re.compile(r"kgagents-ephemeral-[0-9a-f]{16}"), None),
}
#: A legacy folder is stale once nothing in it has changed for this long.
LEGACY_IDLE_S = 86400.0

_lock = threading.Lock()
_current: tuple[int, Path, int] | None = None  # this process's folder: (pid, path, the locked descriptor)


def process_dir() -> Path:
    """This process's folder in the temporary directory, made (and locked) on first use; removed at exit.

    A forked child gets a folder of its own: the parent's goes when the parent exits.
    """
    global _current
    with _lock:
        if _current is None or _current[0] != os.getpid():
            _current = _make_process_dir()
        return _current[1]


def short_lived_prefix(kind: str) -> str:
    """The prefix of a temporary folder of this process that it removes itself, e.g. with
    ``tempfile.TemporaryDirectory(prefix=short_lived_prefix("probe"))``: ``kgagents clean`` removes it once
    the process is gone."""
    return f"{PREFIX}{os.getpid()}-{kind}-"


def _make_process_dir() -> tuple[int, Path, int]:
    pid = os.getpid()
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-"))
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    fcntl.flock(fd, fcntl.LOCK_SH)
    # multiprocessing runs its finalizers in its workers (which end with os._exit) and, through atexit, in
    # every other process
    multiprocessing.util.Finalize(None, _remove_process_dir, args=(pid, path, fd), exitpriority=0)
    return pid, path, fd


def _remove_process_dir(pid: int, path: Path, fd: int) -> None:
    if os.getpid() != pid:
        return  # a forked child that exits through atexit: the folder is its parent's
    remove_tree(path)
    os.close(fd)


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything in it, read-only folders (sandboxed code may make them) included."""
    shutil.rmtree(path, ignore_errors=True)
    if not os.path.lexists(path):
        return
    _open_up(path)
    for folder, dirs, _files in os.walk(path):  # top-down: each folder is opened up before it is entered
        for name in dirs:
            _open_up(Path(folder, name))
    shutil.rmtree(path, ignore_errors=True)


def _open_up(folder: Path) -> None:
    try:
        if not folder.is_symlink():  # a link's target may be anywhere
            os.chmod(folder, stat.S_IRWXU)
    except OSError:
        pass


# ---------------------------------------------------------------------------------------------------------
# What killed processes left: kgagents clean
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stale:
    """A folder in the temporary directory that kgagents made and nothing uses any more."""

    path: Path
    why: str
    size: int  # bytes in it


def stale_dirs(temp_dir: str | Path | None = None) -> list[Stale]:
    """kgagents' folders in ``temp_dir`` (default: the temporary directory) that are no longer in use."""
    root = Path(temp_dir or tempfile.gettempdir())
    found = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith("kgagents-") or not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        why = _why_stale(path)
        if why:
            found.append(Stale(path, why, _size(path)))
    return found


def clean(temp_dir: str | Path | None = None, *, dry_run: bool = False) -> list[Stale]:
    """Remove (or with ``dry_run`` only list) what :func:`stale_dirs` finds; returns it."""
    stale = stale_dirs(temp_dir)
    if not dry_run:
        for item in stale:
            remove_tree(item.path)
    return stale


def _why_stale(path: Path) -> str | None:
    match = _PROCESS_DIR.fullmatch(path.name)
    if match:
        pid = int(match.group(1))
        return None if _alive(pid) or _locked(path) else f"process {pid} has ended"
    for what, (pattern, allowed) in _LEGACY.items():
        if not pattern.fullmatch(path.name):
            continue
        try:
            children = list(path.iterdir())
            changed = max([path.stat().st_mtime] + [child.lstat().st_mtime for child in children])
        except OSError:
            return None
        idle = time.time() - changed
        if (allowed is None or {child.name for child in children} <= allowed) and idle > LEGACY_IDLE_S:
            return f"{what} of an earlier kgagents version, unchanged for {idle / 86400:.1f} days"
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _locked(path: Path) -> bool:
    """Whether some process holds the folder's lock (this very process included)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # and with it the lock this test may have taken
    return False


def _size(path: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total
