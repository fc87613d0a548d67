"""Agent-G's baselines (paper 004, §4) as graphs on the same retriever bank, generator and runner::

    agent-g-cot:             no_retrieval → generator → record → finish            (the LLM alone, CoT prompting)
    agent-g-text-rag:        text_action → retriever_bank → generator → record → finish
    agent-g-graph-rag:       extract → retriever_bank → generator → record → finish
    agent-g-hybrid-rag:      extract → retrieve_both → generator → record → finish  (references concatenated)
    agent-g-corrective-rag:  text_action → retriever_bank → evaluate_retrieval
                               ─ correct → generator; otherwise → extract → retriever_bank (graph) → generator
    agent-g-react:           react_step ⟲ (search_web / search_kg / extract) → finish, or generator at the limit

Each starts with Agent-G's ``initialise`` (pages converted and ranked) and ends with its ``finish``.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph

from kgagents.graphs import io
from kgagents.graphs.agent_g import PRESETS as PAPER
from kgagents.graphs.routing import add_routed_node
from kgagents.graphs.spec import Workflow
from kgagents.nodes import agent_g as n
from kgagents.nodes import agent_g_baselines as b
from kgagents.nodes import budget
from kgagents.nodes.agent_g import AgentGContext, AgentGState, agent_g_context_of
from kgagents.tools.pgraph.embeddings import EMBEDDING_STACK

__all__ = ["BASELINE_PRESETS", "build_corrective_rag", "build_cot", "build_graph_rag", "build_hybrid_rag",
           "build_react", "build_text_rag", "corrective_rag", "corrective_rag_graph", "cot", "cot_graph", "graph_rag",
           "graph_rag_graph", "hybrid_rag", "hybrid_rag_graph", "react", "react_graph", "text_rag", "text_rag_graph"]


def _graph() -> StateGraph[Any, Any, Any, Any]:
    g = io.workflow_graph(AgentGState, context_schema=AgentGContext, input_schema=io.AgentGInput,
                          evidence=io.agent_g_evidence)
    g.add_node("initialise", n.initialise)
    g.add_node("generator", n.generator)
    g.add_node("record", b.record)
    g.add_node("finish", n.finish)
    g.add_edge(START, "initialise")
    g.add_edge("generator", "record")
    g.add_edge("record", "finish")
    g.add_edge("finish", END)
    return g


def build_cot() -> StateGraph[Any, Any, Any, Any]:
    g = _graph()
    g.add_node("no_retrieval", b.fixed_action("none"))
    g.add_edge("initialise", "no_retrieval")
    g.add_edge("no_retrieval", "generator")
    return g


def build_text_rag() -> StateGraph[Any, Any, Any, Any]:
    g = _graph()
    g.add_node("text_action", b.fixed_action("text"))
    g.add_node("retriever_bank", n.retriever_bank)
    g.add_edge("initialise", "text_action")
    g.add_edge("text_action", "retriever_bank")
    g.add_edge("retriever_bank", "generator")
    return g


def build_graph_rag() -> StateGraph[Any, Any, Any, Any]:
    g = _graph()
    g.add_node("extract", b.extract)
    g.add_node("retriever_bank", n.retriever_bank)
    g.add_edge("initialise", "extract")
    g.add_edge("extract", "retriever_bank")
    g.add_edge("retriever_bank", "generator")
    return g


def build_hybrid_rag() -> StateGraph[Any, Any, Any, Any]:
    g = _graph()
    g.add_node("extract", b.extract)
    g.add_node("retrieve_both", b.retrieve_both)
    g.add_edge("initialise", "extract")
    g.add_edge("extract", "retrieve_both")
    g.add_edge("retrieve_both", "generator")
    return g


async def route_corrective(state: AgentGState) -> Literal["evaluate_retrieval", "generator"]:
    """The text module's references go to the retrieval evaluator; the graph module's to the generator."""
    return "generator" if state.get("action", {}).get("module") == "graph" else "evaluate_retrieval"


def build_corrective_rag() -> StateGraph[Any, Any, Any, Any]:
    g = _graph()
    g.add_node("text_action", b.fixed_action("text"))
    add_routed_node(g, "retriever_bank", n.retriever_bank, route_corrective)
    add_routed_node(g, "evaluate_retrieval", b.evaluate_retrieval, _corrective_judgement)
    g.add_node("extract", b.extract)
    g.add_edge("initialise", "text_action")
    g.add_edge("text_action", "retriever_bank")
    g.add_edge("extract", "retriever_bank")
    return g


async def _corrective_judgement(state: AgentGState) -> Literal["generator", "extract"]:
    """Correct references are used; ambiguous or incorrect ones send the question to the graph module."""
    return b.corrective_route(state)


async def route_react(state: AgentGState, runtime: Any) -> Literal["react_step", "generator", "finish"]:
    ctx = agent_g_context_of(runtime)
    route = b.react_route(state, ctx)
    return (route == "react_step" and budget.stop(state, ctx, "generator")) or route


def build_react() -> StateGraph[Any, Any, Any, Any]:
    g = _graph()
    add_routed_node(g, "react_step", b.react_step, route_react)
    g.add_edge("initialise", "react_step")
    return g


#: The baselines of Agent-G's experiments run with the paper's settings per benchmark (``--preset``).
BASELINE_PRESETS: dict[str, dict[str, Any]] = {name: PAPER[name] for name in ("paper-stark", "paper-crag")}


def _baseline(name: str, description: str, build: Any, *, retrieves: bool = True) -> Workflow:
    """A baseline of Agent-G's experiments: Agent-G's context, adapter and report, its paper presets; one that
    ``retrieves`` embeds (its worker processes get the embedding stack from the fork server)."""
    return Workflow(name=name, description=description, build=build, context=AgentGContext,
                    preload=EMBEDDING_STACK if retrieves else (),
                    served=f"kgagents.graphs.agent_g_baselines:{name[len('agent-g-'):].replace('-', '_')}_graph",
                    presets=BASELINE_PRESETS, no_demo="a baseline of Agent-G: `kgagents demo --workflow agent-g` runs "
                    "its example", adapter="kgagents.evals.agent_g:agent_g_adapter",
                    formatter="kgagents.cli.report:format_agent_g")


cot = _baseline("agent-g-cot", "Agent-G's baseline: the model alone, chain-of-thought prompting", build_cot,
               retrieves=False)
text_rag = _baseline("agent-g-text-rag", "Agent-G's baseline: the text module's references, one pass",
                     build_text_rag)
graph_rag = _baseline("agent-g-graph-rag", "Agent-G's baseline: the graph module's references, one pass",
                      build_graph_rag)
hybrid_rag = _baseline("agent-g-hybrid-rag", "Agent-G's baseline: both modules' references concatenated",
                       build_hybrid_rag)
corrective_rag = _baseline("agent-g-corrective-rag", "Agent-G's baseline: corrective RAG (text, else graph)",
                           build_corrective_rag)
react = _baseline("agent-g-react", "Agent-G's baseline: ReAct over web and KG search", build_react)

#: For ``langgraph.json``: no checkpointer (the server brings its own).
cot_graph = cot.graph
text_rag_graph = text_rag.graph
graph_rag_graph = graph_rag.graph
hybrid_rag_graph = hybrid_rag.graph
corrective_rag_graph = corrective_rag.graph
react_graph = react.graph
