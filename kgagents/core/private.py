"""Folders and files that only their owner may read: kgagents' data folders (the data home, the runs, graphs and
cache folders, the runs' work folders, the per-user configuration folder) are ``0700``, the SQLite files in them
(run registry, checkpoints, recordings, caches) and the trust store ``0600``.

What a run read (attachments' text, pages, KG snapshots, tool outputs) is in its checkpoints; a folder other
users of the machine can list and read gives it to them. Missing folders are created ``0700`` (every missing
parent too: the XDG specification asks that of ``$XDG_DATA_HOME``); a folder or file of this kind that already
exists with wider permissions is tightened, said once per folder. One that belongs to another user is refused
(:class:`OwnedByAnotherUser`, naming it): its owner can read and change what is written there whatever its mode
says, so kgagents writes nothing into it. SQLite creates a database's journal and WAL files with the database's own
permissions, so a database file made ``0600`` keeps them private too.

Nothing is done on Windows, whose permissions are not modes.

This module imports only the exception root.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path

from kgagents.core.errors import KGAgentsError

__all__ = ["OwnedByAnotherUser", "belongs_to_another_user", "private_dir", "private_file", "wider_than"]


class OwnedByAnotherUser(KGAgentsError, PermissionError, ValueError):
    """A data folder or file that belongs to another user: kgagents writes nothing into it."""


def belongs_to_another_user(owner: int, user: int) -> bool:
    """Whether a folder or file owned by the user id ``owner`` is another user's than ``user``'s (root's too: a
    folder root made for everyone, such as ``/tmp``, is no data folder of the user's)."""
    return owner != user


def _refuse_if_foreign(path: Path, info: os.stat_result) -> None:
    if hasattr(os, "getuid") and belongs_to_another_user(info.st_uid, os.getuid()):
        raise OwnedByAnotherUser(
            f"{path} belongs to another user (uid {info.st_uid}), who can read and change what kgagents would "
            "write there: kgagents keeps runs, graphs and caches only in folders and files of your own; choose "
            "another place (KGAGENTS_HOME, KGAGENTS_RUNS_DIR or --runs-dir, KGAGENTS_GRAPHS_DIR, --out)")

_said: set[str] = set()
_lock = threading.Lock()


def _say_once(message: str) -> None:
    with _lock:
        if message in _said:
            return
        _said.add(message)
    print(f"kgagents: {message}", file=sys.stderr, flush=True)


def wider_than(mode: int, allowed: int) -> bool:
    """Whether the permission bits of ``mode`` give more than ``allowed`` (e.g. group or others anything)."""
    return bool(stat.S_IMODE(mode) & ~allowed & 0o777)


def _tighten(path: Path, allowed: int, info: os.stat_result, *, announce: bool) -> None:
    """Make ``path`` (the user's; ``info``: its status) no wider than ``allowed``."""
    if not wider_than(info.st_mode, allowed):
        return
    mode = stat.S_IMODE(info.st_mode)
    try:
        os.chmod(path, mode & allowed)
    except OSError as exc:
        _say_once(f"cannot make {path} private ({exc.strerror or exc}); others may read it (mode {mode:o})")
        return
    if announce:
        _say_once(f"made {path} private (mode {mode:o} -> {mode & allowed:o}): it holds runs or graphs, and "
                  "what they read")


def private_dir(path: str | os.PathLike[str], *, tighten: bool = True) -> Path:
    """``path`` as a folder only its owner may use: created ``0700`` with every missing parent, or (``tighten``,
    for kgagents' own data folders) tightened to owner-only when it exists wider and belongs to the user (said
    once); ``tighten=False`` leaves an existing folder as it is (one the user chose for other things too, such as
    an evaluation's results folder: the files kgagents writes there are private themselves). An existing data
    folder (``tighten``) of another user raises :class:`OwnedByAnotherUser`. Returns ``Path(path)``."""
    folder = Path(path)
    if os.name == "nt":
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    missing = []
    current = folder
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    for part in reversed(missing):
        try:
            os.mkdir(part, 0o700)
        except FileExistsError:
            pass
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a folder")
    if not missing and tighten:
        info = os.stat(folder)
        _refuse_if_foreign(folder, info)
        _tighten(folder, 0o700, info, announce=True)
    return folder


def _create_private(file: Path) -> None:
    """An empty ``0600`` file at ``file`` unless something is there already; no descriptor of it stays open or is
    closed once it has its name."""
    temporary = file.with_name(f".{file.name}.{os.getpid()}.{threading.get_ident()}.new")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        return  # the caller's own open says what is wrong
    os.close(fd)
    try:
        os.link(temporary, file)  # never replaces what another process made meanwhile
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links: made in place (nothing else can hold it yet)
        try:
            os.close(os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                             | getattr(os, "O_CLOEXEC", 0), 0o600))
        except OSError:
            pass
    finally:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def private_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a file only its owner may read and write: created empty ``0600`` when missing (an empty file
    is a valid new SQLite database), tightened when it exists wider. One that belongs to another user raises
    :class:`OwnedByAnotherUser`. The folder must exist. Returns ``Path(path)``."""
    file = Path(path)
    if os.name == "nt":
        return file
    # The file is never opened once it is in place: closing any descriptor of a file drops every POSIX lock this
    # process holds on it, and SQLite connections in other threads hold theirs there (a dropped lock is a
    # "disk I/O error" or a corrupt database). A missing file is made under a temporary name and linked into place.
    try:
        info = os.lstat(file)
    except FileNotFoundError:
        _create_private(file)
        try:
            info = os.lstat(file)
        except OSError:
            return file
    except OSError:
        return file  # the caller's own open says what is wrong, with its own message
    if not stat.S_ISREG(info.st_mode):
        return file  # a link, a FIFO, a folder: the caller's own open refuses it with its own message
    _refuse_if_foreign(file, info)
    _tighten(file, 0o600, info, announce=False)
    return file
