"""Grounded reasoning (paper 001, §4): Graph CoT / ToT / GoT, every step grounded in a static KG by the agent
(Graph-CoT's graph functions) or by automatic graph exploration (Algorithm 1). One graph serves every strategy
and interaction method; the runtime context chooses them::

    initialise (the graph, its definition, s0 = [q])
      └→ route_expand ─ a Send per (kept unfinished state, candidate j ≤ k) → generate_step
      │                 (thought + grounding)
      │                 or, when every kept state finished or the depth limit is reached → answer
    generate_step ×N → collect_candidates
      └→ route_merge ─ GoT: a Send per pair of candidates (divergent branches first) → merge_thoughts
                       (A(z_a, z_b), grounded like a step) → evaluate_states
                       otherwise → evaluate_states
    evaluate_states
      └→ route_evaluate ─ Score: a Send per candidate → score_state → select_states
                          Selection (or CoT's single chain) → select_states
    select_states (keep t per depth, BFS; every depth of two or more candidates is evaluated) → route_expand
    answer → END (the answer of the state that ended the search)

CoT is the same graph with one candidate and one kept state per depth (k = t = 1, no evaluator).
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from kgagents.graphs import io
from kgagents.graphs.policies import graph_read_policies
from kgagents.graphs.routing import add_routed_node
from kgagents.graphs.spec import Workflow
from kgagents.nodes import budget
from kgagents.nodes import grounded as n
from kgagents.nodes.grounded.context import GroundedContext, grounded_context_of
from kgagents.nodes.grounded.state import GroundedState
from kgagents.tools.pgraph.embeddings import EMBEDDING_STACK

__all__ = ["NAME", "PAPER_PROTOCOL", "PRESETS", "ROWS", "WORKFLOW", "build", "compile_graph", "graph"]

NAME = "grounded"

#: The paper's Table 1 / Table 2 rows (strategy × interaction × evaluator); n = 10, k = t = 3 are the
#: defaults.
ROWS: dict[str, dict[str, Any]] = {
    "graph-cot": {"strategy": "cot", "interaction": "agent"},
    "graph-explore": {"strategy": "cot", "interaction": "explore"},
    **{f"{strategy}-{interaction}-{evaluator}": {"strategy": strategy, "interaction": interaction,
                                                   "evaluator": evaluator}
       for strategy in ("tot", "got") for interaction in ("agent", "explore")
       for evaluator in ("select", "score")},
}

#: The paper's protocol on top of a row (``paper-<row>``): what the paper and Graph-CoT's code say, and the
#: project's choice where they are silent (docs/grounded.md has the table).
PAPER_PROTOCOL: dict[str, Any] = {
    # §4.1 Selection and appendix F's vote: each vote names the one best choice; ToT's vote evaluator samples
    # 5 votes and its value evaluator 3 (the paper gives no number), at ToT's temperature 0.7
    "selection": "vote", "vote_samples": 5, "score_samples": 3, "evaluate_temperature": 0.7,
    # Graph-CoT's agent writes its actions as text (``Action n: Function[args]``, several per step)
    "action_format": "text",
    # Graph-CoT's agent returns an empty answer when it reaches its step limit (§7: "reached the limit")
    "answer_at_limit": False,
    # Graph-CoT's prompts give a written definition per domain (and its examples per domain: domain=auto, the
    # default, picks them from the graph's node types)
    "definition_source": "domain",
    # §5: "Mpnet-v2 is used as the retriever, and FAISS is employed for indexing" (Graph-CoT:
    # all-mpnet-base-v2, an exact IndexFlatIP); the default vector_index is exact already
    "embedding_model": "all-mpnet-base-v2", "vector_index": "exact",
    # Graph-CoT's RetrieveNode is the embedding search alone (no exact-name lookup first)
    "retrieve_exact": False,
}

#: Named contexts (``--preset``): each row with the project's defaults, and ``paper-<row>`` with the paper's
#: protocol.
PRESETS: dict[str, dict[str, Any]] = {**ROWS, **{f"paper-{row}": {**values, **PAPER_PROTOCOL}
                                                 for row, values in ROWS.items()}}


async def collect_candidates(state: GroundedState) -> dict[str, Any]:
    """Where this depth's candidate branches meet (one superstep after all of them)."""
    return {}


