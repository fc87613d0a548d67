"""Helpers every node uses to reach its run's dependencies: the context, the work directory, the task KG."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from kgagents.core.config import get_settings
from kgagents.core.runs import thread_work_dir
from kgagents.core.tempdirs import process_dir
from kgagents.nodes.context import BaseContext
from kgagents.nodes.served import check_attachments, check_context, is_served, served_now
from kgagents.tools.sandbox import isolation_known, isolation_status, prepare_work_dir


def served_check[C: BaseContext](runtime: Any, ctx: C) -> C:
    """``ctx``, refused (:class:`~kgagents.nodes.served.ServedRequestError`) in a served run if it sets what a
    caller may not choose: the wall in the process that runs the graph, whatever the server let through."""
    if is_served(runtime):
        check_context(ctx)
    return ctx


def context_as[C: BaseContext](runtime: Runtime[Any] | None, cls: type[C]) -> C:
    """The run's context as the workflow's own context class: defaults when none was given, a mapping
    validated (unknown keys are an error), another workflow's context (e.g. KGoT's, which a caller built)
    carried over by the fields both have, and its model for the workflow's legacy role (``graph_executor``) as
    the role's own."""
    ctx: Any = getattr(runtime, "context", None)
    if ctx is None:
        return cls()
    if isinstance(ctx, dict):
        return served_check(runtime, cls.from_mapping(ctx))
    if isinstance(ctx, cls):
        return served_check(runtime, ctx)
    if isinstance(ctx, BaseContext):
        served_check(runtime, ctx)
        shared = {f.name for f in dataclasses.fields(cls)} & {f.name for f in dataclasses.fields(ctx)}
        values = {name: getattr(ctx, name) for name in shared}
        values.update({f"{old}_model": getattr(ctx, f"{old}_model") for old in cls.LEGACY_ROLES
                       if getattr(ctx, f"{old}_model", None) is not None})
        return served_check(runtime, cls.from_mapping(values))
    raise TypeError(f"this workflow needs a {cls.__name__}, got {type(ctx).__name__}")


#: The thread id of a run without a checkpointer, until its first step gives it a ``run_key`` of its own.
EPHEMERAL = "ephemeral"


def thread_id_of(config: RunnableConfig | None) -> str:
    """The thread id of the run (``EPHEMERAL`` without a checkpointer)."""
    configurable = (config or {}).get("configurable", {}) or {}
    return str(configurable.get("thread_id") or EPHEMERAL)


def new_run_key(config: RunnableConfig | None) -> dict[str, str]:
    """The state update that gives a run without a thread (no checkpointer) a key of its own, once, in its first
    step: its steps then share one work dir and one KG scope, which no other run shares."""
    if thread_id_of(config) != EPHEMERAL:
        return {}
    return {"run_key": f"{EPHEMERAL}-{uuid.uuid4().hex[:16]}"}


def for_run(config: RunnableConfig | None, state: Any) -> RunnableConfig | None:
    """``config`` for this module's helpers: a run without a thread goes by its ``run_key`` (see
    :func:`new_run_key`); a run with one is unchanged. Only the helpers see the result, never LangGraph."""
    key = state.get("run_key") if isinstance(state, dict) else None
    if not key or thread_id_of(config) != EPHEMERAL:
        return config
    configurable = {**((config or {}).get("configurable") or {}), "thread_id": key}
    return {**(config or {}), "configurable": configurable}


def work_dir_for(ctx: BaseContext, config: RunnableConfig | None) -> Path:
    """The run's own work directory: ``KGoTContext.work_dir``, else one per thread under the runs directory; a run
    without a checkpointer works in this process's temporary folder (``<kgagents-proc-…>/runs/<run key>``,
    kept while the process lives and removed when it exits: see :mod:`kgagents.core.tempdirs`)."""
    work_dir = getattr(ctx, "work_dir", None)
    if work_dir:
        path = Path(work_dir)
    else:
        thread = thread_id_of(config)
        if thread == EPHEMERAL:
            runs = process_dir() / "runs"
            runs.mkdir(exist_ok=True)
            path = Path(tempfile.mkdtemp(prefix="run-", dir=runs))
        elif thread.startswith(f"{EPHEMERAL}-"):
            path = process_dir() / "runs" / thread
        else:
            path = thread_work_dir(get_settings().runs_dir, thread)  # never a link out of the runs directory
    return prepare_work_dir(path)


