"""What a results bundle may hold, and unpacking one someone else made without trusting it.

A bundle (``kgagents eval ... --bundle FILE.zip``) carries an evaluation's results for ``kgagents report`` and
``kgagents replay`` on another machine. What it may hold is an allow-list of names (:func:`bundled_name`):
the results and the settings as JSON, reports as Markdown, plots as PNG, and the recording of the model
exchanges as ``recording.sqlite``; never a pickle, a checkpoint database, a program, a folder or a link.

:func:`unpack` refuses a bundle before ``zipfile`` reads its directory when the archive's end record announces
more members than :attr:`BundleLimits.max_files` or a directory larger than :attr:`BundleLimits.max_directory_bytes`
(a 100 MB archive can declare a million members, which ``zipfile`` would parse into objects first), and before
anything is written when its directory shows a name outside the
allow-list, a path, more members than :attr:`BundleLimits.max_files`, a member over
:attr:`BundleLimits.max_member_bytes`, more than :attr:`BundleLimits.max_total_bytes` in all, or a member that
expands more than :attr:`BundleLimits.max_ratio` times (a zip bomb: 400 KB that would become 400 MB); the bytes
it then writes are counted too, so a member that lies about its size in the directory stops at its declared
size. The folder it is unpacked into must be a real folder (a ``shared`` link beside ``shared.zip`` would send
every member where it points: :func:`kgagents.core.nofollow.own_folder`), and each file is written to a temporary
name and moved into place, so a link planted in the folder is replaced, never followed.
"""

from __future__ import annotations

import os
import re
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kgagents.core.errors import KGAgentsError
from kgagents.core.nofollow import LinkRefused, own_folder

__all__ = [
    "BUNDLE_INFO",
    "RECORDING_FILE",
    "BundleError",
    "BundleLimits",
    "bundle_problems",
    "bundled_name",
    "directory_problems",
    "unpack",
]

BUNDLE_INFO = "bundle.json"
RECORDING_FILE = "recording.sqlite"
#: The names of the data files a bundle may hold besides :data:`RECORDING_FILE`: a plain name (letters, digits,
#: ``._-``) with a data suffix; checkpoints are never bundled (they hold every state of every item, and a replay
#: makes its own).
_DATA_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,119}\.(?:jsonl|json|md|png)")
_CHUNK = 1 << 20


class BundleError(KGAgentsError, ValueError):
    """A bundle that is not one kgagents made, or that exceeds the limits (:class:`BundleLimits`)."""


@dataclass(frozen=True)
class BundleLimits:
    """What unpacking a bundle writes at most."""

    max_files: int = 64
    max_member_bytes: int = 1 << 30
    """The largest file (1 GiB: a recording of a large evaluation)."""
    max_total_bytes: int = 2 << 30
    max_ratio: float = 300.0
    """The largest uncompressed / compressed size of a member over :attr:`ratio_min_bytes` (JSON and SQLite
    compress up to some tens of times; a zip bomb a thousand)."""
    ratio_min_bytes: int = 1 << 20
    max_entry_bytes: int = 1024
    """The most one member's entry may take in the zip directory (46 bytes, its name of at most 120 characters,
    extra fields of some tens of bytes); with :attr:`max_files`, the largest directory read at all."""

    @property
    def max_directory_bytes(self) -> int:
        return self.max_files * self.max_entry_bytes


def bundled_name(name: str) -> bool:
    """Whether a bundle may hold a file called ``name`` (see the module docstring)."""
    if name.startswith("checkpoints"):
        return False
    return name == RECORDING_FILE or bool(_DATA_NAME.fullmatch(name))


def _mb(size: float) -> str:
    return f"{size / 2**20:.1f} MB"


