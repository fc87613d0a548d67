"""ARK-V1 (Klein & Ohnemus): the anchor → relation → triples agent of the paper's Figure 1 as a LangGraph.

    1 initialise context → 2 new reasoning step → 3 prompt: select anchor → 4 select anchor
          4 ─ eq. 3: c ≥ C_max → 11 | anchor is a head entity → 5 | otherwise → 3
    5 retrieve relations ─ eq. 5: none → 3 | otherwise → 6
    6 prompt: select relation → 7 select relation
          7 ─ eq. 7: c ≥ C_max → 11 | empty relation (give up the anchor) → 4 | r ∈ R(k) → 8 | otherwise → 6
    8 retrieve triples → 9 reasoning step
          9 ─ eq. 10: c ≥ C_max → 11 | selected keys ⊆ retrieved → 10 | otherwise → 8
    10 clean-up (summary, context reset)
          10 ─ eq. 11: k ≥ K_max → 11 | continue → 2 | otherwise → 11
    11 final answer

Each router checks the conditions in the order the equation lists them.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph

from kgagents.graphs import io
from kgagents.graphs.policies import graph_read_policies
from kgagents.graphs.routing import add_routed_node
from kgagents.graphs.spec import Workflow
from kgagents.nodes import ark as n
from kgagents.nodes import budget
from kgagents.nodes.ark.context import ArkContext, ark_context_of
from kgagents.nodes.ark.state import ArkState
from kgagents.nodes.critic import verdict
from kgagents.tools.pgraph.embeddings import EMBEDDING_STACK

__all__ = ["NAME", "WORKFLOW", "build", "compile_graph", "graph"]

NAME = "ark"


async def route_anchor(state: ArkState, runtime: Any) -> Literal["final_answer", "retrieve_relations",
                                                           "prompt_select_anchor"]:
    """Eq. (3): the attempt limit first, then the anchor's validity (a head entity, eq. 2); the run's budget
    ends it as the limit does."""
    current = state.get("current") or {}
    ctx = ark_context_of(runtime)
    decision = verdict(bool(current.get("anchor_valid")), (current.get("c") or {}).get("anchor", 0),
                       ctx.c_max, limit_first=True)
    routes: dict[str, Literal["final_answer", "retrieve_relations", "prompt_select_anchor"]] = {
        "stop": "final_answer", "accept": "retrieve_relations", "retry": "prompt_select_anchor"}
    route = routes[decision]
    return (route != "final_answer" and budget.stop(state, ctx, "final_answer")) or route


async def route_relations(state: ArkState) -> Literal["prompt_select_anchor", "prompt_select_relation"]:
    """Eq. (5): an anchor without outgoing relations sends the agent back to anchor selection."""
    if not (state.get("current") or {}).get("relations"):
        return "prompt_select_anchor"
    return "prompt_select_relation"


async def route_relation(state: ArkState, runtime: Any) -> Literal[
        "final_answer", "select_anchor", "retrieve_triples", "prompt_select_relation"]:
    """Eq. (7): the attempt limit, then giving up on the anchor (r = ∅ → step 4), then validity (eq. 6)."""
    current = state.get("current") or {}
    ctx = ark_context_of(runtime)
    attempts, limit = (current.get("c") or {}).get("relation", 0), ctx.c_max
    if attempts >= limit:
        return "final_answer"
    if stop := budget.stop(state, ctx, "final_answer"):
        return stop
    if current.get("gave_up"):
        return "select_anchor"
    decision = verdict(bool(current.get("relation_valid")), attempts, limit, limit_first=True)
    routes: dict[str, Literal["final_answer", "retrieve_triples", "prompt_select_relation"]] = {
        "stop": "final_answer", "accept": "retrieve_triples", "retry": "prompt_select_relation"}
    return routes[decision]


async def route_reasoning(state: ArkState, runtime: Any) -> Literal["final_answer", "clean_up",
                                                                    "retrieve_triples"]:
    """Eq. (10): the attempt limit, then whether the selected triples are among the retrieved ones."""
    current = state.get("current") or {}
    ctx = ark_context_of(runtime)
    decision = verdict(bool(current.get("reasoning_valid")), (current.get("c") or {}).get("reasoning", 0),
                       ctx.c_max, limit_first=True)
    routes: dict[str, Literal["final_answer", "clean_up", "retrieve_triples"]] = {
        "stop": "final_answer", "accept": "clean_up", "retry": "retrieve_triples"}
    route = routes[decision]
    return (route != "final_answer" and budget.stop(state, ctx, "final_answer")) or route


async def route_continue(state: ArkState, runtime: Any) -> Literal["final_answer", "new_reasoning_step"]:
    """Eq. (11): the step limit K_max first, then the model's continue flag f."""
    ctx = ark_context_of(runtime)
    if state.get("k", 0) >= ctx.k_max:
        return "final_answer"
    steps = state.get("steps") or []
    if steps and steps[-1]["continue_exploration"]:
        return budget.stop(state, ctx, "final_answer") or "new_reasoning_step"
    return "final_answer"


def build() -> StateGraph[Any, Any, Any, Any]:
    """The uncompiled ARK-V1 graph."""
    g = io.workflow_graph(ArkState, context_schema=ArkContext, input_schema=io.ArkInput,
                          evidence=io.ark_evidence)
    # the steps that only read the graph take LangGraph's retry and time limit (graphs/policies.py)
    g.add_node("initialise_context", n.initialise_context, **graph_read_policies("open"))  # 1
    g.add_node("new_reasoning_step", n.new_reasoning_step)            # 2
    g.add_node("prompt_select_anchor", n.prompt_select_anchor)        # 3
    add_routed_node(g, "select_anchor", n.select_anchor, route_anchor)  # 4
    add_routed_node(g, "retrieve_relations", n.retrieve_relations, route_relations,
                    **graph_read_policies("lookup"))  # 5
    g.add_node("prompt_select_relation", n.prompt_select_relation)    # 6
    add_routed_node(g, "select_relation", n.select_relation, route_relation)  # 7
    g.add_node("retrieve_triples", n.retrieve_triples, **graph_read_policies("lookup"))  # 8
    add_routed_node(g, "reasoning_step", n.reasoning_step, route_reasoning)  # 9
    add_routed_node(g, "clean_up", n.clean_up, route_continue)  # 10
    g.add_node("final_answer", n.final_answer)                        # 11

    g.add_edge(START, "initialise_context")
    g.add_edge("initialise_context", "new_reasoning_step")
    g.add_edge("new_reasoning_step", "prompt_select_anchor")
    g.add_edge("prompt_select_anchor", "select_anchor")
    g.add_edge("prompt_select_relation", "select_relation")
    g.add_edge("retrieve_triples", "reasoning_step")
    g.add_edge("final_answer", END)
    return g


WORKFLOW = Workflow(
    name=NAME,
    description="ARK-V1: an agent walks a static KG anchor by anchor, relation by relation, to an answer",
    build=build, context=ArkContext, served="kgagents.graphs.ark:graph",
    demo="kgagents.cli.ark:run_demo", adapter="kgagents.evals.colota:ark_adapter",
    formatter="kgagents.cli.report:format_ark", preload=EMBEDDING_STACK)


def compile_graph(checkpointer: Any = None, **kwargs: Any):
    """The compiled ARK-V1 graph, with a checkpointer for Python callers, tests and the CLI."""
    return WORKFLOW.compile_graph(checkpointer, **kwargs)


#: For ``langgraph.json`` / ``langgraph dev``: no checkpointer (the server brings its own).
graph = compile_graph()
