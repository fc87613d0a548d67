"""Steps 5 and 8: the anchor's outgoing relations ``R^(k)`` (eq. 4) and the triples ``T^(k)`` of (anchor,
relation) (eq. 8), each with its key."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from kgagents.nodes.ark.context import ArkContext, ark_context_of
from kgagents.nodes.ark.kg import graph_of
from kgagents.nodes.ark.messages import keyed, render_triple
from kgagents.nodes.ark.state import ArkState
from kgagents.prompts import ark as P
from kgagents.tools.pgraph.reads import graph_read


async def retrieve_relations(state: ArkState, runtime: Runtime[ArkContext]) -> dict[str, Any]:
    """Step 5: the outgoing relations ``R^(k)`` of the anchor (eq. 4)."""
    ctx = ark_context_of(runtime)
    graph = await graph_of(state, ctx)
    current = dict(state.get("current") or {})
    anchor = str(current.get("anchor") or "")
    relations = await graph_read(graph.relations_of, anchor)  # a database read: off the event loop
    if relations:
        message = P.render(P.RELATIONS, anchor=anchor, count=len(relations),
                           relations="\n".join(f"- {r}" for r in relations))
        feedback = ""
    else:
        message = P.render(P.NO_RELATIONS, anchor=anchor)
        feedback = P.render(P.ANCHOR_NO_RELATIONS, anchor=anchor)
    current.update(relations=relations, feedback=feedback)
    return {"current": current, "stage": "relations", "messages": [HumanMessage(message)]}


async def retrieve_triples(state: ArkState, runtime: Runtime[ArkContext]) -> dict[str, Any]:
    """Step 8: the triples ``T^(k)`` of (anchor, relation) (eq. 8), each with its key."""
    ctx = ark_context_of(runtime)
    graph = await graph_of(state, ctx)
    current = dict(state.get("current") or {})
    anchor, relation = str(current.get("anchor") or ""), str(current.get("relation") or "")
    triples = [keyed(e) for e in await graph_read(graph.triples, anchor, relation)]
    message = P.render(P.TRIPLES, anchor=anchor, relation=relation, count=len(triples),
                       triples="\n".join(render_triple(t) for t in triples))
    current.update(retrieved=triples)
    return {"current": current, "stage": "triples", "messages": [HumanMessage(message)]}
