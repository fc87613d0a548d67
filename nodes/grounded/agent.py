"""Grounding by the agent (Figure 9): its thought, then the graph functions it calls (Graph-CoT's
RetrieveNode, NodeFeature, NeighbourCheck, NodeDegree, Finish) as tool calls or as text actions, and their
observations."""

from __future__ import annotations

import asyncio
from typing import Any

from kgagents.nodes.grounded.chains import _candidate, render_chain
from kgagents.nodes.grounded.context import GroundedContext
from kgagents.nodes.grounded.state import StepTask, Thought
from kgagents.nodes.llm import LLMCaller
from kgagents.prompts import grounded as P
from kgagents.prompts.grounded_domains import DOMAINS
from kgagents.tools.graph_functions import GraphFunctions, ParsedAction, one_thought, parse_actions
from kgagents.tools.pgraph import StaticKG
from kgagents.tools.pgraph.vectors import index_kind


def _agent_values(task: StepTask, ctx: GroundedContext) -> dict[str, Any]:
    return {"examples": DOMAINS[task["domain"]].agent_examples, "graph_definition": task["graph_definition"],
            "question": task["question"], "scratchpad": render_chain(task["chain"]),
            "step": len(task["chain"]) + 1, "candidate": _candidate(task, ctx)}


async def _agent_thought(task: StepTask, ctx: GroundedContext, llm: LLMCaller) -> str:
    """The agent's thought (Figure 9): what it knows and what it needs next."""
    values = _agent_values(task, ctx)
    return one_thought(await llm.text(P.render(P.AGENT_THOUGHT, **values)))


async def _agent_actions(task: StepTask, ctx: GroundedContext, llm: LLMCaller, graph: StaticKG,
                         record: Thought) -> None:
    """The action(s) the thought needs and their observations (Figure 9), with Graph-CoT's functions as tool
    calls or as text actions (``action_format``)."""
    values = _agent_values(task, ctx)
    thought = record.get("thought", "")
    functions = GraphFunctions(graph, max_chars=ctx.observation_chars, retrieve_k=ctx.retrieve_k,
                               retrieve_field=ctx.retrieve_field, embedder=ctx.embedder(),
                               index=index_kind(ctx.vector_index),
                               retrieve_exact=ctx.retrieve_exact)
    if ctx.action_format == "text":
        written = (await llm.text(P.render(P.AGENT_ACTION_TEXT, thought=thought, **values))).strip()
        record["action_text"] = written
        calls = parse_actions(written)
    else:
        reply = await llm.message(P.render(P.AGENT_ACTION, thought=thought, **values),
                                  tools=functions.tools(), tool_choice="any")
        calls = [ParsedAction(str(c.get("name")), dict(c.get("args") or {}), "")
                 for c in reply.tool_calls or []]
        if not calls:
            text = str(reply.content or "").strip()
            record["observation"] = ("Invalid action: no graph function was called. Call one of "
                                     "RetrieveNode, NodeFeature, NeighbourCheck, NodeDegree or Finish." +
                                     (f" (The reply was: {text[:200]})" if text else ""))
    actions: list[dict[str, Any]] = []
    for call in calls[: ctx.max_actions]:
        if call.error is not None:
            actions.append({"name": call.name or "(unreadable)", "args": {}, "written": call.written[:300],
                            "observation": call.error, "ok": False})
            continue
        observation = await asyncio.to_thread(functions.call, call.name, dict(call.args))
        actions.append({"name": call.name, "args": dict(call.args), "observation": observation.text,
                        "ok": observation.ok})
        if observation.finished:
            record["finished"] = True
            record["answer"] = observation.answer
            break
    if len(calls) > ctx.max_actions and not record.get("finished"):
        actions.append({"name": "(skipped)", "args": {}, "ok": False,
                        "observation": f"{len(calls) - ctx.max_actions} more calls skipped: at most "
                                       f"{ctx.max_actions} per step."})
    record["actions"] = actions
