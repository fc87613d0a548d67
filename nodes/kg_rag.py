"""The baselines of grounded reasoning (paper 001, §5): **Base** (zero-shot: the model alone, asked for the answer
only), and the retrieval-augmented baselines over a static KG: **Text-RAG** gives the model the texts of the nodes
closest to the question (an embedding search over node names and titles, as Graph-CoT's retriever, or over whole
node texts), **Graph-RAG** adds each retrieved node's 1-hop neighbours. Each answers in one LLM call; the
retrieved context is in the state. If that call fails for good, the answer is empty, ``final_answer`` says "No
solution found" and the failure is logged in ``failures``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, TypedDict

from langgraph.runtime import Runtime

from kgagents.core.usage import Usage, merge_usage
from kgagents.nodes.context import BaseContext, caller, caller_model, described, operator
from kgagents.nodes.grounded import ROLE as REASONER
from kgagents.nodes.grounded import ensure_embedder, graph_for
from kgagents.nodes.llm import BudgetSpent, LLMCaller, LLMError, accounting, metered
from kgagents.nodes.runtime import context_as
from kgagents.nodes.served import graph_source, served_now
from kgagents.nodes.state import NO_SOLUTION, Failure, append
from kgagents.prompts import grounded as P
from kgagents.tools.pgraph import GraphRef, StaticKG, resolve
from kgagents.tools.pgraph.embeddings import embedder_spec
from kgagents.tools.pgraph.vectors import index_kind


@described
@dataclass(kw_only=True)
class KGRagContext(BaseContext):
    """Retrieval settings; the defaults follow Graph-CoT's baselines (the one closest node, ~3,000 tokens).
    The baselines answer with grounded reasoning's model role, the reasoner."""

    ROLES: ClassVar[tuple[str, ...]] = (REASONER,)
    LEGACY_ROLES: ClassVar[dict[str, str]] = {"graph_executor": REASONER}

    reasoner_model: Any = caller_model()
    """The model that answers (``None``: ``model``)."""

    rag_top_k: int = caller(1)
    """How many nodes are retrieved."""
    rag_field: Literal["name", "text"] = caller("name")
    """What the search compares the question with: node names / titles (Graph-CoT's retriever embeds each node's
    name or title) or whole node texts."""
    vector_index: Literal["exact", "ivf"] = caller("exact")
    """The search's index: exact (as Graph-CoT's FAISS ``IndexFlatIP``) or the store's approximate IVF index."""
    context_chars: int = caller(12_000)
    """At most this much of the retrieved nodes' text goes into the prompt."""
    neighbours_per_relation: int = caller(20)
    """Graph-RAG: neighbours shown per relation and direction of a retrieved node."""
    embedding_model: Any = operator(None)
    """The search's embedder (as grounded reasoning's ``embedding_model``; ``None``: the packaged MiniLM)."""
    embedding_device: str | None = operator(None)
    """The embedder's device (``cpu``, ``cuda``; ``None``: sentence-transformers chooses)."""


class KGRagInput(TypedDict, total=False):
    question: str
    question_id: str
    graph: str


class KGRagState(KGRagInput, total=False):
    graph_ref: GraphRef
    retrieved: list[str]
    context: str
    answer: str
    final_answer: str
    usage: Annotated[Usage, merge_usage]
    failures: Annotated[list[Failure], append]


def _ctx(runtime: Runtime[KGRagContext] | None) -> KGRagContext:
    return context_as(runtime, KGRagContext)


