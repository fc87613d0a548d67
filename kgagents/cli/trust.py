"""``kgagents trust``: let a folder's own configuration (its ``.env`` and ``.kgagents``) be used.

    kgagents trust [DIR]            trust DIR (default: this folder): its .env as it is now, its .kgagents
    kgagents trust --revoke [DIR]   forget DIR
    kgagents trust --list           the trusted folders

kgagents reads a folder's ``.env`` and ``.kgagents`` only once the user has trusted that folder
(:mod:`kgagents.core.trust`); a ``.env`` changed since then is ignored until it is trusted again. Trusting shows
what the ``.env`` sets, the addresses it names (where keys and passwords will go) and what a ``.env`` never sets,
then records the very bytes it showed: the folder is read once.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kgagents.core.config import dotenv_may_set, read_dotenv
from kgagents.core.redact import without_credentials
from kgagents.core.trust import (
    DOTENV,
    PROJECT_DIR,
    TrustStoreError,
    look_at,
    read_env_file,
    revoke_folder,
    trust_folder,
    trust_store_path,
    trusted_folders,
)

#: A value that holds a URL (``scheme://``): an address, whatever its variable is called.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
#: The endings of the variables whose values are addresses even without a scheme (``OLLAMA_HOST=host:port``).
ADDRESS_SUFFIXES = ("_URL", "_URI", "_BASE", "_ENDPOINT", "_HOST", "_HOSTS", "_SERVER", "_HTTP")


def add_commands(sub: Any, command: Callable[[str], Callable[[Any], Any]]) -> None:
    """Add ``trust`` to the ``kgagents`` parser."""
    parser = sub.add_parser("trust", help="use a folder's own .env and .kgagents (trust it once, as direnv does)",
                            description="kgagents reads the .env and .kgagents of a folder only after you trust it "
                                        "here; a changed .env asks again. The trusted folders are kept in "
                                        f"{trust_store_path()}.")
    parser.add_argument("folder", nargs="?", metavar="DIR", help="the folder (default: this one)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--revoke", action="store_true", help="forget the folder")
    what.add_argument("--list", action="store_true", help="list the trusted folders")
    command("trust")(cmd_trust)


def cmd_trust(args: argparse.Namespace) -> int:
    try:
        if args.list:
            if args.folder:
                raise ValueError("--list takes no folder")
            return _list()
        if args.revoke:
            if revoke_folder(args.folder):
                print(f"no longer trusted: {Path(args.folder or '.').resolve()}")
            else:
                print(f"{Path(args.folder or '.').resolve()} was not trusted")
            return 0
        # read once: what is shown is what is recorded (a .env changed in between is not trusted)
        seen = look_at(args.folder)
        print(f"trusting {seen.folder}")
        lines = describe_env(seen.folder / DOTENV, seen.env) if seen.env is not None else \
            ["  no .env (one written later asks again)"]
        for line in lines:
            print(line)
        print(f"  {PROJECT_DIR}: " + ("the data home of kgagents started here" if seen.kgagents else
                                     "none (one made later asks again)"))
        entry = trust_folder(seen.folder, seen=seen)
    except TrustStoreError as exc:
        raise ValueError(str(exc)) from exc
    print(f"trusted {entry.folder}")
    return 0


def addresses(values: Mapping[str, str | None]) -> list[tuple[str, str]]:
    """The variables of a ``.env`` (as written, :func:`kgagents.core.config.read_dotenv`) that name an address
    kgagents sends requests to, keys and passwords included: every one it reads whose value holds a URL
    (``KGAGENTS_CHECKPOINTER=postgresql://...`` too), and those whose name says they hold a host; each with its
    value, user part and secret parameters removed (``kgagents trust`` prints them)."""
    found = []
    for name, value in values.items():
        text = (value or "").strip()
        if text and dotenv_may_set(name) and (_URL.search(text) or name.endswith(ADDRESS_SUFFIXES)):
            found.append((name, without_credentials(text)))
    return sorted(found)


def describe_env(path: Path, data: bytes | None = None) -> list[str]:
    """What a ``.env`` sets (names only), the addresses it names, the values kept with ``${...}`` and what
    kgagents never takes from it; ``data``: its bytes as read (default: read now)."""
    data = read_env_file(path) if data is None else data
    values = read_dotenv(data.decode("utf-8", errors="replace")) if data is not None else {}
    taken = sorted(name for name in values if dotenv_may_set(name))
    refused = sorted(name for name in values if not dotenv_may_set(name))
    lines = [f"  {path}: sets {', '.join(taken) if taken else 'nothing kgagents reads'}"]
    named = addresses(values)
    if named:
        lines.append("  it sends requests (and the keys and passwords bound to them) to: "
                     + ", ".join(f"{name}={value}" for name, value in named))
    literal = [name for name in taken if "${" in (values[name] or "")]
    if literal:
        lines.append(f"  kept as written, ${{...}} not expanded: {', '.join(literal)}")
    if refused:
        lines.append(f"  never read from a .env: {', '.join(refused)}")
    lines.append("  a changed .env is ignored until you trust this folder again")
    return lines


def _list() -> int:
    entries = trusted_folders()
    if not entries:
        print(f"no trusted folders ({trust_store_path()})")
        return 0
    for entry in entries:
        env = f".env sha256:{entry.env_sha256[:12]}" if entry.env_sha256 else "no .env"
        home = f"{PROJECT_DIR}" if entry.kgagents else f"no {PROJECT_DIR}"
        gone = "" if Path(entry.folder).is_dir() else "  (folder gone)"
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.trusted_at))
        print(f"{entry.folder}  {env}  {home}  trusted {when}{gone}")
    return 0
