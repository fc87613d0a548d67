"""Which folders may configure kgagents: a folder's ``.env`` and ``.kgagents`` are used only after the user trusts
that folder once (``kgagents trust``), as direnv does with ``.envrc``.

A folder someone else hands you (a cloned repository, an unpacked archive) is data: its ``.env`` could point the
user's keys at another server or switch off a safeguard, its ``.kgagents`` could hold graph manifests that name
servers of its choosing. So kgagents reads them only from folders in the user's trust store
(:func:`trust_store_path`: ``trusted-folders.json`` in the per-user configuration folder, readable by its owner
only), keyed by the folder's real path. A ``.env`` is trusted together with the SHA-256 of its content: a changed
``.env`` is ignored until the user trusts the folder again. A ``.kgagents`` is trusted with the folder when it
existed at that moment (its content changes with every run); one that appears later asks again.

Decisions are pure functions of the store's entry and what is on disk (:func:`judge`); reading and writing the
store are separate.

This module imports only the exception root and :mod:`kgagents.core.private`.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from kgagents.core.errors import KGAgentsError
from kgagents.core.private import private_dir

__all__ = ["DOTENV", "MAX_ENV_BYTES", "PROJECT_DIR", "TRUST_FILE", "FolderConfig", "Seen", "TrustStoreError",
           "Trusted", "env_digest", "folder_config", "judge", "look_at", "read_env_file", "read_store",
           "revoke_folder", "trust_folder", "trust_store_path", "trusted_folders", "user_config_dir"]

DOTENV = ".env"
PROJECT_DIR = ".kgagents"
TRUST_FILE = "trusted-folders.json"
#: The store's format; a store of another version is refused (never read as if it were this one).
STORE_VERSION = 1

EnvState = Literal["absent", "trusted", "untrusted", "changed"]
DirState = Literal["absent", "trusted", "untrusted", "new"]


class TrustStoreError(KGAgentsError, RuntimeError):
    """The trust store cannot be used (another user's file, writable by others, not kgagents' format)."""


def user_config_dir(app: str = "kgagents") -> Path:
    """The platform's per-user configuration folder for ``app``: ``$XDG_CONFIG_HOME/app`` or ``~/.config/app``
    (Linux and other Unix), ``~/Library/Application Support/app`` (macOS), ``%APPDATA%\\app`` (Windows)."""
    if sys.platform == "win32":
        base = (os.environ.get("APPDATA") or "").strip() or str(Path.home() / "AppData" / "Roaming")
        return Path(base) / app
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / app
    xdg = (os.environ.get("XDG_CONFIG_HOME") or "").strip()
    # the XDG specification: a relative XDG_CONFIG_HOME is invalid and ignored
    return (Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config") / app


def trust_store_path() -> Path:
    """The trust store: ``trusted-folders.json`` in :func:`user_config_dir`."""
    return user_config_dir() / TRUST_FILE


@dataclass(frozen=True)
class Trusted:
    """One trusted folder, as the store keeps it."""

    folder: str
    """The folder's real path (links resolved)."""
    env_sha256: str | None
    """The SHA-256 of its ``.env`` when it was trusted (``None``: it had none)."""
    kgagents: bool
    """Whether its ``.kgagents`` folder existed when it was trusted."""
    trusted_at: float


#: The largest ``.env`` kgagents reads (a configuration file; anything bigger is not one).
MAX_ENV_BYTES = 1 << 20


