"""The workflows the application serves, and running one on a checkpointed thread."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from kgagents.core.runs import RunRegistry, is_finished, new_thread_id, open_checkpointer
from kgagents.nodes.state import every_call_failed

#: workflow name -> module exposing build(), graph, compile_graph(checkpointer)
#: (or ``module:attribute`` for an object with those three, when one module defines several workflows)
WORKFLOWS: dict[str, str] = {"kgot": "kgagents.graphs.kgot", "fusion": "kgagents.graphs.fusion",
                             "zeroshot": "kgagents.graphs.baselines:zeroshot", "rag": "kgagents.graphs.baselines:rag",
                             "kgot-graphrag": "kgagents.graphs.baselines:graphrag",
                             "kgot-nokg": "kgagents.graphs.baselines:nokg",
                             "ark": "kgagents.graphs.ark",
                             "grounded": "kgagents.graphs.grounded", "base": "kgagents.graphs.kg_rag:base",
                             "text-rag": "kgagents.graphs.kg_rag:text_rag",
                             "graph-rag": "kgagents.graphs.kg_rag:graph_rag",
                             "agent-g": "kgagents.graphs.agent_g",
                             **{f"agent-g-{b}": f"kgagents.graphs.agent_g_baselines:{b.replace('-', '_')}"
                                for b in ("cot", "text-rag", "graph-rag", "hybrid-rag", "corrective-rag", "react")}}


def load_workflow(name: str) -> ModuleType:
    if name not in WORKFLOWS:
        raise ValueError(f"unknown workflow {name!r}; available: {', '.join(WORKFLOWS)}")
    module, _, attribute = WORKFLOWS[name].partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded


def preset(workflow: str, name: str) -> dict[str, Any]:
    """The context values of a workflow's named preset (a module's ``PRESETS``); a clear error when unknown."""
    presets = getattr(load_workflow(workflow), "PRESETS", {}) or {}
    if name not in presets:
        known = ", ".join(presets) or "none"
        raise ValueError(f"the {workflow} workflow has no preset {name!r}; its presets: {known}")
    return dict(presets[name])


def make_context(module: ModuleType, values: dict[str, Any]) -> Any:
    """The workflow's context from plain values; unknown keys are a clear error."""
    schema = module.build().context_schema
    if hasattr(schema, "from_mapping"):
        return schema.from_mapping(values)
    known = {f.name for f in dataclasses.fields(schema)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown context field(s) for this workflow: {', '.join(unknown)}")
    return schema(**values)


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
    ``checkpointer`` is a ``postgresql://`` URL for the checkpoints (default: SQLite in ``runs_dir``); a
    resumed thread uses the place recorded when it started (see :meth:`RunRegistry.checkpointer_for`).
    """
    module = load_workflow(workflow)
    registry = RunRegistry(runs_dir)
    thread_id = thread_id or new_thread_id()
    context = context_override if context_override is not None else make_context(module, context_values)
    if task is not None:
        registry.record(thread_id, workflow, str(task.get("question", "")), context_values, checkpointer)
        location = checkpointer or registry.checkpoints_path
    else:
        registry.mark_running(thread_id)
        location = registry.checkpointer_for(thread_id, checkpointer)
    async with open_checkpointer(location) as saver:
        graph = module.compile_graph(saver)
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


async def thread_state(workflow: str, runs_dir: Path, thread_id: str,
                       checkpointer: str | None = None) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The latest checkpointed state of a thread and the nodes it would run next (``checkpointer``: as in
    :func:`run_thread`, a URL that may bring the password of the recorded PostgreSQL checkpointer).

    When every task of the pending superstep has its result saved (the process died before the checkpoint that
    applies them), those tasks are named: the thread is not finished, ``resume`` goes on from their results.
    """
    module = load_workflow(workflow)
    registry = RunRegistry(runs_dir)
    async with open_checkpointer(registry.checkpointer_for(thread_id, checkpointer)) as saver:
        graph = module.compile_graph(saver)
        snap = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    return dict(snap.values), tuple(snap.next) or tuple(task.name for task in snap.tasks)