def node_context(graph: StaticKG, node_id: str, *, hops: int, per_relation: int) -> str:
    """A retrieved node as context: its text, and (``hops`` = 1) its neighbours per relation, both directions, at
    most ``per_relation`` per relation. An incoming edge's neighbour that is also an outgoing edge's (GRBench lists
    every neighbour at both ends: a paper's authors, and each author's papers) belongs to the outgoing relation:
    listed there, or counted in its "(n more)" when over the cap, never listed again as incoming."""
    lines = [f"{graph.display_name(node_id)}: {graph.node_text(node_id)}"]
    if not hops:
        return lines[0]
    for relation in graph.relations_of(node_id, "out"):
        ends = graph.neighbours(node_id, relation, "out", limit=per_relation)
        lines.append(_neighbour_line("→", relation, graph, ends, graph.degree(node_id, relation, "out") - len(ends)))
    covered = set(graph.neighbours(node_id, None, "out"))  # shown or counted along an outgoing relation
    for relation in graph.relations_of(node_id, "in"):
        read = graph.neighbours(node_id, relation, "in", limit=per_relation + len(covered))
        new = [e for e in dict.fromkeys(read) if e not in covered]
        unread = graph.degree(node_id, relation, "in") - len(read)
        if new or unread > 0:
            lines.append(_neighbour_line("←", relation, graph, new[:per_relation],
                                         unread + max(0, len(new) - per_relation)))
    return "\n".join(lines)


def _neighbour_line(arrow: str, relation: str, graph: StaticKG, ends: list[str], more: int) -> str:
    """One relation's neighbours, with how many more edges were not listed."""
    tail = f" … ({more} more)" if more > 0 else ""
    return f"  {arrow} {relation}: " + "; ".join(graph.display_name(e) for e in ends) + tail


def retrieve_node(hops: int):
    """The retrieval node: the closest nodes to the question, with their neighbours when ``hops`` is 1."""

    @metered  # the question's and the nodes' embeddings
    async def retrieve(state: KGRagState, runtime: Runtime[KGRagContext]) -> dict[str, Any]:
        ctx = _ctx(runtime)
        question = (state.get("question") or "").strip()
        if not question or not state.get("graph"):
            raise ValueError("give {'question': '...', 'graph': 'NAME or path'}")
        stored = state.get("graph_ref")
        ref: GraphRef = stored if stored is not None else await asyncio.to_thread(
            resolve, graph_source(state["graph"], served=served_now()))
        graph = await graph_for(ref)
        await ensure_embedder(ctx.embedding_model, ctx.embedding_device)
        try:
            found = await asyncio.to_thread(graph.nearest_nodes, question, ctx.rag_top_k, field=ctx.rag_field,
                                            embedder=embedder_spec(ctx.embedding_model, ctx.embedding_device),
                                            kind=index_kind(ctx.vector_index))
        except BudgetSpent:  # the run's budget refused the embeddings: nothing retrieved, the answer says so
            found = []
        ids = [node_id for node_id, _ in found]
        parts = [await asyncio.to_thread(node_context, graph, i, hops=hops, per_relation=ctx.neighbours_per_relation)
                 for i in ids]
        context = "\n\n".join(parts)[: ctx.context_chars] or "(nothing retrieved)"
        return {"question": question, "graph_ref": ref, "retrieved": ids, "context": context}

    retrieve.__name__ = "retrieve_subgraph" if hops else "retrieve_nodes"
    return retrieve


async def answer_from_context(state: KGRagState, runtime: Runtime[KGRagContext]) -> dict[str, Any]:
    """One LLM call: the answer from the question and the retrieved context."""
    return await _answer(runtime, P.render(P.KG_RAG_ANSWER, question=state["question"],
                                           context=state.get("context", "")))


async def answer_alone(state: KGRagState, runtime: Runtime[KGRagContext]) -> dict[str, Any]:
    """Base (zero-shot): one LLM call, the question alone, the answer only."""
    question = (state.get("question") or "").strip()
    if not question:
        raise ValueError("give {'question': '...'}")
    return {"question": question, **await _answer(runtime, P.render(P.ZERO_SHOT_ANSWER, question=question))}


async def _answer(runtime: Runtime[KGRagContext], prompt: str) -> dict[str, Any]:
    llm = LLMCaller(_ctx(runtime), REASONER)
    try:
        reply = (await llm.text(prompt)).strip()
    except LLMError as exc:
        llm.failed(exc, f"the answer is {NO_SOLUTION!r}")
        reply = ""
    return {"answer": reply, "final_answer": reply or NO_SOLUTION, **accounting(llm)}
