"""The disk quota of a sandboxed call: what it writes into its work dir, counted while it runs and once more
when it ends (``RLIMIT_FSIZE`` caps each file, not their number or sum)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from kgagents.core.tempdirs import remove_tree
from kgagents.tools.sandbox import limits
from kgagents.tools.sandbox.limits import RUN_DIR_NAME, DiskQuota

_MB = 1024 * 1024


def _disk_usage(work_dir: Path, own_run: Path, *, stop_after: tuple[int, int] | None = None,
                paths: set[str] | None = None) -> tuple[int, int]:
    """``(bytes, entries)`` in ``work_dir``: the sizes of its files and the number of its files, folders and
    links, without following links. Of the calls' job folders (``.sandbox/run-*``) only ``own_run`` counts:
    every call counts its own. Stops early once ``stop_after`` is passed; adds every path it sees to
    ``paths``."""
    root = os.fspath(work_dir)
    size = entries = 0
    todo = [root]
    while todo:
        folder = todo.pop()
        try:
            scan = os.scandir(folder)
        except OSError:  # removed meanwhile, or made unreadable by the code: what it holds is not counted
            continue
        with scan:
            for entry in scan:
                if folder == root and entry.name == RUN_DIR_NAME:
                    todo.append(os.fspath(own_run))
                    continue
                entries += 1
                if paths is not None:
                    paths.add(entry.path)
                try:
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
                    else:
                        size += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    continue
                if stop_after is not None and (size > stop_after[0] or entries > stop_after[1]):
                    return size, entries
    return size, entries


class _QuotaWatch:
    """Counts what one call adds to its work dir against the :class:`DiskQuota`: in a thread that polls while
    the call runs (and stops the call when the quota is crossed), and once more when the call has ended."""

    def __init__(self, work_dir: Path, run_dir: Path, quota: DiskQuota) -> None:
        self.work_dir, self.run_dir, self.quota = work_dir, run_dir, quota
        self.before: set[str] = set()
        self.initial = _disk_usage(work_dir, run_dir, paths=self.before)
        size, entries = self.initial
        #: The most the work dir may hold while the call runs: the call's share, within the run's quota (a
        #: work dir already over the run's quota may not grow).
        self.limit = (min(max(quota.run_mb * _MB, size), size + quota.call_mb * _MB),
                      min(max(quota.run_files, entries), entries + quota.call_files))
        self.stopped = False
        self._crossed = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, stop_call: Callable[[], None]) -> None:
        """Poll every ``QUOTA_POLL_S`` until :meth:`finish`; call ``stop_call`` when the quota is crossed."""

        def poll() -> None:
            while not self._done.wait(limits.QUOTA_POLL_S):
                if self._over():
                    self.stopped = True
                    stop_call()
                    return

        self._thread = threading.Thread(target=poll, name="kgagents-sandbox-quota", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling (idempotent)."""
        self._done.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _over(self) -> bool:
        size, entries = _disk_usage(self.work_dir, self.run_dir, stop_after=self.limit)
        self._crossed = self._crossed or size > self.limit[0] or entries > self.limit[1]
        return self._crossed

    def finish(self) -> str | None:
        """After the call (its processes are gone): stop polling and count once more. When the call crossed
        the quota, remove what it created in the work dir and return the error message; else None."""
        self.stop()
        if not self._crossed and not self._over():
            return None
        after: set[str] = set()
        size, entries = _disk_usage(self.work_dir, self.run_dir, paths=after)
        removed = self._remove(after - self.before)
        return self._message(size, entries, removed)

    def _remove(self, created: set[str]) -> int:
        """Remove what the call created outside its job folder (which goes anyway); returns how much."""
        job = os.fspath(self.run_dir) + os.sep
        created = {path for path in created if not path.startswith(job)}
        for path in created:
            if os.path.dirname(path) in created:
                continue  # goes with its folder
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    remove_tree(Path(path))
                else:
                    os.unlink(path)
            except OSError:
                pass
        return len(created)

    def _message(self, size: int, entries: int, removed: int) -> str:
        q, (size0, entries0) = self.quota, self.initial
        added, made = (size - size0) / _MB, entries - entries0
        if added > q.call_mb:
            what = f"the code wrote {added:,.1f} MB into its work dir (a call may write {q.call_mb:,} MB)"
        elif made > q.call_files:
            what = f"the code made {made:,} files and folders (a call may make {q.call_files:,})"
        elif size > self.limit[0]:
            what = f"its work dir came to {size / _MB:,.1f} MB (a run may keep {q.run_mb:,} MB)"
        else:
            what = f"its work dir came to {entries:,} files and folders (a run may keep {q.run_files:,})"
        steps = ["it was stopped"] if self.stopped else []
        if removed:
            steps.append(f"what it made there was removed ({removed:,} files and folders)")
        return f"disk quota exceeded: {what}" + (f"; {' and '.join(steps)}" if steps else "")