def read_env_file(path: Path) -> bytes | None:
    """The bytes of the regular file ``path`` (``None`` when there is none, it is no regular file -- a FIFO named
    ``.env`` is not waited on -- or it is over :data:`MAX_ENV_BYTES`, which no configuration file is)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENV_BYTES:
            return None
        try:
            data = f.read(MAX_ENV_BYTES + 1)
        except OSError:
            return None
    return data if len(data) <= MAX_ENV_BYTES else None


def env_digest(path: Path) -> str | None:
    """The SHA-256 of the ``.env`` at ``path`` (:func:`read_env_file`; ``None`` when there is none)."""
    data = read_env_file(path)
    return None if data is None else hashlib.sha256(data).hexdigest()


def judge(entry: Trusted | None, env_sha256: str | None, has_kgagents: bool) -> tuple[EnvState, DirState]:
    """Whether a folder's ``.env`` (its digest, ``None``: none) and ``.kgagents`` may be used, given its trust
    store ``entry`` (``None``: never trusted): the ``.env`` when its content is the one trusted, the
    ``.kgagents`` when it existed when the folder was trusted."""
    if env_sha256 is None:
        env: EnvState = "absent"
    elif entry is None:
        env = "untrusted"
    else:
        env = "trusted" if entry.env_sha256 == env_sha256 else "changed"
    if not has_kgagents:
        folder: DirState = "absent"
    elif entry is None:
        folder = "untrusted"
    else:
        folder = "trusted" if entry.kgagents else "new"
    return env, folder


@dataclass(frozen=True)
class FolderConfig:
    """A folder's own configuration and whether kgagents may use it."""

    folder: Path
    env_state: EnvState
    kgagents_state: DirState
    problem: str | None = None
    """Why the trust store could not be read (everything is then untrusted)."""
    env_sha256: str | None = None
    """The SHA-256 of the ``.env`` that was judged (read again, it is used only if it is still that one)."""

    @property
    def env(self) -> Path:
        return self.folder / DOTENV

    @property
    def kgagents(self) -> Path:
        return self.folder / PROJECT_DIR

    def ignored(self, *, env: bool = True, kgagents: bool = True) -> str | None:
        """One line saying what of this folder is ignored, why, and how to use it (``None``: nothing is);
        ``env`` / ``kgagents``: whether that part would be read at all (``KGAGENTS_NO_DOTENV``,
        ``KGAGENTS_HOME``)."""
        reasons = {"untrusted": self.problem or "this folder is not trusted",
                   "changed": "changed since you trusted this folder", "new": "made since you trusted this folder"}
        parts = []
        if env and self.env_state in reasons:
            parts.append((str(self.env), reasons[self.env_state]))
        if kgagents and self.kgagents_state in reasons:
            parts.append((str(self.kgagents), reasons[self.kgagents_state]))
        if not parts:
            return None
        if len({why for _, why in parts}) == 1:
            what = f"{' and '.join(path for path, _ in parts)} ({parts[0][1]})"
        else:
            what = " and ".join(f"{path} ({why})" for path, why in parts)
        return (f"ignored {what}; if you wrote {'them' if len(parts) > 1 else 'it'}, `kgagents trust "
                f"{_shell_word(str(self.folder))}` uses {'them' if len(parts) > 1 else 'it'} (docs/security.md)")


def _shell_word(text: str) -> str:
    """``text`` as one word of a shell command line (quoted when it has to be)."""
    if text and all(c.isalnum() or c in "/._-+:@%" for c in text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


def real_folder(folder: str | os.PathLike[str] | None = None) -> Path:
    """``folder`` (default: the working directory) with every link resolved: the key of the trust store."""
    return Path(os.path.realpath(folder if folder is not None else os.getcwd()))


def read_store(path: Path | None = None) -> dict[str, Trusted]:
    """The trusted folders, by real path. A missing store is empty; one that belongs to another user, that
    others may write, or that is not kgagents' format raises :class:`TrustStoreError` (nothing is trusted then:
    a store someone else can write would let them trust folders for you)."""
    path = path or trust_store_path()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise TrustStoreError(f"cannot read the trust store {path}: {exc.strerror or exc}") from exc
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise TrustStoreError(f"the trust store {path} is not a regular file")
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise TrustStoreError(f"the trust store {path} belongs to another user")
        if os.name != "nt" and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise TrustStoreError(f"the trust store {path} may be written by other users (chmod 600 it)")
        raw = f.read(1 << 22)
    try:
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict) or data.get("version") != STORE_VERSION:
            raise ValueError(f"not version {STORE_VERSION} of kgagents' trust store")
        return {str(key): _entry(key, value) for key, value in (data.get("folders") or {}).items()}
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as exc:
        raise TrustStoreError(f"the trust store {path} cannot be read ({exc}); `kgagents trust --list` "
                              "shows it, and removing the file forgets every trusted folder") from exc


