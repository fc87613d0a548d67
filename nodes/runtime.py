"""Helpers every node uses to reach its run's dependencies: the context, the work directory, the task KG."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from kgagents.config import get_settings
from nodes.context import Context
from nodes.models import resolve_model
from tools.kg.base import KGSnapshot, KGStore, empty_snapshot
from tools.kg.stores import open_store
from tools.manager import ToolEnv
from tools.sandbox import SandboxLimits


def context_of(runtime: Runtime[Context] | None) -> Context:
    """The run's :class:`Context` (defaults when the caller gave none; a mapping is validated)."""
    ctx: Any = getattr(runtime, "context", None)
    if ctx is None:
        return Context()
    if isinstance(ctx, dict):
        return Context.from_mapping(ctx)
    return ctx


def thread_id_of(config: RunnableConfig | None) -> str:
    """The thread id of the run ("ephemeral" without a checkpointer)."""
    configurable = (config or {}).get("configurable", {}) or {}
    return str(configurable.get("thread_id") or "ephemeral")


def work_dir_for(ctx: Context, config: RunnableConfig | None) -> Path:
    """The run's own work directory: ``Context.work_dir`` or one per thread under the runs directory."""
    if ctx.work_dir:
        path = Path(ctx.work_dir)
    else:
        thread = thread_id_of(config)
        if thread == "ephemeral":
            path = Path(tempfile.mkdtemp(prefix="kgagents-"))
        else:
            path = get_settings().runs_dir / "work" / thread
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def allow_weak(ctx: Context) -> bool:
    return ctx.allow_weak_sandbox if ctx.allow_weak_sandbox is not None else get_settings().allow_weak_sandbox


def sandbox_limits(ctx: Context) -> SandboxLimits:
    return SandboxLimits(timeout_s=ctx.sandbox_timeout_s, memory_mb=ctx.sandbox_memory_mb)


async def open_task_kg(ctx: Context, config: RunnableConfig | None, snapshot: KGSnapshot | None) -> KGStore:
    """The run's task KG, holding exactly the KG of the state (database backends restore it if needed).

    Opening touches the filesystem (and, for database backends, the network), so it runs off the event loop.
    """
    thread_id = thread_id_of(config) + (f"/{ctx.kg_scope}" if ctx.kg_scope else "")
    return await asyncio.to_thread(lambda: open_store(
        ctx.backend, snapshot=snapshot or empty_snapshot(), work_dir=work_dir_for(ctx, config),
        thread_id=thread_id, limits=sandbox_limits(ctx), allow_weak_sandbox=allow_weak(ctx), url=ctx.kg_url))


def tool_env(ctx: Context, config: RunnableConfig | None, *, work_dir: Path | None = None) -> ToolEnv:
    """The tools' environment for this run: its work dir, the tools' own model, limits and retries."""
    try:
        llm = resolve_model(ctx, "tools")
    except Exception:  # noqa: BLE001 - tools that need no model still work; those that do say so
        llm = None
    return ToolEnv(work_dir=work_dir or work_dir_for(ctx, config) / "tools", llm=llm,
                   max_output_chars=ctx.tool_output_chars, sandbox_timeout_s=ctx.sandbox_timeout_s,
                   sandbox_memory_mb=ctx.sandbox_memory_mb, allow_weak_sandbox=allow_weak(ctx),
                   max_retries=ctx.max_tool_retries, backoff_base_s=ctx.tool_backoff_base_s,
                   backoff_max_s=ctx.tool_backoff_max_s, extra={"context": ctx})
