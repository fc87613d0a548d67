"""How many worker processes an evaluation runs on this machine: ``--processes``' value, the usable CPUs,
``auto``'s rule, each worker's share of the items in flight.

Apart from :mod:`kgagents.evals.processes` (which starts the workers) so that the CLI and the benchmarks parse
``--processes`` without importing the runner's stack.
"""

from __future__ import annotations

import argparse
import os


def shares(concurrency: int, processes: int) -> list[int]:
    """Items in flight per worker process: ``concurrency`` split as evenly as it goes (none gets 0)."""
    n = max(1, min(processes, concurrency))
    return [concurrency // n + (1 if i < concurrency % n else 0) for i in range(n)]


#: Items in flight that one process's event loop keeps up with on the real model client before its CPU makes
#: them wait (``kgagents.evals.bench_batch``: about 0.9·C up to C = 64 through langchain-openai at 200 ms per call; two
#: processes on two cores gave 0.87·C at C = 64 and 0.82·C at C = 128, one process 0.86·C at C = 128).
ITEMS_PER_PROCESS = 64


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def processes_argument(value: str) -> int | str:
    """``--processes``: a number of worker processes, or ``auto``."""
    if value == "auto":
        return value
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of processes or auto, not {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError("at least 1 process")
    return n


def auto_processes(concurrency: int, cpus: int | None = None) -> int:
    """Worker processes for ``concurrency`` items in flight: one per :data:`ITEMS_PER_PROCESS` items, at most
    one per usable CPU, and 1 (this process, no workers) while one event loop keeps up."""
    cpus = usable_cpus() if cpus is None else cpus
    return max(1, min(cpus, -(-concurrency // ITEMS_PER_PROCESS)))


def processes_for(processes: int | str, concurrency: int) -> int:
    """Worker processes for a run at ``concurrency`` (``--processes``: a number, at most one per item in flight,
    or ``auto``: :func:`auto_processes`)."""
    if processes == "auto":
        return auto_processes(concurrency)
    return max(1, min(int(processes), concurrency))
