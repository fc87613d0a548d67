"""The event loop of evaluation runs and benchmarks: uvloop where it is installed.

A batch evaluation keeps tens to hundreds of model calls in flight in one process, and the event loop's own
scheduling is a measurable share of its CPU (``kgagents.evals.bench_batch``: 0.86·C → 0.88·C at C = 64 on two cores,
loop CPU -7 %). uvloop is a drop-in replacement for asyncio's loop on Linux and macOS; elsewhere, or with
``KGAGENTS_EVENT_LOOP=asyncio``, asyncio's own loop runs.
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

#: ``KGAGENTS_EVENT_LOOP``: ``uvloop`` (the default where installed) or ``asyncio``.
VARIABLE = "KGAGENTS_EVENT_LOOP"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None for asyncio's loop (asked for, or uvloop not installed)."""
    choice = (os.environ.get(VARIABLE) or "uvloop").strip().lower()
    if choice == "asyncio":
        return None
    if choice != "uvloop":
        raise ValueError(f"{VARIABLE}={choice!r}: expected 'uvloop' or 'asyncio'")
    try:
        import uvloop  # optional: not installed on Windows
    except ImportError:  # Windows, or a trimmed install
        return None
    return uvloop.new_event_loop


def run[T](main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop :func:`loop_factory` chooses."""
    try:
        factory = loop_factory()
    except ValueError:
        main.close()  # never started: no "never awaited" warning on top of the error
        raise
    return asyncio.run(main, loop_factory=factory)


#: The young generation's collection threshold during a batch (CPython's default: 700 allocations).
BATCH_GC_THRESHOLD = 10_000


@contextmanager
def batch_collector() -> Iterator[None]:
    """Garbage-collector settings for many items in flight in one process, restored afterwards.

    Everything that exists when the batch starts (imported libraries, the compiled graph) lives until it ends:
    ``gc.freeze()`` keeps the collector from scanning those objects again and again (a full collection of an
    evaluation process otherwise stops every item for about 0.1 s). The young generation is collected every
    ``BATCH_GC_THRESHOLD`` allocations rather than 700, so that the state of items that are merely waiting for a
    model is not promoted and rescanned. Reference counting frees almost everything anyway; this only spaces
    out the searches for reference cycles.
    """
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], BATCH_GC_THRESHOLD), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
