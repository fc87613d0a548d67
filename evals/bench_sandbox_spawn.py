"""Benchmark (not a test): how long the event loop is held up while sandbox calls start.

    python -m kgagents.evals.bench_sandbox_spawn [--calls 10] [--rounds 5] [--tick-ms 5] [--heavy] [--ballast-mb 0]
                                        [--sandbox-module FILE] [--json FILE]

A task on the event loop sleeps ``--tick-ms`` at a time and notes how late each wake-up comes; meanwhile
``--rounds`` times ``--calls`` sandbox calls (``print(1)``) start together and run to their end. A server on
the same loop (``langgraph dev``'s ``GET /ok``) is late by as much as the ticker. Reported: the ticker's
lateness (the sum over wake-ups more than 2 ms late, the largest, the 99th percentile) and the calls' wall
time, next to the same ticker without calls.

Starting a process costs more the larger this process is (``fork`` copies its page tables); ``--heavy``
imports torch and FAISS first, as the application has, and ``--ballast-mb`` touches that much more memory.
``--sandbox-module`` loads a revision of the sandbox from before it became the package ``tools/sandbox/`` to
compare with (``git show dba1689:tools/sandbox.py > /tmp/sandbox_old.py``); to measure a later revision, run
this benchmark in a worktree of it (``git worktree add /tmp/kgagents-old REV``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Self

from kgagents.tools import sandbox

#: Wake-ups later than this count as the loop being held up (timer and scheduling noise stays below).
LATE_S = 0.002


def _sandbox_module(path: str | None) -> ModuleType:
    """``kgagents.tools.sandbox``, or the module in the file ``path`` (another revision of it)."""
    if path is None:
        return sandbox
    spec = importlib.util.spec_from_file_location("kgagents_bench_sandbox", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load a module from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class _Ticker:
    """Sleeps ``interval`` seconds at a time on the running loop and records how late each wake-up is."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.lateness: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.lateness.append(max(0.0, time.perf_counter() - before - self.interval))

    def __enter__(self) -> Self:
        self._task = asyncio.ensure_future(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()

    def summary(self) -> dict[str, Any]:
        late = sorted(self.lateness)
        if not late:
            return {"ticks": 0}
        return {"ticks": len(late), "late_sum_ms": round(1000 * sum(x for x in late if x > LATE_S), 1),
                "late_max_ms": round(1000 * late[-1], 1),
                "late_p99_ms": round(1000 * late[min(len(late) - 1, int(0.99 * len(late)))], 1)}


async def _measure(sandbox_module: ModuleType, work_dir: Path, calls: int, rounds: int,
                   interval: float) -> dict[str, Any]:
    limits = sandbox_module.SandboxLimits(timeout_s=60, memory_mb=1024)
    box = await asyncio.to_thread(sandbox_module.Sandbox, work_dir, limits)
    await box.run("print(1)")  # warm the file cache and the thread pool
    with _Ticker(interval) as idle:
        await asyncio.sleep(max(0.5, 200 * interval))
    walls: list[float] = []
    with _Ticker(interval) as busy:
        for _ in range(rounds):
            started = time.perf_counter()
            results = await asyncio.gather(*(box.run("print(1)") for _ in range(calls)))
            walls.append(time.perf_counter() - started)
            failed = [r.error for r in results if not r.ok]
            if failed:
                raise SystemExit(f"a sandbox call failed: {failed[0]}")
    return {"idle": idle.summary(), "with_calls": busy.summary(),
            "round_wall_s": {"median": round(statistics.median(walls), 3), "max": round(max(walls), 3)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=10, help="sandbox calls started together (default 10)")
    parser.add_argument("--rounds", type=int, default=5, help="how many times (default 5)")
    parser.add_argument("--tick-ms", type=float, default=5.0, help="the ticker's sleep (default 5 ms)")
    parser.add_argument("--heavy", action="store_true", help="import torch and FAISS first")
    parser.add_argument("--ballast-mb", type=int, default=0, help="touch this much more memory first")
    parser.add_argument("--sandbox-module",
                        help="a single-file revision of the sandbox (tools/sandbox.py, before the package)")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args(argv)
    if args.heavy:
        import faiss  # noqa: F401
        import torch  # noqa: F401
    ballast = bytearray(os.urandom(1)) * (args.ballast_mb * 1024 * 1024)  # noqa: F841 - kept alive
    sandbox_module = _sandbox_module(args.sandbox_module)
    with tempfile.TemporaryDirectory(prefix="kgagents-bench-sandbox-") as tmp:
        numbers = asyncio.run(_measure(sandbox_module, Path(tmp), args.calls, args.rounds,
                                       args.tick_ms / 1000))
    rss_mb = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGESIZE") // 2**20
    report = {"sandbox": args.sandbox_module or "tools/sandbox/", "calls": args.calls,
              "rounds": args.rounds, "tick_ms": args.tick_ms, "heavy": args.heavy, "rss_mb": rss_mb,
              "cpus": os.cpu_count(), "python": platform.python_version(), **numbers}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