def bundle_problems(infos: Iterable[zipfile.ZipInfo], limits: BundleLimits) -> list[str]:
    """Why an archive with these members is not a bundle to unpack (empty: it may be unpacked), from its directory
    alone."""
    infos = list(infos)
    problems = []
    names = [info.filename for info in infos]
    foreign = [name for name in names if not bundled_name(name)]
    if foreign:
        shown = ", ".join(repr(name) for name in foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        problems.append(f"it holds {len(foreign)} file(s) a bundle never holds: {shown} (a bundle holds results, "
                        f"settings and reports as .jsonl/.json/.md, plots as .png and {RECORDING_FILE})")
    if len(set(names)) != len(names):
        problems.append("it holds a name twice")
    if len(infos) > limits.max_files:
        problems.append(f"it holds {len(infos)} files; the limit is {limits.max_files}")
    total = 0
    for info in infos:
        total += info.file_size
        if info.file_size > limits.max_member_bytes:
            problems.append(f"{info.filename!r} would be {_mb(info.file_size)}; the limit is "
                            f"{_mb(limits.max_member_bytes)}")
        if info.file_size > limits.ratio_min_bytes and (
                info.compress_size <= 0 or info.file_size / info.compress_size > limits.max_ratio):
            ratio = info.file_size / max(info.compress_size, 1)
            problems.append(f"{info.filename!r} expands {ratio:.0f} times ({_mb(info.compress_size)} to "
                            f"{_mb(info.file_size)}; the limit is {limits.max_ratio:g} times): a zip bomb")
        if info.flag_bits & 0x1:
            problems.append(f"{info.filename!r} is encrypted")
    if total > limits.max_total_bytes:
        problems.append(f"it would expand to {_mb(total)}; the limit is {_mb(limits.max_total_bytes)}")
    return problems


def directory_problems(entries: int, directory_bytes: int, limits: BundleLimits) -> list[str]:
    """Why an archive whose end record announces ``entries`` members in a directory of ``directory_bytes`` is not
    a bundle to read any further (empty: its directory may be read)."""
    problems = []
    if entries > limits.max_files:
        problems.append(f"it announces {entries} files; the limit is {limits.max_files}")
    if directory_bytes > limits.max_directory_bytes:
        problems.append(f"its directory takes {directory_bytes} bytes; the limit is {limits.max_directory_bytes} "
                        f"({limits.max_files} files)")
    return problems


def _end_record(bundle: Path) -> tuple[int, int] | None:
    """``(members, directory bytes)`` as the archive's end record (or its Zip64 one) states them, read from the last
    64 KiB of the file; ``None`` when there is none. The record is found by ``zipfile``'s own function, so that it
    is the very record ``zipfile.ZipFile`` then reads the directory by."""
    with open(bundle, "rb") as f:
        record = zipfile._EndRecData(f)  # type: ignore[attr-defined]  # the record ZipFile uses (see docstring)
    if not record:
        return None
    return int(record[4]), int(record[5])  # _ECD_ENTRIES_TOTAL, _ECD_SIZE


def unpack(bundle: Path, folder: Path, limits: BundleLimits | None = None) -> list[Path]:
    """Unpack the bundle ``bundle`` into ``folder`` (created if needed; a link there refused) after the checks of
    the module docstring; returns the files written. A bundle that fails a check is a :class:`BundleError` naming
    the bundle, the member and the limit, and leaves no member of it in ``folder``."""
    limits = limits or BundleLimits()
    try:
        end = _end_record(bundle)
    except (OSError, zipfile.BadZipFile) as exc:
        raise BundleError(f"{bundle} is not a readable zip archive: {exc}") from exc
    if end is None:
        raise BundleError(f"{bundle} is not a readable zip archive (no end of central directory record)")
    problems = directory_problems(*end, limits)
    if problems:
        raise BundleError(f"{bundle} is refused: " + "; ".join(problems))
    try:
        archive = zipfile.ZipFile(bundle)
    except (zipfile.BadZipFile, OSError) as exc:
        raise BundleError(f"{bundle} is not a readable zip archive: {exc}") from exc
    with archive:
        infos = archive.infolist()
        if BUNDLE_INFO not in {info.filename for info in infos}:
            raise BundleError(f"{bundle} is not a kgagents evaluation bundle (no {BUNDLE_INFO})")
        problems = bundle_problems(infos, limits)
        if problems:
            raise BundleError(f"{bundle} is refused: " + "; ".join(problems))
        try:
            own_folder(folder, "the bundle's files")
        except LinkRefused as exc:
            raise BundleError(f"{bundle} is not unpacked: {exc}") from exc
        written: list[Path] = []
        try:
            for info in infos:
                written.append(_write_member(archive, info, folder))
        except BundleError:
            for path in written:
                path.unlink(missing_ok=True)
            raise
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
            for path in written:
                path.unlink(missing_ok=True)
            raise BundleError(f"{bundle} is damaged and could not be unpacked: {type(exc).__name__}: {exc}") from exc
    return written


def _write_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, folder: Path) -> Path:
    """Write one member to a temporary file in ``folder``, at most its declared size, then move it into place."""
    target = folder / info.filename
    handle, temporary = tempfile.mkstemp(prefix=".unpacking-", dir=folder)
    try:
        size = 0
        with os.fdopen(handle, "wb") as out, archive.open(info) as source:
            while chunk := source.read(_CHUNK):
                size += len(chunk)
                if size > info.file_size:
                    raise BundleError(f"{info.filename!r} holds more data than the bundle's directory declares "
                                      f"({_mb(info.file_size)}): refused as a zip bomb")
                out.write(chunk)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target
