"""The KGoT paper's baselines as graphs (§5, Figure 5), so that a report puts KGoT beside them on the same data
and model.

Zero-shot (``zeroshot``) — the model alone::

    receive task → answer zero-shot

Simple RAG (``rag``) — a vector store of KGoT's tool outputs of the same task, one chunk per tool call, no tool
call of its own::

    load KGoT's tool outputs → retrieve (FAISS) and answer

GraphRAG (``kgot-graphrag``) — the same tool outputs as a static KG of entities and relations::

    load KGoT's tool outputs → extract entities and relations (one task per chunk, concurrent) → build the graph
    → retrieve by traversal and answer

No KG (``kgot-nokg``) — KGoT's loop with the tool outputs as the task state instead of a knowledge graph::

    receive task → iteration check ─(limit reached)→ forced solve from the outputs ──┐
                        └→ vote (×N, majority) ─ SOLVE → solve from the outputs ───────┤
                              └─ ENHANCE → define tool calls → tool calls (concurrent) │
                                 → collect the outputs → iteration check               ▼
                                                     math processing → parse solution (×M, majority)

The tool executor, the tool calls, the math step and the parser are KGoT's own nodes.

Each is a :class:`~kgagents.graphs.spec.Workflow` spec (``build``, ``compile_graph``, ``graph``).
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from kgagents.graphs import io
from kgagents.graphs.kgot import PRESETS as KGOT_PRESETS
from kgagents.graphs.kgot import compile_graph as compile_kgot
from kgagents.graphs.routing import add_routed_node
from kgagents.graphs.spec import Workflow
from kgagents.nodes import baselines as n
from kgagents.nodes import budget
from kgagents.nodes.kgot import (
    KGoTContext,
    context_of,
    define_tool_calls,
    iteration_limit_reached,
    parse_solution,
    process_math,
    run_tool_call,
    tool_tasks,
)
from kgagents.tools.pgraph.embeddings import EMBEDDING_STACK

__all__ = ["build_graphrag", "build_nokg", "build_rag", "build_zeroshot", "graphrag", "graphrag_graph", "nokg",
           "nokg_graph", "rag", "rag_graph", "zeroshot", "zeroshot_graph"]

n.use_kgot_graph(compile_kgot)  # the baselines read KGoT's threads through its graph (nodes cannot import graphs)


def build_zeroshot() -> StateGraph[Any, Any, Any, Any]:
    """The uncompiled zero-shot graph."""
    g = io.workflow_graph(n.BaselineState, context_schema=n.BaselineContext, input_schema=io.TaskInput,
                          evidence=io.tool_evidence)
    g.add_node("receive_task", n.receive_task)
    g.add_node("answer_zero_shot", n.answer_zero_shot)
    g.add_edge(START, "receive_task")
    g.add_edge("receive_task", "answer_zero_shot")
    g.add_edge("answer_zero_shot", END)
    return g


def build_rag() -> StateGraph[Any, Any, Any, Any]:
    """The uncompiled simple-RAG graph."""
    g = io.workflow_graph(n.BaselineState, context_schema=n.BaselineContext, input_schema=io.CorpusInput,
                          evidence=io.retrieval_evidence)
    g.add_node("load_tool_outputs", n.load_tool_outputs)
    g.add_node("retrieve_and_answer", n.retrieve_and_answer)
    g.add_edge(START, "load_tool_outputs")
    g.add_edge("load_tool_outputs", "retrieve_and_answer")
    g.add_edge("retrieve_and_answer", END)
    return g


async def route_extraction(state: n.BaselineState) -> Literal["build_graph"] | list[Send]:
    """One extraction task per chunk, run concurrently (none left: build the graph)."""
    tasks = n.chunk_tasks(state)
    return [Send("extract_chunk", t) for t in tasks] if tasks else "build_graph"


def build_graphrag() -> StateGraph[Any, Any, Any, Any]:
    """The uncompiled GraphRAG graph."""
    g = io.workflow_graph(n.BaselineState, context_schema=n.BaselineContext, input_schema=io.CorpusInput,
                          evidence=io.retrieval_evidence)
    add_routed_node(g, "load_tool_outputs", n.load_tool_outputs, route_extraction,
                    destinations=("extract_chunk", "build_graph"))
    g.add_node("extract_chunk", n.extract_chunk)
    g.add_node("build_graph", n.build_graph)
    g.add_node("answer_from_graph", n.answer_from_graph)
    g.add_edge(START, "load_tool_outputs")
    g.add_edge("extract_chunk", "build_graph")
    g.add_edge("build_graph", "answer_from_graph")
    g.add_edge("answer_from_graph", END)
    return g


async def route_nokg_iteration(state: n.NoKGState, runtime: Any) -> Literal["solve_forced_from_tool_outputs",
                                                                            "decide_from_tool_outputs"]:
    """KGoT's iteration check: at the limit, solve with the outputs gathered; otherwise vote."""
    ctx = context_of(runtime)
    if iteration_limit_reached(state, ctx):  # type: ignore[arg-type]
        return "solve_forced_from_tool_outputs"
    return budget.stop(state, ctx, "solve_forced_from_tool_outputs") or "decide_from_tool_outputs"