async def evaluate_states(state: GroundedState) -> dict[str, Any]:
    """Where the candidates (and GoT's merges) meet before the state evaluator."""
    return {}


async def route_expand(state: GroundedState, runtime: Any) -> list[Send] | Literal["answer"]:
    """Expand every kept unfinished state into k candidates, unless the search is over (or the run's budget is
    spent: the answer then comes from the best state kept, as at the step limit)."""
    ctx = grounded_context_of(runtime)
    if state.get("depth", 0) and (stop := budget.stop(state, ctx, "answer")):
        return stop
    if state.get("depth", 0) == 0 or n.route_after_select(state, ctx):
        tasks = n.step_tasks(state, ctx)
        if tasks:
            return [Send("generate_step", task) for task in tasks]
    return "answer"


async def route_merge(state: GroundedState, runtime: Any) -> list[Send] | Literal["evaluate_states"]:
    """GoT merges disjoint pairs of the candidates; ToT and CoT go straight to evaluation."""
    if grounded_context_of(runtime).strategy == "got":
        tasks = n.merge_tasks(state)
        if tasks:
            return [Send("merge_thoughts", task) for task in tasks]
    return "evaluate_states"


async def route_evaluate(state: GroundedState, runtime: Any) -> list[Send] | Literal["select_states"]:
    """The Score evaluator scores every candidate (a branch each); Selection votes inside
    ``select_states``."""
    ctx = grounded_context_of(runtime)
    if ctx.strategy != "cot" and ctx.evaluator == "score":
        tasks = n.score_tasks(state)
        if tasks:
            return [Send("score_state", task) for task in tasks]
    return "select_states"


def build() -> StateGraph[Any, Any, Any, Any]:
    """The uncompiled grounded-reasoning graph."""
    g = io.workflow_graph(GroundedState, context_schema=GroundedContext, input_schema=io.GraphInput,
                          evidence=io.grounded_evidence)
    add_routed_node(g, "initialise", n.initialise, route_expand, destinations=("generate_step", "answer"),
                    **graph_read_policies("open"))  # it only opens and reads the graph (graphs/policies.py)
    g.add_node("generate_step", n.generate_step)
    add_routed_node(g, "collect_candidates", collect_candidates, route_merge,
                    destinations=("merge_thoughts", "evaluate_states"))
    g.add_node("merge_thoughts", n.merge_thoughts)
    add_routed_node(g, "evaluate_states", evaluate_states, route_evaluate,
                    destinations=("score_state", "select_states"))
    g.add_node("score_state", n.score_state)
    add_routed_node(g, "select_states", n.select_states, route_expand,
                    destinations=("generate_step", "answer"))
    g.add_node("answer", n.answer)

    g.add_edge(START, "initialise")
    g.add_edge("generate_step", "collect_candidates")
    g.add_edge("merge_thoughts", "evaluate_states")
    g.add_edge("score_state", "select_states")
    g.add_edge("answer", END)
    return g


WORKFLOW = Workflow(
    name=NAME, description="Grounded Graph-CoT / ToT / GoT: every reasoning step grounded in a static KG",
    build=build, context=GroundedContext, served="kgagents.graphs.grounded:graph", presets=PRESETS,
    demo="kgagents.cli.grounded:run_demo", adapter="kgagents.evals.grbench:grounded_adapter",
    formatter="kgagents.cli.report:format_grounded", preload=EMBEDDING_STACK)


def compile_graph(checkpointer: Any = None, **kwargs: Any):
    """The compiled graph, with a checkpointer for Python callers, tests and the CLI."""
    return WORKFLOW.compile_graph(checkpointer, **kwargs)


#: For ``langgraph.json`` / ``langgraph dev``: no checkpointer (the server brings its own).
graph = compile_graph()
