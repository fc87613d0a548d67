"""Steps 4–5 of KGoT's loop (ENHANCE): the missing information, the tool calls the tool executor defines and
their runs (each a ``Send`` task)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from kgagents.nodes.kgot.common import ask, call_key, describe_attachments, describe_tool_calls, problem_text
from kgagents.nodes.kgot.context import KGoTContext
from kgagents.nodes.kgot.env import atool_env, context_of
from kgagents.nodes.kgot.replies import MissingInformation
from kgagents.nodes.kgot.state import KGoTState, ToolCallRecord, ToolTask
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.nodes.runtime import (
    for_run,
    run_work_dir,
    served_attachments,
)
from kgagents.nodes.state import jsonable
from kgagents.prompts import kgot as P
from kgagents.tools.base import run_tool_with_retry
from kgagents.tools.kg.base import empty_snapshot, render_snapshot
from kgagents.tools.manager import ToolManager, registered_names


async def merge_missing_information(state: KGoTState, llm: LLMCaller) -> str:
    """The INSERT votes' reasons merged into one "missing information" text (an LLM call when there are several;
    if it fails, the reasons listed as they are)."""
    reasons = [v["reason"] for v in state.get("votes", [])
               if v["iteration"] == state.get("iteration", 0) and v["query_type"] == "INSERT"]
    if len(reasons) <= 1:
        return reasons[0] if reasons else "The knowledge graph lacks the information needed to solve the problem."
    listing = "\n".join(f"{i + 1}. {r}" for i, r in enumerate(reasons))
    merged = await ask(llm, P.render(P.MERGE_REASONS, problem=problem_text(state), reasons=listing),
                       MissingInformation, "the INSERT reasons are listed unmerged")
    return listing if merged is None else merged.missing_information


async def tool_manager(ctx: KGoTContext, config: RunnableConfig | None, only: str | None = None, *,
                       attachments: Sequence[str] = ()) -> ToolManager:
    """The run's tools, or just the tool ``only`` if the run has it (none otherwise); built on the event loop once
    the run's work dir is prepared (tool factories do no I/O). Their file tools may read the task's
    ``attachments`` and the work dir only."""
    work_dir = await run_work_dir(ctx, config)
    names = ctx.tools
    if only is not None:
        names = [only] if only in (ctx.tools if ctx.tools is not None else registered_names()) else []
    return ToolManager(await atool_env(ctx, work_dir / "tools", served_attachments(attachments, work_dir)), names)


async def define_tool_calls(state: KGoTState, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
    """Paper step 4, determining the tools: the INSERT reasons merged into the missing information, then the
    tool executor (an LLM bound to the tools) picks tool calls for it."""
    ctx = context_of(runtime)
    merging = LLMCaller(ctx, "graph_executor")
    missing = await merge_missing_information(state, merging)
    manager = await tool_manager(ctx, for_run(config, state), attachments=state.get("attachments") or ())
    llm = LLMCaller(ctx, "tool_executor")
    prompt = P.render(P.DEFINE_TOOL_CALLS, problem=state["question"],
                      attachments=describe_attachments(state.get("attachments")),
                      existing_data=render_snapshot(state.get("kg") or empty_snapshot()),
                      missing_information=missing,
                      tool_calls_made=describe_tool_calls(state.get("tool_calls") or []))
    try:
        # Forced to call a tool, as the authors bind the tool executor (a reply in prose would be lost). "any" is
        # LangChain's portable spelling: OpenAI-compatible clients send "required", Anthropic's {"type": "any"}.
        reply = await llm.message(prompt, tools=manager.get_tools(), tool_choice="any")
    except LLMError as exc:
        llm.failed(exc, "no tool calls in this iteration")
        return {"missing_information": missing, "pending_tool_calls": [], **accounting(merging, llm)}
    known = {t.name for t in manager.get_tools()}
    pending: list[dict[str, Any]] = []
    seen: set[str] = set()
    for call in reply.tool_calls:
        key = call_key(call["name"], call.get("args") or {})
        if key in seen:
            continue  # uniqueness of tool calls within one turn
        seen.add(key)
        pending.append({"id": call.get("id") or f"call_{len(pending)}", "name": call["name"],
                        "args": jsonable(call.get("args") or {}), "known": call["name"] in known})
    return {"missing_information": missing, "pending_tool_calls": pending, **accounting(merging, llm)}


def tool_tasks(state: Mapping[str, Any]) -> list[ToolTask]:
    """One task per pending tool call (of KGoT or the RAG baseline); a call made before in this run reuses its
    result (per-run cache)."""
    done = {call_key(c["name"], c["args"]): c for c in state.get("tool_calls", []) if c["ok"]}
    tasks = []
    for call in state.get("pending_tool_calls") or []:
        task = ToolTask(iteration=state.get("iteration", 0), call=call,
                        cached=done.get(call_key(call["name"], call["args"])))
        if state.get("run_key"):
            task["run_key"] = state["run_key"]
        if state.get("attachments"):
            task["attachments"] = list(state["attachments"])
        tasks.append(task)
    return tasks


async def run_tool_call(task: ToolTask, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
    """Run one tool call with bounded retries and backoff (run concurrently with the other calls)."""
    ctx = context_of(runtime)
    call = task["call"]

    def record(output: str, ok: bool, attempts: int, cached: bool) -> ToolCallRecord:
        return ToolCallRecord(iteration=task["iteration"], id=call["id"], name=call["name"], args=call["args"],
                              output=output, ok=ok, attempts=attempts, cached=cached)

    if task["cached"] is not None:
        cached = task["cached"]
        return {"tool_calls": [record(cached["output"], True, 0, True)]}
    manager = await tool_manager(ctx, for_run(config, task), only=call["name"],
                                 attachments=task.get("attachments") or ())
    tool = manager.get(call["name"])
    if tool is None:
        unavailable = {s.name: s.reason for s in manager.unavailable()}
        why = unavailable.get(call["name"], "no such tool")
        return {"tool_calls": [record(f"Error: tool {call['name']!r} is not available ({why})", False, 0, False)]}
    run = await run_tool_with_retry(tool, call["args"], max_retries=ctx.max_tool_retries,
                                    backoff_base_s=ctx.tool_backoff_base_s, backoff_max_s=ctx.tool_backoff_max_s,
                                    max_output_chars=ctx.tool_output_chars)
    return {"tool_calls": [record(run.output, run.ok, run.attempts, False)],
            "usage": manager.env.usage}


def results_to_integrate(state: KGoTState) -> list[ToolCallRecord]:
    return list(state.get("tool_calls") or [])[state.get("integrated", 0):]