def _entry(folder: str, value: Mapping[str, Any]) -> Trusted:
    digest = value.get("env_sha256")
    if digest is not None and not isinstance(digest, str):
        raise ValueError(f"the .env digest of {folder} is not text")
    return Trusted(str(folder), digest, bool(value["kgagents"]), float(value.get("trusted_at") or 0.0))


def _write_store(entries: Mapping[str, Trusted], path: Path) -> None:
    """Write the store atomically, readable and writable by its owner only (its folder too)."""
    private_dir(path.parent)
    data = {"version": STORE_VERSION,
            "folders": {key: {k: v for k, v in asdict(entry).items() if k != "folder"}
                        for key, entry in sorted(entries.items())}}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mkstemp: mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Seen:
    """A folder's own configuration as read once (:func:`look_at`): what ``kgagents trust`` shows is what it
    records, even if the ``.env`` changes in between."""

    folder: Path
    """The folder's real path."""
    env: bytes | None
    """The bytes of its ``.env`` (:func:`read_env_file`; ``None``: none that kgagents reads)."""
    kgagents: bool
    """Whether it has a ``.kgagents`` folder."""

    @property
    def env_sha256(self) -> str | None:
        return None if self.env is None else hashlib.sha256(self.env).hexdigest()


def look_at(folder: str | os.PathLike[str] | None = None) -> Seen:
    """``folder``'s (default: the working directory's) ``.env`` and ``.kgagents``, read once."""
    real = real_folder(folder)
    if not real.is_dir():
        raise ValueError(f"{real} is not a folder")
    return Seen(real, read_env_file(real / DOTENV), (real / PROJECT_DIR).is_dir())


def trust_folder(folder: str | os.PathLike[str] | None = None, *, store: Path | None = None,
                 seen: Seen | None = None) -> Trusted:
    """Trust ``folder`` (default: the working directory): its ``.env`` as it is now, its ``.kgagents`` if it
    has one; or, given ``seen``, the ``.env`` and ``.kgagents`` as they were read then (what the user was
    shown). Trusting again records the ``.env``'s new content."""
    path = store or trust_store_path()
    seen = seen or look_at(folder)
    entries = read_store(path)
    entry = Trusted(str(seen.folder), seen.env_sha256, seen.kgagents, time.time())
    entries[str(seen.folder)] = entry
    _write_store(entries, path)
    return entry


def revoke_folder(folder: str | os.PathLike[str] | None = None, *, store: Path | None = None) -> bool:
    """Forget ``folder`` (default: the working directory); False when it was not trusted."""
    path = store or trust_store_path()
    entries = read_store(path)
    # the folder may be gone: its path as given, made absolute, is also a key to forget
    keys = {str(real_folder(folder)), os.path.abspath(folder if folder is not None else os.getcwd())}
    found = [key for key in keys if key in entries]
    for key in found:
        del entries[key]
    if found:
        _write_store(entries, path)
    return bool(found)


def trusted_folders(store: Path | None = None) -> list[Trusted]:
    """Every trusted folder, by path."""
    return [entry for _, entry in sorted(read_store(store).items())]


def folder_config(folder: str | os.PathLike[str] | None = None, *, store: Path | None = None) -> FolderConfig:
    """What of ``folder``'s (default: the working directory's) own configuration may be used."""
    real = real_folder(folder)
    problem = None
    try:
        entry = read_store(store).get(str(real))
    except TrustStoreError as exc:
        entry, problem = None, str(exc)
    digest = env_digest(real / DOTENV)
    env_state, dir_state = judge(entry, digest, (real / PROJECT_DIR).is_dir())
    return FolderConfig(real, env_state, dir_state, problem, digest)
