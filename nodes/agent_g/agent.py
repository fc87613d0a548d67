"""The agent (Algorithm 1, line 4): the action, from the question and the last feedback."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from langgraph.runtime import Runtime

from kgagents.nodes.agent_g.context import ROLE, AgentGContext, agent_g_context_of
from kgagents.nodes.agent_g.replies import AgentDecision
from kgagents.nodes.agent_g.state import Action, AgentGState
from kgagents.nodes.grounded import graph_for
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.nodes.retriever_bank import (
    TopicEntity,
)
from kgagents.prompts import agent_g as P
from kgagents.tools.crag_api import relation_types as crag_relations


async def _vocabulary(state: AgentGState, ctx: AgentGContext) -> tuple[list[str], list[str]]:
    """The entity and relation types the agent chooses from."""
    entity_types, relation_types = ctx.entity_types, ctx.relation_types
    if (entity_types is None or relation_types is None) and state.get("graph_ref"):
        stats = (await graph_for(state["graph_ref"])).stats()
        entity_types = entity_types if entity_types is not None else [t for t in stats.types if t]
        relation_types = relation_types if relation_types is not None else list(stats.relations)
    if relation_types is None and ctx.task == "generation":
        relation_types = crag_relations()
    return list(entity_types or []), list(relation_types or [])


def describe_action(action: Action) -> str:
    entities = ", ".join(f"{e['name']} ({e.get('type') or '?'})" for e in action.get("entities") or []) or "(none)"
    parts = [f"source: {'knowledge graph' if action.get('module') == 'graph' else 'text documents'}"]
    if action.get("module") == "text":
        parts[-1] += f", batch {action.get('batch', 0) + 1}"
    for key in ("domain", "question_type", "dynamism"):
        if action.get(key):
            parts.append(f"{key.replace('_', ' ')}: {action[key]}")
    parts += [f"entities: {entities}", f"relations: {', '.join(action.get('relations') or []) or '(none)'}"]
    return "; ".join(parts)


async def agent(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """``a_t = Agent(q, f_{t-1})``: extract the domain, topic entities and useful relations, select the module."""
    ctx = agent_g_context_of(runtime)
    t = state.get("t", 0) + 1
    entity_types, relation_types = await _vocabulary(state, ctx)
    previous = "\n".join(f"iteration {i['t']}: {describe_action(i['action'])} → {i.get('error_type') or 'rejected'}"
                         for i in state.get("iterations") or []) or "(none)"
    generation = ctx.task == "generation"
    prompt = P.render(P.AGENT, iteration=t, question=state["question"],
                      query_time=state.get("query_time") or "(not given)",
                      decisions=(P.DECISIONS_GENERATION.format(domains=", ".join(ctx.domains)) if generation
                                 else P.DECISIONS_RETRIEVAL),
                      examples=await asyncio.to_thread(ctx.examples, "agent"),
                      entity_types=", ".join(entity_types) or "(any)",
                      relation_types=", ".join(relation_types[:400]) or "(any)", previous=previous,
                      feedback=state.get("feedback") or "(none: this is the first attempt)")
    llm = LLMCaller(ctx, ROLE)
    last = last_text_batch(state)
    try:
        decision = await llm.structured(prompt, AgentDecision)
    except LLMError as exc:  # no usable action: the text module (no entity needed)
        llm.failed(exc, "the text module retrieves")
        action = Action(entities=[], relations=[], module="text", batch=_next_batch(last, True))
        return {"t": t, "action": action, **accounting(llm),
                "feedback": f"(the agent's reply could not be used: {exc.reason[:200]})"}
    module: Literal["graph", "text"] = "graph" if decision.source == "knowledge graph" else "text"
    action = Action(domain=decision.domain.strip().lower(), question_type=decision.question_type.strip().lower(),
                    dynamism=decision.dynamism.strip().lower(),
                    entities=[TopicEntity(name=e.name.strip(), type=e.type.strip()) for e in decision.entities
                              if e.name.strip()],
                    relations=list(dict.fromkeys(r.strip() for r in decision.relations if r.strip())), module=module)
    if module == "text":
        action["batch"] = _next_batch(last, decision.next_batch)
    return {"t": t, "action": action, "usage": llm.usage}


def last_text_batch(state: AgentGState) -> int | None:
    """The page batch the text module read last in this run (``None``: it has read none), whatever the graph
    module did since."""
    for iteration in reversed(state.get("iterations") or []):
        action = iteration.get("action") or {}
        if action.get("module") == "text":
            return int(action.get("batch", 0))
    return None


def _next_batch(last: int | None, wanted: bool) -> int:
    """The page batch: the next one when asked for, else the one the text module was on (the first at the
    start). A detour to the graph module does not send the text module back to the first batch."""
    if last is None:
        return 0
    return last + 1 if wanted else last
