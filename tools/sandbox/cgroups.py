"""The pids cgroup of a sandboxed call (optional): caps its processes *and threads* where the host lets this
process create a cgroup (``KGAGENTS_SANDBOX_NO_CGROUP=1`` turns it off)."""

from __future__ import annotations

import functools
import os
import signal
import time
import uuid
from pathlib import Path


@functools.lru_cache(maxsize=1)
def _pids_cgroup_parent() -> Path | None:
    """A cgroup directory under which this process may create pids-limited children, or None."""
    if os.environ.get("KGAGENTS_SANDBOX_NO_CGROUP"):
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    candidates: list[Path] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers, rel = parts[1].split(","), parts[2].lstrip("/")
        if "pids" in controllers:
            candidates.append(Path("/sys/fs/cgroup/pids") / rel)
        elif parts[0] == "0" and parts[1] == "":
            base = Path("/sys/fs/cgroup") / rel
            try:
                if "pids" in (base / "cgroup.subtree_control").read_text().split():
                    candidates.append(base)
            except OSError:
                pass
    for base in candidates:
        probe = base / f"kgagents-sandbox-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            (probe / "pids.max").write_text("8")
            return base
        except OSError:
            continue
        finally:
            try:
                probe.rmdir()
            except OSError:
                pass
    return None


class _PidsCgroup:
    """One call's cgroup: ``pids.max`` processes/threads; the call's process is moved into it before it starts
    bubblewrap (:func:`_confine`)."""

    def __init__(self, limit: int) -> None:
        self.path: Path | None = None
        parent = _pids_cgroup_parent()
        if parent is None:
            return
        path = parent / f"kgagents-sandbox-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
            self.path = path
        except OSError:
            try:
                path.rmdir()
            except OSError:
                pass

    @property
    def procs_file(self) -> str | None:
        return str(self.path / "cgroup.procs") if self.path else None

    def kill_all(self) -> None:
        if self.path is None:
            return
        for _ in range(50):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                return
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)

    def remove(self) -> None:
        path = self.path
        if path is None:
            return
        self.kill_all()
        for _ in range(50):
            try:
                path.rmdir()
                self.path = None
                return
            except FileNotFoundError:
                self.path = None
                return
            except OSError:
                time.sleep(0.01)
