"""The run's KGoT context and what it opens: the task KG, the sandbox's limits, the tools' environment (what
KGoT and the workflows on its tools and task KG share)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from kgagents.core.config import get_settings
from kgagents.nodes.budget import ToolBudgetGuard, has_budget
from kgagents.nodes.kgot.context import KGoTContext
from kgagents.nodes.models import aresolve_model, resolve_model
from kgagents.nodes.runtime import run_work_dir, served_check, thread_id_of, work_dir_for
from kgagents.tools.kg.base import KGSnapshot, KGStore, empty_snapshot
from kgagents.tools.kg.stores import open_store, opens_without_io, release_run
from kgagents.tools.manager import ToolEnv
from kgagents.tools.sandbox import DiskQuota, SandboxLimits

logger = logging.getLogger(__name__)


def context_of(runtime: Runtime[KGoTContext] | None) -> KGoTContext:
    """The run's :class:`KGoTContext` (defaults when the caller gave none; a mapping is validated); in a served run,
    only if it holds what a caller may choose (:func:`kgagents.nodes.served.check_context`)."""
    ctx: Any = getattr(runtime, "context", None)
    if ctx is None:
        return KGoTContext()
    if isinstance(ctx, dict):
        ctx = KGoTContext.from_mapping(ctx)
    return served_check(runtime, ctx)


def allow_weak(ctx: KGoTContext) -> bool:
    return ctx.allow_weak_sandbox if ctx.allow_weak_sandbox is not None else get_settings().allow_weak_sandbox


def sandbox_limits(ctx: KGoTContext) -> SandboxLimits:
    return SandboxLimits(timeout_s=ctx.sandbox_timeout_s, memory_mb=ctx.sandbox_memory_mb,
                         quota=sandbox_quota(ctx))


def sandbox_quota(ctx: KGoTContext) -> DiskQuota:
    return DiskQuota(call_mb=ctx.sandbox_call_quota_mb, call_files=ctx.sandbox_call_quota_files,
                     run_mb=ctx.sandbox_run_quota_mb, run_files=ctx.sandbox_run_quota_files)


async def open_task_kg(ctx: KGoTContext, config: RunnableConfig | None, snapshot: KGSnapshot | None) -> KGStore:
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


async def release_task_kg(ctx: KGoTContext, config: RunnableConfig | None) -> None:
    """The run is done with its task KG's server (fusion variants leave it to their run): a single-tenant Bolt
    server takes the next run without waiting for the lease to expire. A failure here costs nothing but the
    wait, so it is only logged."""
    if ctx.kg_scope:
        return
    try:
        await asyncio.to_thread(release_run, ctx.backend, run_id=thread_id_of(config), url=ctx.kg_url)
    except Exception as exc:  # noqa: BLE001 - the lease expires on its own
        logger.warning("could not release the task KG's server: %s", exc)


def tool_env(ctx: KGoTContext, config: RunnableConfig | None, *, work_dir: Path | None = None) -> ToolEnv:
    """The tools' environment for this run: its work dir, the tools' own model, limits and retries.

    It may build the tools' model client or look for a local Ollama server: code on an event loop uses
    :func:`atool_env`."""
    try:
        llm = resolve_model(ctx, "tools", temperature=ctx.tools_temperature)
    except Exception:  # noqa: BLE001 - tools that need no model still work; those that do say so
        llm = None
    return _tool_env(ctx, work_dir or work_dir_for(ctx, config) / "tools", llm, ())


async def atool_env(ctx: KGoTContext, work_dir: Path, attachments: Sequence[str] = ()) -> ToolEnv:
    """:func:`tool_env` for a prepared work dir, on an event loop: the tools' model is resolved without
    blocking it (:func:`~kgagents.nodes.models.aresolve_model`); the task's ``attachments`` are, with the work dir, the
    only local files the file tools may read."""
    try:
        llm = await aresolve_model(ctx, "tools", temperature=ctx.tools_temperature)
    except Exception:  # noqa: BLE001 - as in tool_env
        llm = None
    return _tool_env(ctx, work_dir, llm, attachments)


def _tool_env(ctx: KGoTContext, work_dir: Path, llm: Any, attachments: Sequence[str]) -> ToolEnv:
    return ToolEnv(work_dir=work_dir, llm=llm, attachments=tuple(str(a) for a in attachments),
                   max_output_chars=ctx.tool_output_chars, sandbox_timeout_s=ctx.sandbox_timeout_s,
                   sandbox_memory_mb=ctx.sandbox_memory_mb, sandbox_quota=sandbox_quota(ctx),
                   allow_weak_sandbox=allow_weak(ctx),
                   max_retries=ctx.max_tool_retries, backoff_base_s=ctx.tool_backoff_base_s,
                   backoff_max_s=ctx.tool_backoff_max_s, extra={"context": ctx},
                   budget_guard=ToolBudgetGuard(ctx) if has_budget(ctx) else None)
