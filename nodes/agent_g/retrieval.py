"""The retriever bank's node: the text module or the graph module, as the action selects."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from langgraph.runtime import Runtime

from kgagents.nodes.agent_g.context import AgentGContext, agent_g_context_of
from kgagents.nodes.agent_g.crag_paths import crag_graph_retrieval
from kgagents.nodes.agent_g.state import Action, AgentGState
from kgagents.nodes.grounded import graph_for
from kgagents.nodes.llm import BudgetSpent, metered
from kgagents.nodes.retriever_bank import (
    Retrieval,
    document_retrieval,
    graph_retrieval,
    page_batch,
)
from kgagents.tools.pgraph import StaticKG
from kgagents.tools.pgraph.stark import stark_embeddings


def candidate_types(ctx: AgentGContext, graph: StaticKG) -> list[str] | None:
    """The node types a ranking may hold: the context's, else those the knowledge base records (STaRK's SKBs:
    MAG's papers, Amazon's products; PrimeKG's every node), else every type (``None``)."""
    if ctx.candidate_types is not None:
        return list(ctx.candidate_types) or None
    recorded = (graph.meta.get("stark") or {}).get("candidate_types")
    return list(recorded) if recorded else None


async def vss_query(ctx: AgentGContext, graph: StaticKG, state: AgentGState) -> np.ndarray | None:
    """The question's precomputed embedding when STaRK's embeddings are given (their document embeddings are
    put into the graph's index the first time); ``None``: the question's text is embedded."""
    if not ctx.stark_embeddings:
        return None

    embeddings = await asyncio.to_thread(stark_embeddings, ctx.stark_embeddings)
    await asyncio.to_thread(embeddings.install, graph, ctx.embedder(), kind=ctx.index_kind)
    return await asyncio.to_thread(embeddings.query_vector, state.get("question_id"))


@metered  # the question's and the documents' embeddings
async def retriever_bank(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """``X_t = RetrieverBank(q, a_t, D)``: run the selected module (nothing once the run's budget refuses its
    embeddings calls: the validator's router then ends the run at its budget)."""
    try:
        return await _retriever_bank(state, runtime)
    except BudgetSpent as exc:
        module = (state.get("action") or {}).get("module") or "text"
        return {"retrieval": Retrieval(module=module, references=[], ranked_ids=[], paths=[], linked={}, batch=0,
                                        notes=[str(exc)])}


async def _retriever_bank(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    ctx = agent_g_context_of(runtime)
    action = state.get("action") or Action(module="text")
    question = state["question"]
    embedder = ctx.embedder()
    retrieval: Retrieval
    if action.get("module") == "text":
        if state.get("pages"):
            order = [(int(i), float(s)) for i, s in state.get("page_order") or []]
            retrieval = page_batch(state["pages"], order, int(action.get("batch", 0)), ctx.batch_size,
                                   ctx.page_chars)
        elif state.get("graph_ref"):
            graph = await graph_for(state["graph_ref"])
            vector = await vss_query(ctx, graph, state)
            retrieval = await asyncio.to_thread(document_retrieval, graph, question, ctx.ranked_k,
                                                types=candidate_types(ctx, graph), embedder=embedder,
                                                kind=ctx.index_kind, vector=vector)
        else:
            retrieval = Retrieval(module="text", references=[], ranked_ids=[], paths=[], linked={}, batch=0,
                                  notes=["there are no text documents for this question"])
    elif state.get("graph_ref"):
        graph = await graph_for(state["graph_ref"])
        retrieving = ctx.task == "retrieval"
        vector = await vss_query(ctx, graph, state) if retrieving else None
        retrieval = await asyncio.to_thread(
            graph_retrieval, graph, question, action.get("entities") or [], action.get("relations") or [],
            output="documents" if retrieving else "paths", k=ctx.ranked_k if retrieving else ctx.top_k,
            radius=ctx.radius, max_nodes=ctx.max_nodes, embedder=embedder,
            types=candidate_types(ctx, graph) if retrieving else None, kind=ctx.index_kind, vector=vector,
            linker=ctx.linker())
    else:
        retrieval = await crag_graph_retrieval(question, action, ctx)
    return {"retrieval": retrieval}
