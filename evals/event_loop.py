"""The event loop of evaluation runs and benchmarks: uvloop where it is installed.

A batch evaluation keeps tens to hundreds of model calls in flight in one process, and the event loop's own
scheduling is a measurable share of its CPU (``kgagents.evals.bench_batch``: 0.86·C → 0.88·C at C = 64 on two cores,
loop CPU -7 %). uvloop is a drop-in replacement for asyncio's loop on Linux and macOS; elsewhere, or with
``KGAGENTS_EVENT_LOOP=asyncio``, asyncio's own loop runs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
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
        import uvloop
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
