"""Writing into folders that may be someone else's without following the links they carry.

A results folder, an unpacked bundle, a cloned project's ``.kgagents`` can come from someone else, and with them
any symbolic link: ``report.md`` pointing at a virtual environment's ``site-packages/x.pth`` (a line of Python
there runs at every start of that Python), ``work/<thread>`` pointing at the user's home (which would become the
sandbox's writable folder), ``shared`` beside ``shared.zip`` pointing at ``~/.config``. kgagents therefore never
writes through a name of such a folder:

- a file is written as a new file of its own in the same folder (``O_CREAT | O_EXCL | O_NOFOLLOW``, relative to
  the folder opened once), then renamed over the name (:func:`replacing`, :func:`write_file`): a link there is
  replaced, never followed, and a reader never sees half a file;
- a file that is appended to (``results.jsonl``) is opened with ``O_NOFOLLOW``: a link there is refused
  (:func:`open_for_append`), as is anything but a regular file;
- a folder kgagents makes inside such a folder (a run's work folder, the folder a bundle is unpacked into) is
  made with ``mkdir`` and must then be a real folder, not a link (:func:`own_folder`);
- a database kgagents opens for writing there (checkpoints, recordings, the run registry) must not be a link
  (:func:`refuse_link`: SQLite itself follows links).

A refusal is a :class:`LinkRefused` naming the path and where its link points. The folder a user names
themselves (``--out DIR``, ``kgagents report DIR``) is used as they name it, links included: what is refused are
links *inside* it.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from kgagents.core.errors import KGAgentsError

__all__ = ["LinkRefused", "open_for_append", "own_folder", "refuse_link", "replacing", "write_file"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
#: Whether this platform opens and renames relative to an open folder (every Unix; not Windows).
_AT_FOLDER = os.open in os.supports_dir_fd and os.rename in os.supports_dir_fd and os.unlink in os.supports_dir_fd


class LinkRefused(KGAgentsError, ValueError):
    """A name kgagents would write through is a symbolic link (or not the kind of file it writes)."""


def _link_message(path: Path, what: str) -> str:
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    return (f"{path} is a symbolic link{target}: kgagents follows no link in a folder that may be someone else's "
            f"({what} would go where it points); remove the link, or use another folder")


def refuse_link(path: str | os.PathLike[str], what: str = "this file") -> Path:
    """``path``, refused (:class:`LinkRefused`) when it is a symbolic link; ``what`` names it in the message."""
    file = Path(path)
    if file.is_symlink():
        raise LinkRefused(_link_message(file, what))
    return file


def own_folder(path: str | os.PathLike[str], what: str = "a folder") -> Path:
    """``path`` as a real folder, made if missing (with its missing parents): a link there, even to a folder, or
    a file, is refused (:class:`LinkRefused`). Returns ``Path(path)``, never resolved through links."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    if stat.S_ISLNK(info.st_mode):
        raise LinkRefused(_link_message(folder, what))
    if not stat.S_ISDIR(info.st_mode):
        raise LinkRefused(f"{folder} is not a folder: kgagents keeps {what} there")
    return folder


@contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file to write ``path``'s new content to: a new file in ``path``'s folder, renamed over ``path``
    when the block ends without an error (removed otherwise). A link at ``path`` is replaced, never followed;
    the new file gets the usual mode (``0666`` less the umask)."""
    target = Path(path)
    folder = target.parent
    temporary = f".{target.name[:80]}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    if _AT_FOLDER:
        folder_fd = os.open(folder, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            fd = os.open(temporary, flags, 0o666, dir_fd=folder_fd)
            try:
                with os.fdopen(fd, "wb") as out:
                    yield out
                os.rename(temporary, target.name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
            except BaseException:
                _remove(temporary, folder_fd)
                raise
        finally:
            os.close(folder_fd)
        return
    fd = os.open(folder / temporary, flags | getattr(os, "O_BINARY", 0), 0o666)  # pragma: no cover - Windows
    try:  # pragma: no cover - Windows
        with os.fdopen(fd, "wb") as out:
            yield out
        os.replace(folder / temporary, target)
    except BaseException:  # pragma: no cover - Windows
        (folder / temporary).unlink(missing_ok=True)
        raise


def _remove(name: str, folder_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=folder_fd)
    except OSError:
        pass


def write_file(path: str | os.PathLike[str], data: str | bytes, *, encoding: str = "utf-8") -> Path:
    """Write ``data`` (text in ``encoding``, or bytes) to ``path`` as :func:`replacing` does; returns ``Path(path)``."""
    with replacing(path) as out:
        out.write(data.encode(encoding) if isinstance(data, str) else data)
    return Path(path)


def open_for_append(path: str | os.PathLike[str], what: str = "this file", **text: Any) -> IO[str]:
    """``path`` opened to append text (created if missing): a link there is refused, and so is anything but a
    regular file (a FIFO would block). ``text``: ``encoding`` and the like, as for :func:`open`."""
    file = Path(path)
    try:
        fd = os.open(file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NONBLOCK | _NOFOLLOW | _CLOEXEC, 0o666)
    except OSError as exc:
        if file.is_symlink():
            raise LinkRefused(_link_message(file, what)) from exc
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LinkRefused(f"{file} is not a regular file: kgagents appends {what} only to one")
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return open(fd, "a", **{"encoding": "utf-8", **text})
    except BaseException:
        os.close(fd)
        raise