#: The work dirs of recent runs, prepared: (KGoTContext.work_dir or the runs dir, thread id) -> the resolved folder.
_run_dirs: OrderedDict[tuple[str, str], Path] = OrderedDict()
_run_dirs_lock = threading.Lock()
_RUN_DIRS_MAX = 4096


def _run_dir_key(ctx: BaseContext, thread: str) -> tuple[str, str]:
    return (getattr(ctx, "work_dir", None) or f"runs:{get_settings().runs_dir}", thread)


def _prepare_run_dir(ctx: BaseContext, config: RunnableConfig | None) -> Path:
    path = work_dir_for(ctx, config)
    isolation_status()  # probes the sandbox once per process
    thread = thread_id_of(config)
    if thread != EPHEMERAL:
        key = _run_dir_key(ctx, thread)
        with _run_dirs_lock:
            _run_dirs[key] = path
            _run_dirs.move_to_end(key)
            while len(_run_dirs) > _RUN_DIRS_MAX:
                _run_dirs.popitem(last=False)
    return path


async def run_work_dir(ctx: BaseContext, config: RunnableConfig | None) -> Path:
    """:func:`work_dir_for`, ready for the run's sandboxes and tools to be built on the event loop.

    The first call of a run creates the folder (and the first of the process probes the sandbox) in a worker
    thread; later calls of the run find it prepared and stay on the loop: with many runs in flight a thread
    hop per node costs more CPU than the node's own work (docs/evals.md).
    """
    thread = thread_id_of(config)
    if thread != EPHEMERAL and isolation_known():
        key = _run_dir_key(ctx, thread)
        with _run_dirs_lock:
            path = _run_dirs.get(key)
        if path is not None:
            return path
    return await asyncio.to_thread(_prepare_run_dir, ctx, config)


#: The folder of a run's work dir that holds the attachments given as content.
ATTACHMENTS_DIR = "attachments"


async def task_attachments(items: Any, ctx: BaseContext, config: RunnableConfig | None) -> list[str]:
    """The paths of the task's attachments: each given as content (``{"name": ..., "content_base64": ...}``) is
    written into the run's ``attachments`` folder (a file of its own, ``0600``); a path stays as given. In a
    served run a path is refused unless it is one of the run's own written attachments (a resumed thread's
    state holds those): a caller never names a file of the server."""
    if not items:
        check_attachments(items, served=False)  # the shape: a list
        return []
    folder = (await run_work_dir(ctx, config)) / ATTACHMENTS_DIR
    out = []
    for item in check_attachments(items, served=served_now(), own=folder):
        if isinstance(item, str):
            out.append(item)
        else:
            name, data = item
            out.append(str(await asyncio.to_thread(_write_attachment, folder, name, data)))
    return out


def _write_attachment(folder: Path, name: str, data: bytes) -> Path:
    """Write one attachment's bytes into ``folder`` as a new file (``0600``; a file of that name is replaced)."""
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / name
    if path.is_symlink() or path.exists():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return path


def served_attachments(attachments: Sequence[str], work_dir: Path) -> Sequence[str]:
    """``attachments`` for the tools of a run in ``work_dir``: in a served run, only the run's own (a path a
    caller wrote into the thread's state is refused)."""
    if served_now():
        check_attachments(list(attachments), served=True, own=work_dir / ATTACHMENTS_DIR)
    return attachments


async def gather_bounded[T](config: RunnableConfig | None, calls: Sequence[Awaitable[T]]) -> list[T]:
    """The results of ``calls`` (the samples of one step, the workers of a batch), run concurrently, in order.

    At most the run's ``max_concurrency`` run at a time, as LangGraph limits its own tasks. The first failure
    cancels the others and is raised as it is.
    """
    limit = (config or {}).get("max_concurrency")
    if limit and limit < len(calls):
        semaphore = asyncio.Semaphore(limit)

        async def bounded(call: Awaitable[T]) -> T:
            try:
                async with semaphore:
                    return await call
            except asyncio.CancelledError:
                if asyncio.iscoroutine(call):
                    call.close()  # cancelled before its turn: never started, never to be awaited
                raise

        calls = [bounded(c) for c in calls]
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
