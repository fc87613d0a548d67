"""Helpers every node uses to reach its run's dependencies: the context, the work directory, the task KG."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
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
from kgagents.nodes.budget import ToolBudgetGuard, has_budget
from kgagents.nodes.context import BaseContext, Context
from kgagents.nodes.models import aresolve_model, resolve_model
from kgagents.nodes.served import check_attachments, check_context, is_served, served_now
from kgagents.tools.kg.base import KGSnapshot, KGStore, empty_snapshot
from kgagents.tools.kg.stores import open_store, opens_without_io, release_run
from kgagents.tools.manager import ToolEnv
from kgagents.tools.sandbox import DiskQuota, SandboxLimits, isolation_known, isolation_status, prepare_work_dir


def context_of(runtime: Runtime[Context] | None) -> Context:
    """The run's :class:`Context` (defaults when the caller gave none; a mapping is validated); in a served run,
    only if it holds what a caller may choose (:func:`kgagents.nodes.served.check_context`)."""
    ctx: Any = getattr(runtime, "context", None)
    if ctx is None:
        return Context()
    if isinstance(ctx, dict):
        ctx = Context.from_mapping(ctx)
    return _served_check(runtime, ctx)


def _served_check[C: BaseContext](runtime: Any, ctx: C) -> C:
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
        return _served_check(runtime, cls.from_mapping(ctx))
    if isinstance(ctx, cls):
        return _served_check(runtime, ctx)
    if isinstance(ctx, BaseContext):
        _served_check(runtime, ctx)
        shared = {f.name for f in dataclasses.fields(cls)} & {f.name for f in dataclasses.fields(ctx)}
        values = {name: getattr(ctx, name) for name in shared}
        values.update({f"{old}_model": getattr(ctx, f"{old}_model") for old in cls.LEGACY_ROLES
                       if getattr(ctx, f"{old}_model", None) is not None})
        return _served_check(runtime, cls.from_mapping(values))
    raise TypeError(f"this workflow needs a {cls.__name__}, got {type(ctx).__name__}")


logger = logging.getLogger(__name__)

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
    """The run's own work directory: ``Context.work_dir``, else one per thread under the runs directory; a run
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


#: The work dirs of recent runs, prepared: (Context.work_dir or the runs dir, thread id) -> the resolved folder.
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


def allow_weak(ctx: Context) -> bool:
    return ctx.allow_weak_sandbox if ctx.allow_weak_sandbox is not None else get_settings().allow_weak_sandbox


def sandbox_limits(ctx: Context) -> SandboxLimits:
    return SandboxLimits(timeout_s=ctx.sandbox_timeout_s, memory_mb=ctx.sandbox_memory_mb,
                         quota=sandbox_quota(ctx))


def sandbox_quota(ctx: Context) -> DiskQuota:
    return DiskQuota(call_mb=ctx.sandbox_call_quota_mb, call_files=ctx.sandbox_call_quota_files,
                     run_mb=ctx.sandbox_run_quota_mb, run_files=ctx.sandbox_run_quota_files)


async def open_task_kg(ctx: Context, config: RunnableConfig | None, snapshot: KGSnapshot | None) -> KGStore:
    """The run's task KG, holding exactly the KG of the state (database backends restore it if needed).

    Database backends open (and restore) over the network, so in a worker thread; the embedded NetworkX KG
    opens on the event loop once the run's work dir is prepared.
    """
    thread_id = thread_id_of(config) + (f"/{ctx.kg_scope}" if ctx.kg_scope else "")
    work_dir = await run_work_dir(ctx, config)

    def open_() -> KGStore:
        return open_store(ctx.backend, snapshot=snapshot or empty_snapshot(), work_dir=work_dir,
                          thread_id=thread_id, limits=sandbox_limits(ctx), allow_weak_sandbox=allow_weak(ctx),
                          url=ctx.kg_url, run_id=thread_id_of(config))

    return open_() if opens_without_io(ctx.backend) else await asyncio.to_thread(open_)


async def release_task_kg(ctx: Context, config: RunnableConfig | None) -> None:
    """The run is done with its task KG's server (fusion variants leave it to their run): a single-tenant Bolt
    server takes the next run without waiting for the lease to expire. A failure here costs nothing but the
    wait, so it is only logged."""
    if ctx.kg_scope:
        return
    try:
        await asyncio.to_thread(release_run, ctx.backend, run_id=thread_id_of(config), url=ctx.kg_url)
    except Exception as exc:  # noqa: BLE001 - the lease expires on its own
        logger.warning("could not release the task KG's server: %s", exc)


def tool_env(ctx: Context, config: RunnableConfig | None, *, work_dir: Path | None = None) -> ToolEnv:
    """The tools' environment for this run: its work dir, the tools' own model, limits and retries.

    It may build the tools' model client or look for a local Ollama server: code on an event loop uses
    :func:`atool_env`."""
    try:
        llm = resolve_model(ctx, "tools", temperature=ctx.tools_temperature)
    except Exception:  # noqa: BLE001 - tools that need no model still work; those that do say so
        llm = None
    return _tool_env(ctx, work_dir or work_dir_for(ctx, config) / "tools", llm, ())


async def atool_env(ctx: Context, work_dir: Path, attachments: Sequence[str] = ()) -> ToolEnv:
    """:func:`tool_env` for a prepared work dir, on an event loop: the tools' model is resolved without
    blocking it (:func:`~kgagents.nodes.models.aresolve_model`); the task's ``attachments`` are, with the work dir, the
    only local files the file tools may read."""
    try:
        llm = await aresolve_model(ctx, "tools", temperature=ctx.tools_temperature)
    except Exception:  # noqa: BLE001 - as in tool_env
        llm = None
    return _tool_env(ctx, work_dir, llm, attachments)


def _tool_env(ctx: Context, work_dir: Path, llm: Any, attachments: Sequence[str]) -> ToolEnv:
    return ToolEnv(work_dir=work_dir, llm=llm, attachments=tuple(str(a) for a in attachments),
                   max_output_chars=ctx.tool_output_chars, sandbox_timeout_s=ctx.sandbox_timeout_s,
                   sandbox_memory_mb=ctx.sandbox_memory_mb, sandbox_quota=sandbox_quota(ctx),
                   allow_weak_sandbox=allow_weak(ctx),
                   max_retries=ctx.max_tool_retries, backoff_base_s=ctx.tool_backoff_base_s,
                   backoff_max_s=ctx.tool_backoff_max_s, extra={"context": ctx},
                   budget_guard=ToolBudgetGuard(ctx) if has_budget(ctx) else None)


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
