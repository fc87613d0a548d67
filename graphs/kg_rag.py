"""The baselines of grounded reasoning (paper 001, §5), the retrieval ones over the same static-KG store::

    base:       answer_alone (the question only: the answer, no explanation)
    text-rag:   retrieve_nodes    (the nodes closest to the question)          → answer_from_context
    graph-rag:  retrieve_subgraph (the same nodes plus their 1-hop neighbours) → answer_from_context

Graph-CoT is ``grounded`` with ``strategy=cot, interaction=agent`` (the ``graph-cot`` presets).
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph

from kgagents.graphs import io
from kgagents.graphs.spec import Workflow
from kgagents.nodes import kg_rag as n
from kgagents.tools.pgraph.embeddings import EMBEDDING_STACK

__all__ = ["base", "base_graph", "build_base", "build_graph_rag", "build_text_rag", "graph_rag", "graph_rag_graph",
           "text_rag", "text_rag_graph"]


def _build(hops: int) -> StateGraph:
    g = io.workflow_graph(n.KGRagState, context_schema=n.KGRagContext, input_schema=io.GraphInput,
                          evidence=io.retrieval_evidence)
    retrieve = n.retrieve_node(hops)
    g.add_node(retrieve.__name__, retrieve)
    g.add_node("answer_from_context", n.answer_from_context)
    g.add_edge(START, retrieve.__name__)
    g.add_edge(retrieve.__name__, "answer_from_context")
    g.add_edge("answer_from_context", END)
    return g


def build_text_rag() -> StateGraph[Any, Any, Any, Any]:
    """Text-RAG: node texts retrieved by embedding, as context."""
    return _build(0)


def build_graph_rag() -> StateGraph[Any, Any, Any, Any]:
    """Graph-RAG: the retrieved nodes plus their 1-hop neighbours."""
    return _build(1)


def build_base() -> StateGraph[Any, Any, Any, Any]:
    """Base (zero-shot): the model alone answers with the answer only."""
    g = io.workflow_graph(n.KGRagState, context_schema=n.KGRagContext, input_schema=io.GraphInput,
                          evidence=io.retrieval_evidence)
    g.add_node("answer_alone", n.answer_alone)
    g.add_edge(START, "answer_alone")
    g.add_edge("answer_alone", END)
    return g


#: The paper's retriever for the RAG rows (``--preset paper-text-rag`` / ``paper-graph-rag``), as grounded
#: reasoning's ``paper-<row>`` presets: §5's Mpnet-v2 (Graph-CoT's all-mpnet-base-v2) on an exact index.
PAPER_RETRIEVER: dict[str, Any] = {"embedding_model": "all-mpnet-base-v2", "vector_index": "exact"}


def _baseline(name: str, description: str, build: Any, *, retrieves: bool = False) -> Workflow:
    """A baseline of grounded reasoning: the grounded workflow's evaluation adapter; one that ``retrieves`` gets
    the report of what it retrieved, its worker processes the embedding stack from the fork server, and a
    ``paper-<name>`` preset with the paper's retriever."""
    return Workflow(name=name, description=description, build=build, context=n.KGRagContext,
                    presets={f"paper-{name}": dict(PAPER_RETRIEVER)} if retrieves else {},
                    served=f"kgagents.graphs.kg_rag:{name.replace('-', '_')}_graph",
                    no_demo="a baseline of grounded reasoning: `kgagents demo --workflow grounded` runs its example",
                    adapter="kgagents.evals.grbench:kg_rag_adapter",
                    formatter="kgagents.cli.report:format_kg_rag" if retrieves else None,
                    preload=EMBEDDING_STACK if retrieves else ())


base = _baseline("base", "Grounded reasoning's baseline: the model alone answers (the answer only)", build_base)
text_rag = _baseline("text-rag", "Grounded reasoning's baseline: the KG nodes closest to the question as context",
                     build_text_rag, retrieves=True)
graph_rag = _baseline("graph-rag", "Grounded reasoning's baseline: the closest nodes and their 1-hop neighbours",
                      build_graph_rag, retrieves=True)

#: For ``langgraph.json``.
base_graph = base.graph
text_rag_graph = text_rag.graph
graph_rag_graph = graph_rag.graph
