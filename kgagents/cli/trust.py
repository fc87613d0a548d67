"""``kgagents trust``: let a folder's own configuration (its ``.env`` and ``.kgagents``) be used.

    kgagents trust [DIR]            trust DIR (default: this folder): its .env as it is now, its .kgagents
    kgagents trust --revoke [DIR]   forget DIR
    kgagents trust --list           the trusted folders

kgagents reads a folder's ``.env`` and ``.kgagents`` only once the user has trusted that folder
(:mod:`kgagents.core.trust`); a ``.env`` changed since then is ignored until it is trusted again. Trusting shows
what the ``.env`` sets, the addresses it names (where keys and passwords will go) and what a ``.env`` never sets.
"""

from __future__ import annotations

import argparse
import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

from kgagents.core.config import dotenv_may_set
from kgagents.core.trust import (
    DOTENV,
    PROJECT_DIR,
    TrustStoreError,
    read_env_file,
    revoke_folder,
    trust_folder,
    trust_store_path,
    trusted_folders,
)

#: The endings of the variables whose values are addresses: what the trusting user is shown.
ADDRESS_SUFFIXES = ("_URL", "_URI", "_BASE", "_ENDPOINT", "_HOST", "_SERVER", "_HTTP")


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
        entry = trust_folder(args.folder)
    except TrustStoreError as exc:
        raise ValueError(str(exc)) from exc
    folder = Path(entry.folder)
    print(f"trusted {folder}")
    for line in describe_env(folder / DOTENV) if entry.env_sha256 else ["  no .env (one written later asks again)"]:
        print(line)
    print(f"  {PROJECT_DIR}: " + ("the data home of kgagents started here" if entry.kgagents else
                                 "none (one made later asks again)"))
    return 0


def describe_env(path: Path) -> list[str]:
    """What a ``.env`` sets (names only), the addresses it names, and what kgagents never takes from it."""
    data = read_env_file(path)
    values = dotenv_values(stream=io.StringIO(data.decode("utf-8", errors="replace"))) if data is not None else {}
    taken = sorted(name for name in values if dotenv_may_set(name))
    refused = sorted(name for name in values if not dotenv_may_set(name))
    lines = [f"  {path}: sets {', '.join(taken) if taken else 'nothing kgagents reads'}"]
    addresses = [f"{name}={values[name]}" for name in taken
                 if name.endswith(ADDRESS_SUFFIXES) and (values[name] or "").strip()]
    if addresses:
        lines.append(f"  it sends requests (and the keys bound to them) to: {', '.join(addresses)}")
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
