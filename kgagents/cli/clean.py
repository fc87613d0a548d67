"""The ``clean`` command: remove the temporary folders that kgagents processes left behind.

    kgagents clean [--dry-run]

Every process keeps its scratch files (the work dirs of runs without a checkpointer) in one folder of the
system's temporary directory, ``kgagents-proc-<pid>-<random>``, and removes it when it exits (and
shorter-lived folders, ``kgagents-proc-<pid>-<kind>-<random>``, when it is done with them); a process that
was killed cannot. This command removes such folders once their process is gone (and
the folders earlier versions left), never one in use, a folder the user named, the runs directory or a static
graph.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from typing import Any


def add_commands(sub: Any, command: Callable[[str], Callable[[Any], Any]]) -> None:
    """Add ``clean`` to the ``kgagents`` parser."""
    clean = sub.add_parser("clean", help="remove the temporary folders of kgagents processes that have ended")
    clean.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    command("clean")(cmd_clean)


def cmd_clean(args: argparse.Namespace) -> int:
    from kgagents.core.tempdirs import clean

    stale = clean(dry_run=args.dry_run)
    for item in stale:
        done = "removed" if not os.path.lexists(item.path) else "could not remove"  # another user's, say
        print(f"{'would remove' if args.dry_run else done} {item.path} ({_size(item.size)}; {item.why})")
    if not stale:
        print(f"nothing to clean in {tempfile.gettempdir()}")
    return 0


def _size(n: int) -> str:
    if n >= 2**20:
        return f"{n / 2**20:,.1f} MB"
    return f"{n / 2**10:,.1f} KB" if n >= 2**10 else f"{n} bytes"
