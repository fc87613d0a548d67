"""Knowledge Graph of Thoughts (Besta et al.): the workflow of the paper's Figure 2 as a LangGraph.

    receive task → iteration check ─(limit reached)→ forced retrieval | forced solution ─┐
                        │                                                               │
                        └→ next-step decision (×N samples, concurrent; majority vote)    │
                              ├─ ENHANCE → define tool calls (missing information merged, tools picked)
                              │            → tool calls (concurrent) → integrate results into the KG
                              │            (one write at a time, fixed or discarded) → iteration check
                              └─ SOLVE → (optional noise mitigation) →                   │
                                 the RETRIEVE votes' solve operations: their read queries ┤
                                 | their answers (Direct Retrieval)                       │
                                                                                        ▼
                  (no partial solution) → generate forced solution ──→ math processing, per partial solution
                           ▲                                          (need for math? then the Python tool)
                           └──── (no answer parsed, once) ─────────── parse solution (×M samples per partial
                                                                      solution, concurrent; weighted majority,
                                                                      LLM judge on a tie)

One node per numbered step of the paper's workflow: the iteration check (2) is a router (it reads the state
and writes nothing); determining the tools (4) and the mathematical processing (8) are one node each; the tool
calls (5) are one ``Send`` task each and every KG write (6) its own step; the samples of a decision run
concurrently inside their node (see ``nodes/kgot.py``). The solve step (7) executes every solve operation the
RETRIEVE votes brought (appendix C.1, C.3.1); at the iteration limit it defines forced retrieve queries, and when
no partial solution or no parsed answer comes out, the forced solution is generated once (appendix D.5).
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import START, StateGraph
from langgraph.types import Send

import kgagents.graphs.surfer  # noqa: F401  (registers the surfer agent as the ask_search_agent tool)
from kgagents.graphs import io
from kgagents.graphs.routing import add_routed_node
from kgagents.graphs.spec import Workflow
from kgagents.nodes import budget, cleanup
from kgagents.nodes import kgot as n
from kgagents.nodes.kgot import KGoTContext, context_of

__all__ = ["NAME", "PRESETS", "WORKFLOW", "build", "compile_graph", "graph"]

NAME = "kgot"

#: Named contexts (``--preset``). ``paper``: as the authors ran it — the controller's two models at
#: temperature 0.0 and the tools' own model at 0.5, and one request per sample (the votes and the parses are
#: separate requests, so the prompt is paid once per sample, as the paper's costs are); the limits are the
#: paper's, which are the defaults (appendix B.2). The KGoT paper's baselines and fusion take the same
#: presets.
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"temperature": 0.0, "tools_temperature": 0.5, "samples_in_one_request": False},
}


async def route_iteration_check(state: n.KGoTState, runtime: Any) -> Literal["solve_forced", "decide_next_step"]:
    """Paper step 2: at the iteration limit (or the run's budget) solve with what the KG holds; otherwise decide
    the next step."""
    ctx = context_of(runtime)
    if n.iteration_limit_reached(state, ctx):
        return "solve_forced"
    return budget.stop(state, ctx, "solve_forced") or "decide_next_step"


async def route_majority_vote(state: n.KGoTState, runtime: Any) -> Literal["define_tool_calls", "mitigate_noise",
                                                                     "solve_with_query", "solve_directly"]:
    """Paper step 3: ENHANCE (insert) or SOLVE (retrieve) by the majority of the samples."""
    if state.get("decision") == "ENHANCE":
        return "define_tool_calls"
    if context_of(runtime).cleanup:
        return "mitigate_noise"
    return await route_solve_mode(state, runtime)


async def route_solve_mode(state: n.KGoTState, runtime: Any) -> Literal["solve_with_query", "solve_directly"]:
    """Paper §2.3: query-based retrieval or Direct Retrieval, as the context's ``solve_mode`` says."""
    return "solve_directly" if context_of(runtime).solve_mode == "direct" else "solve_with_query"


async def route_tool_calls(state: n.KGoTState) -> Literal["integrate_new_information"] | list[Send]:
    """Paper step 5: run the defined tool calls concurrently (none: straight on to the next iteration)."""
    tasks = n.tool_tasks(state)
    return [Send("run_tool_call", t) for t in tasks] if tasks else "integrate_new_information"


async def route_integration(state: n.KGoTState, runtime: Any) -> Literal["integrate_new_information", "solve_forced",
                                                                    "decide_next_step"]:
    """Paper step 6: one KG write per tool result, then the iteration check."""
    if n.results_to_integrate(state):
        return "integrate_new_information"
    return await route_iteration_check(state, runtime)


async def route_solution(state: n.KGoTState) -> Literal["process_math", "generate_forced_solution",
                                                         "parse_solution"]:
    """Partial solutions go to the math step; without any, the forced solution (once; after it, parsing says
    "No solution found")."""
    if n.current_partials(state):
        return "process_math"
    return "generate_forced_solution" if n.needs_forced_solution(state) else "parse_solution"


async def route_parsed(state: n.KGoTState) -> Literal["generate_forced_solution", "__end__"]:
    """Appendix D.5: when no parse gave an answer, the forced solution (once); otherwise the run is done."""
    return "generate_forced_solution" if n.needs_forced_solution(state) else "__end__"  # END


def build() -> StateGraph[Any, Any, Any, Any]:
    """The uncompiled KGoT graph."""
    g = io.workflow_graph(n.KGoTState, context_schema=KGoTContext, input_schema=io.TaskInput,
                          evidence=io.kg_evidence)
    # Every router runs inside the task of the node before it (graphs/routing.py): the same routes as conditional
    # edges, without LangGraph's copy of every channel per routed step.
    add_routed_node(g, "receive_task", n.receive_task, route_iteration_check)
    add_routed_node(g, "decide_next_step", n.decide_next_step, route_majority_vote)
    add_routed_node(g, "define_tool_calls", n.define_tool_calls, route_tool_calls,
                    destinations=("run_tool_call", "integrate_new_information"))
    g.add_node("run_tool_call", n.run_tool_call)
    add_routed_node(g, "integrate_new_information", n.integrate_new_information, route_integration)
    add_routed_node(g, "mitigate_noise", cleanup.mitigate_noise, route_solve_mode)
    for name, solve in (("solve_with_query", n.solve_with_query), ("solve_directly", n.solve_directly),
                        ("solve_forced", n.solve_forced), ("generate_forced_solution", n.generate_forced_solution)):
        add_routed_node(g, name, solve, route_solution)
    g.add_node("process_math", n.process_math)
    add_routed_node(g, "parse_solution", n.parse_solution, route_parsed)

    g.add_edge(START, "receive_task")
    g.add_edge("run_tool_call", "integrate_new_information")
    g.add_edge("process_math", "parse_solution")
    return g


WORKFLOW = Workflow(
    name=NAME, description="Knowledge Graph of Thoughts: a task KG built by tool calls, queried to answer",
    build=build, context=KGoTContext, served="kgagents.graphs.kgot:graph", presets=PRESETS,
    demo="kgagents.cli.kgot:run_demo", formatter="kgagents.cli.report:format_kgot")


def compile_graph(checkpointer: Any = None, **kwargs: Any):
    """The compiled KGoT graph, with a checkpointer for Python callers, tests and the CLI."""
    return WORKFLOW.compile_graph(checkpointer, **kwargs)


#: For ``langgraph.json`` / ``langgraph dev``: no checkpointer (the server brings its own).
graph = compile_graph()
