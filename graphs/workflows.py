"""Running a workflow of the registry (:mod:`kgagents.graphs.registry`) on a checkpointed thread."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kgagents.core.checkpointer import name_checkpointer
from kgagents.core.config import get_settings
from kgagents.core.endpoint_change import run_models
from kgagents.core.runs import RunRegistry, is_finished, new_thread_id, open_checkpointer
from kgagents.graphs import registry
from kgagents.graphs.spec import Workflow
from kgagents.nodes.state import every_call_failed


def load_workflow(name: str) -> Workflow:
    """The spec of the workflow ``name`` (:func:`kgagents.graphs.registry.get`)."""
    return registry.get(name)


def preset(workflow: str, name: str) -> dict[str, Any]:
    """The context values of a workflow's named preset; a clear error when unknown."""
    return registry.get(workflow).preset(name)


def make_context(workflow: Workflow, values: dict[str, Any]) -> Any:
    """The workflow's context from plain values; unknown keys are a clear error."""
    return workflow.make_context(values)


def run_config(thread_id: str, context: Any) -> dict[str, Any]:
    limit = getattr(context, "recursion_limit", 200)
    return {"configurable": {"thread_id": thread_id}, "recursion_limit": limit}


ProgressFn = Callable[[str, dict[str, Any]], None]


def stderr_progress(node: str, update: dict[str, Any]) -> None:
    """Print one line per finished node to stderr."""
    keys = ", ".join(sorted(update)) if isinstance(update, dict) else ""
    print(f"  · {node}" + (f" ({keys})" if keys else ""), file=sys.stderr, flush=True)


async def run_thread(workflow: str, *, runs_dir: Path, thread_id: str | None, task: dict[str, Any] | None,
                     context_values: dict[str, Any], context_override: Any = None,
                     progress: ProgressFn | None = None,
                     checkpointer: str | None = None) -> tuple[str, dict[str, Any]]:
    """Start (``task`` given) or resume (``task`` None) a thread; returns ``(thread_id, final state)``.

    ``context_values`` are JSON values, recorded so that ``resume`` can pass the same context again;
    ``context_override`` (e.g. a context holding a chat-model instance) is used instead when given.
    ``checkpointer`` is a ``postgresql://`` URL for the checkpoints (default: SQLite in ``runs_dir``), the
    caller's choice (:func:`~kgagents.core.checkpointer.name_checkpointer`); a resumed thread uses the place
    recorded when it started (see :meth:`RunRegistry.checkpointer_for`), a PostgreSQL one only when it is the
    caller's or ``KGAGENTS_CHECKPOINTER``.
    """
    name_checkpointer(checkpointer)
    spec = load_workflow(workflow)
    registry = RunRegistry(runs_dir)
    thread_id = thread_id or new_thread_id()
    context = context_override if context_override is not None else make_context(spec, context_values)
    if task is not None:
        registry.record(thread_id, workflow, str(task.get("question", "")), context_values, checkpointer,
                        models=started_models(spec, context_values))
        location = checkpointer or registry.checkpoints_path
    else:
        registry.mark_running(thread_id)
        location = registry.checkpointer_for(thread_id, checkpointer)
    async with open_checkpointer(location) as saver:
        graph = spec.compile_graph(saver)
        config = run_config(thread_id, context)
        if task is None:
            snapshot = await graph.aget_state(config)
            if not snapshot.values:
                raise ValueError(f"thread {thread_id} has no checkpoint to resume")
            if is_finished(snapshot):  # only the news of it was lost
                registry.finish(thread_id, "failed" if every_call_failed(snapshot.values) else "done",
                                str(snapshot.values.get("final_answer", "")))
                return thread_id, dict(snapshot.values)
        try:
            async for chunk in graph.astream(task, config, context=context, stream_mode="updates"):
                if progress:
                    for node, update in chunk.items():
                        progress(node, update if isinstance(update, dict) else {})
        except BaseException as exc:
            registry.finish(thread_id, "interrupted" if isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
                            else "failed")
            raise
        final = dict((await graph.aget_state(config)).values)
    registry.finish(thread_id, "failed" if every_call_failed(final) else "done",
                    str(final.get("final_answer", "")))
    return thread_id, final


def started_models(workflow: Workflow, context_values: dict[str, Any]) -> dict[str, Any]:
    """The model of each role of a ``workflow`` run that starts with ``context_values``, as the run registry keeps
    it (what a resume is compared with, :mod:`kgagents.core.endpoint_change`): the values' (``<role>_model``, else
    ``model``), else the one the configuration names (``None`` where none does, e.g. a local Ollama model found at
    run time). A model given as an object is kept by its name."""
    settings = get_settings()
    configured = {}
    for role in workflow.context.ROLES:
        try:
            configured[role] = settings.model_for(role)
        except ValueError:  # a role the configuration has no variable of its own for
            configured[role] = settings.model
    models = run_models(context_values, workflow.context.ROLES, configured)
    return {role: model if model is None or isinstance(model, str) else
            str(getattr(model, "model_name", None) or type(model).__name__) for role, model in models.items()}


async def thread_state(workflow: str, runs_dir: Path, thread_id: str,
                       checkpointer: str | None = None) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The latest checkpointed state of a thread and the nodes it would run next (``checkpointer``: as in
    :func:`run_thread`, a URL that may bring the password of the recorded PostgreSQL checkpointer).

    When every task of the pending superstep has its result saved (the process died before the checkpoint that
    applies them), those tasks are named: the thread is not finished, ``resume`` goes on from their results.
    """
    name_checkpointer(checkpointer)
    spec = load_workflow(workflow)
    registry = RunRegistry(runs_dir)
    async with open_checkpointer(registry.checkpointer_for(thread_id, checkpointer)) as saver:
        graph = spec.compile_graph(saver)
        snap = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    return dict(snap.values), tuple(snap.next) or tuple(task.name for task in snap.tasks)