async def route_nokg_vote(state: n.NoKGState) -> Literal["define_tool_calls", "solve_from_tool_outputs"]:
    """KGoT's majority vote: ENHANCE gathers more, SOLVE answers from the outputs."""
    return "define_tool_calls" if state.get("decision") == "ENHANCE" else "solve_from_tool_outputs"


async def route_nokg_tool_calls(state: n.NoKGState) -> Literal["collect_tool_outputs"] | list[Send]:
    """Run the defined tool calls concurrently (none: straight on to the next iteration)."""
    tasks = tool_tasks(state)
    return [Send("run_tool_call", t) for t in tasks] if tasks else "collect_tool_outputs"


async def route_nokg_solution(state: n.NoKGState) -> Literal["process_math", "parse_solution"]:
    """A partial solution goes to KGoT's math step; without one, parsing says "No solution found"."""
    return "process_math" if state.get("partial_solution") else "parse_solution"


def build_nokg() -> StateGraph[Any, Any, Any, Any]:
    """The uncompiled "no KG" graph."""
    g = io.workflow_graph(n.NoKGState, context_schema=KGoTContext, input_schema=io.TaskInput,
                          evidence=io.tool_evidence)
    add_routed_node(g, "receive_task", n.receive_nokg_task, route_nokg_iteration)
    add_routed_node(g, "decide_from_tool_outputs", n.decide_from_tool_outputs, route_nokg_vote)
    add_routed_node(g, "define_tool_calls", define_tool_calls, route_nokg_tool_calls,
                    destinations=("run_tool_call", "collect_tool_outputs"))
    g.add_node("run_tool_call", run_tool_call)
    add_routed_node(g, "collect_tool_outputs", n.collect_tool_outputs, route_nokg_iteration)
    add_routed_node(g, "solve_from_tool_outputs", n.solve_from_tool_outputs, route_nokg_solution)
    add_routed_node(g, "solve_forced_from_tool_outputs", n.solve_forced_from_tool_outputs, route_nokg_solution)
    g.add_node("process_math", process_math)
    g.add_node("parse_solution", parse_solution)
    g.add_edge(START, "receive_task")
    g.add_edge("run_tool_call", "collect_tool_outputs")
    g.add_edge("process_math", "parse_solution")
    g.add_edge("parse_solution", END)
    return g


def _baseline(name: str, description: str, build: Any, context: type, **more: Any) -> Workflow:
    """A KGoT-paper baseline: KGoT's presets, so that it runs as the KGoT run it is compared with."""
    attribute = {"kgot-graphrag": "graphrag", "kgot-nokg": "nokg"}.get(name, name)
    return Workflow(name=name, description=description, build=build, context=context,
                    served=f"kgagents.graphs.baselines:{attribute}_graph", presets=KGOT_PRESETS,
                    no_demo="a baseline of the KGoT paper: `kgagents demo` runs KGoT's example", **more)


_RAG_ADAPTER = "kgagents.evals.kgot_baselines:rag_baseline_adapter"
zeroshot = _baseline("zeroshot", "KGoT paper's baseline: the model alone, zero-shot", build_zeroshot,
                     n.BaselineContext)
rag = _baseline("rag", "KGoT paper's baseline: simple RAG over KGoT's tool outputs of the same task", build_rag,
                n.BaselineContext, adapter=_RAG_ADAPTER, preload=EMBEDDING_STACK)
graphrag = _baseline("kgot-graphrag", "KGoT paper's baseline: GraphRAG over KGoT's tool outputs of the same task",
                     build_graphrag, n.BaselineContext, adapter=_RAG_ADAPTER, preload=EMBEDDING_STACK)
nokg = _baseline("kgot-nokg", "KGoT paper's baseline: KGoT's loop with the tool outputs as state, no KG",
                 build_nokg, KGoTContext)

#: For ``langgraph.json``.
zeroshot_graph = zeroshot.graph
rag_graph = rag.graph
graphrag_graph = graphrag.graph
nokg_graph = nokg.graph
