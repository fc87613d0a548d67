"""Graph reads off the event loop, on a pool of their own, and abandoned when the node that waits on them ends.

A node reads a static KG in a worker thread (a database query or a file read blocks). A thread cannot be stopped
from outside: when the node ends first (its time limit, graphs/policies.py; a cancelled run), the read goes on
until its query returns or its connection gives up (every connection to a graph server gives up at
:func:`~kgagents.tools.kg.servers.client_deadline_s`). So that such reads can never hold the threads every other
``asyncio.to_thread`` of the process needs (opening files and graphs for the other runs of a served graph), they
run here, on :data:`GRAPH_READ_WORKERS` threads of their own; a read still queued when its node ends never starts,
and a running one that is abandoned sends no further query (:func:`check_read`, called by the database before each
query), so a resumed node does not race the read it replaces.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kgagents.core.errors import KGAgentsError

__all__ = ["GRAPH_READ_WORKERS", "GraphReadAbandoned", "check_read", "graph_read"]

#: The threads that graph reads share in a process: enough for the runs of a served graph reading at once, and
#: bounded, so that reads held by an unanswering server queue here rather than anywhere else.
GRAPH_READ_WORKERS = 8

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
#: Set in the worker's context: the event that says the node waiting on this read has ended.
_abandoned: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("kgagents_graph_read_abandoned",
                                                                                   default=None)


class GraphReadAbandoned(KGAgentsError, RuntimeError):
    """The node that waited on this graph read has ended (its time limit, or the run was cancelled): the read
    sends no further query."""


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=GRAPH_READ_WORKERS, thread_name_prefix="kgagents-graph-read")
        return _pool


def check_read() -> None:
    """Raise :class:`GraphReadAbandoned` when the node waiting on the current graph read has ended; a no-op
    outside :func:`graph_read` (a read from a plain thread or a command)."""
    event = _abandoned.get()
    if event is not None and event.is_set():
        raise GraphReadAbandoned("the step that asked for this graph read has ended (its time limit or the run's "
                                 "cancellation); the read stopped before its next query")


async def graph_read[T](fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on the graph-read pool, in a copy of the caller's context (like
    ``asyncio.to_thread``). When the caller is cancelled (a node's time limit), a read not yet started never
    starts and a running one is marked abandoned (:func:`check_read`)."""
    abandoned = threading.Event()
    context = contextvars.copy_context()

    def call() -> T:
        _abandoned.set(abandoned)
        check_read()
        return fn(*args, **kwargs)

    future = asyncio.get_running_loop().run_in_executor(_executor(), context.run, call)
    try:
        return await future
    except asyncio.CancelledError:
        abandoned.set()
        raise
