"""Agent-G (paper 004): Algorithm 1 as a LangGraph::

    initialise → agent (a_t) → retriever_bank (X_t) → generator (ŷ_t) → validator (C_val)
        validator ─ accepted → finish
                  ─ rejected, t < T → commentor (f_t) → agent
                  ─ rejected, t = T → finish (the last answer)

The task mode (``generation`` for CRAG-style questions, ``retrieval`` for STaRK-style ones) and T come from the
context; the baselines of the paper's §4 are in :mod:`kgagents.graphs.agent_g_baselines`.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph

from kgagents.graphs import io
from kgagents.graphs.routing import add_routed_node
from kgagents.graphs.spec import Workflow
from kgagents.nodes import agent_g as n
from kgagents.nodes import budget
from kgagents.nodes.agent_g import AgentGContext, AgentGState, agent_g_context_of
from kgagents.tools.pgraph.embeddings import EMBEDDING_STACK

__all__ = ["NAME", "PRESETS", "WORKFLOW", "build", "compile_graph", "graph"]

NAME = "agent-g"

#: The paper's settings per benchmark (appendix A.2; docs/agent_g.md's table), and its ablations (Tables 6, 7).
_STARK = {"task": "retrieval", "embedding_model": "openai:text-embedding-ada-002", "vector_index": "exact",
          "max_iterations": 5, "radius": 2, "max_nodes": None}
_CRAG = {"task": "generation", "embedding_model": "BAAI/bge-m3", "batch_size": 5, "max_iterations": 5, "radius": 2,
         "generator_idk": False}
PRESETS: dict[str, dict[str, Any]] = {
    "paper-stark": _STARK,
    "paper-stark-no-context": {**_STARK, "validator_context": False},
    "paper-stark-5-shot": {**_STARK, "commentor_shots": 5},
    "paper-stark-oracle": {**_STARK, "oracle_validator": True, "oracle_commentor": True},
    "paper-crag": _CRAG,
    "paper-crag-no-context": {**_CRAG, "validator_context": False},
    "paper-crag-0-shot": {**_CRAG, "commentor_shots": 0},
    "paper-crag-oracle": {**_CRAG, "oracle_validator": True, "oracle_commentor": True},
}


async def route_critic(state: AgentGState, runtime: Any) -> Literal["finish", "commentor"]:
    """Lines 7–12 of Algorithm 1: an accepted answer ends the run; a rejected one gets feedback while
    iterations are left; a run that spent its budget ends with the generator's answer so far, as after T
    iterations."""
    ctx = agent_g_context_of(runtime)
    if n.route_verdict(state, ctx) != "retry":
        return "finish"
    return budget.stop(state, ctx, "finish") or "commentor"


def build() -> StateGraph[Any, Any, Any, Any]:
    """The uncompiled Agent-G graph."""
    g = io.workflow_graph(AgentGState, context_schema=AgentGContext, input_schema=io.AgentGInput,
                          evidence=io.agent_g_evidence)
    g.add_node("initialise", n.initialise)
    g.add_node("agent", n.agent)
    g.add_node("retriever_bank", n.retriever_bank)
    g.add_node("generator", n.generator)
    add_routed_node(g, "validator", n.validator, route_critic)
    g.add_node("commentor", n.commentor)
    g.add_node("finish", n.finish)
    g.add_edge(START, "initialise")
    g.add_edge("initialise", "agent")
    g.add_edge("agent", "retriever_bank")
    g.add_edge("retriever_bank", "generator")
    g.add_edge("generator", "validator")
    g.add_edge("commentor", "agent")
    g.add_edge("finish", END)
    return g


WORKFLOW = Workflow(
    name=NAME, description="Agent-G: an agent picks the text or graph module, a critic validates and comments",
    build=build, context=AgentGContext, served="kgagents.graphs.agent_g:graph", presets=PRESETS,
    demo="kgagents.cli.agent_g:run_demo", adapter="kgagents.evals.agent_g:agent_g_adapter",
    formatter="kgagents.cli.report:format_agent_g", preload=EMBEDDING_STACK)


def compile_graph(checkpointer: Any = None, **kwargs: Any):
    """The compiled graph, with a checkpointer for Python callers, tests and the CLI."""
    return WORKFLOW.compile_graph(checkpointer, **kwargs)


#: For ``langgraph.json`` / ``langgraph dev``: no checkpointer (the server brings its own).
graph = compile_graph()
