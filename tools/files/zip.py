"""Safe extraction of zip archives into the run's work directory.

Members with absolute paths, drive letters or ``..`` components, and symbolic links, are skipped (never
written); every written file is checked to land inside the target directory. Zip bombs are refused before
anything is written (too many files, too much declared data, a suspicious compression ratio), and the bytes
actually written are counted too, so a member that lies about its size is stopped at the limit.
"""

from __future__ import annotations

import io
import re
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kgagents.tools.base import ToolFailure

CHUNK = 1024 * 1024


@dataclass(frozen=True)
class ZipLimits:
    """Limits against zip bombs (``ToolEnv.extra["zip_limits"]`` overrides the defaults)."""

    max_files: int = 1000
    max_total_bytes: int = 200 * 1024 * 1024
    max_ratio: float = 100.0
    """Largest uncompressed/compressed ratio of a member bigger than :attr:`ratio_min_bytes`."""
    ratio_min_bytes: int = 1024 * 1024


class ZipBombError(ToolFailure):
    """The archive exceeds the extraction limits."""


@dataclass
class Extraction:
    """What an extraction wrote and what it skipped (with the reason)."""

    archive: str
    target: Path
    files: list[Path] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def relative(self, path: Path) -> str:
        """``path`` relative to the extraction directory."""
        return path.relative_to(self.target).as_posix()


def _safe_name(name: str) -> str | None:
    """The member's relative POSIX path, or ``None`` when it is absolute or climbs out."""
    name = name.replace("\\", "/")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return None
    parts = [p for p in PurePosixPath(name).parts if p not in {"", "."}]
    if not parts or any(p == ".." for p in parts):
        return None
    return "/".join(parts)


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    mode = info.external_attr >> 16
    return info.create_system == 3 and stat.S_ISLNK(mode)


def _stem(name: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).stem).strip("._") or "archive"
    return stem[:80]


def check_limits(infos: list[zipfile.ZipInfo], limits: ZipLimits) -> None:
    """Refuse an archive whose directory already shows a zip bomb."""
    files = [i for i in infos if not i.is_dir()]
    if len(files) > limits.max_files:
        raise ZipBombError(f"the archive holds {len(files)} files; the limit is {limits.max_files}")
    total = sum(i.file_size for i in files)
    if total > limits.max_total_bytes:
        raise ZipBombError(f"the archive would expand to {total / 2**20:.1f} MB; the limit is "
                           f"{limits.max_total_bytes / 2**20:.0f} MB")
    for info in files:
        if info.file_size > limits.ratio_min_bytes and info.compress_size > 0 and \
                info.file_size / info.compress_size > limits.max_ratio:
            raise ZipBombError(f"{info.filename} expands {info.file_size / info.compress_size:.0f} times "
                               f"(limit {limits.max_ratio:g}): refused as a likely zip bomb")


def extract(data: bytes | Path, dest_root: Path, *, name: str = "archive.zip",
            limits: ZipLimits | None = None) -> Extraction:
    """Extract an archive into ``dest_root/<archive stem>`` (see the module docstring)."""
    limits = limits or ZipLimits()
    try:
        archive = zipfile.ZipFile(io.BytesIO(data) if isinstance(data, bytes) else data)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ToolFailure(f"{name} is not a readable zip archive: {exc}") from exc
    with archive:
        infos = archive.infolist()
        check_limits(infos, limits)
        dest_root = Path(dest_root).resolve()
        target = dest_root / _stem(name)
        if target.is_symlink():
            raise ToolFailure(f"refusing to extract into {target}: it is a symbolic link")
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        result = Extraction(archive=name, target=target)
        written = 0
        try:
            for info in infos:
                rel = _safe_name(info.filename)
                if rel is None:
                    result.skipped.append((info.filename, "unsafe path (absolute or '..')"))
                    continue
                if _is_symlink(info):
                    result.skipped.append((info.filename, "symbolic link"))
                    continue
                out = (target / rel).resolve()
                if not out.is_relative_to(target):
                    result.skipped.append((info.filename, "path leaves the extraction directory"))
                    continue
                if info.is_dir():
                    out.mkdir(parents=True, exist_ok=True)
                    continue
                if info.flag_bits & 0x1:
                    result.skipped.append((info.filename, "encrypted"))
                    continue
                out.parent.mkdir(parents=True, exist_ok=True)
                written += _copy_member(archive, info, out, limits.max_total_bytes - written)
                result.files.append(out)
        except ZipBombError:
            shutil.rmtree(target, ignore_errors=True)
            raise
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
            shutil.rmtree(target, ignore_errors=True)
            raise ToolFailure(f"{name} is damaged and could not be extracted: {type(exc).__name__}: {exc}") from exc
    return result


def _copy_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, out: Path, budget: int) -> int:
    """Write one member, stopping at the declared size or the remaining budget (whichever is smaller)."""
    allowed = min(info.file_size, budget)
    size = 0
    with archive.open(info) as src, open(out, "wb") as dst:
        while True:
            chunk = src.read(CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > allowed:
                raise ZipBombError(f"{info.filename} holds more data than it declares or than the "
                                   f"extraction limit allows: refused as a likely zip bomb")
            dst.write(chunk)
    return size
