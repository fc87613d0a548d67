"""Routers run inside their node's task (graphs/routing.py): the routes, state and drawn graph of conditional
edges, as one ``Command`` per task."""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Overwrite, Send

from kgagents.graphs import kgot
from kgagents.graphs.routing import add_routed_node, destinations_of, state_after


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    count: int
    todo: list[str]


def test_the_view_applies_the_update_as_the_channels_do() -> None:
    channels = StateGraph(State).channels
    state = {"log": ["a"], "count": 1, "todo": ["x"]}
    assert state_after(channels, state, {"log": ["b"], "count": 2}) == {"log": ["a", "b"], "count": 2,
                                                                         "todo": ["x"]}
    assert state_after(channels, state, {"log": Overwrite(["z"])})["log"] == ["z"]
    assert state_after(channels, {}, {"log": ["first"]}) == {"log": ["first"]}  # the reducer's default start
    assert state_after(channels, state, None) == state and state["log"] == ["a"]  # the state is not touched


class Ctx(TypedDict):
    limit: int


async def step(state: State, runtime: Runtime[Ctx]) -> dict[str, Any]:
    return {"log": [f"step {state.get('count', 0)}"], "count": state.get("count", 0) + 1}


def again_or_fan_out(state: State, runtime: Runtime[Ctx]) -> Literal["step", "work"] | list[Send]:
    if state["count"] < runtime.context["limit"]:  # the count the node has just written
        return "step"
    return [Send("work", {"item": item}) for item in state.get("todo", [])] or END


async def work(packet: dict[str, Any]) -> dict[str, Any]:
    return {"log": [f"work {packet['item']}"]}


async def finish(state: State, config: Any) -> dict[str, Any]:
    return {"log": [f"done in {config['configurable']['thread_id']}"]}


async def to_end(state: State) -> Literal["__end__"]:
    return END


def graph() -> Any:
    g = StateGraph(State, context_schema=Ctx)
    add_routed_node(g, "step", step, again_or_fan_out, destinations=("step", "work", END))
    g.add_node("work", work)
    add_routed_node(g, "finish", finish, to_end)
    g.add_edge(START, "step")
    g.add_edge("work", "finish")
    return g


async def test_routes_sends_and_the_end_as_conditional_edges_give_them() -> None:
    compiled = graph().compile(InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    out = await compiled.ainvoke({"todo": ["p", "q"]}, config, context={"limit": 3})
    assert out["log"] == ["step 0", "step 1", "step 2", "work p", "work q", "done in t1"]
    history = [s async for s in compiled.aget_state_history(config)]
    assert len(history) == 7  # one checkpoint per superstep, as with conditional edges
    out = await compiled.ainvoke({}, {"configurable": {"thread_id": "t2"}}, context={"limit": 1})
    assert out["log"] == ["step 0"]  # nothing to fan out: the end


def test_the_drawn_graph_has_the_routes() -> None:
    edges = {(e.source, e.target, e.conditional) for e in graph().compile().get_graph().edges}
    assert {("step", "step", True), ("step", "work", True), ("step", "__end__", True),
            ("finish", "__end__", True), ("work", "finish", False)} <= edges


async def test_a_node_that_routes_itself_is_refused() -> None:
    from langgraph.types import Command

    async def rogue(state: State) -> Command[Any]:
        return Command(goto=END)

    g = StateGraph(State)
    add_routed_node(g, "rogue", rogue, to_end)
    g.add_edge(START, "rogue")
    with pytest.raises(TypeError, match="returned a Command"):
        await g.compile().ainvoke({})


def test_a_router_without_named_destinations_is_refused() -> None:
    def anywhere(state: State) -> str:
        return END

    with pytest.raises(TypeError, match="Literal"):
        destinations_of(anywhere)


def test_kgot_routes_inside_its_nodes_and_draws_every_route() -> None:
    builder = kgot.build()
    assert not any(builder.branches.values())  # no conditional edge left: no per-step copy of every channel
    drawn = {(e.source, e.target) for e in builder.compile().get_graph().edges}
    assert {("receive_task", "decide_next_step"), ("receive_task", "solve_forced"),
            ("decide_next_step", "define_tool_calls"), ("decide_next_step", "mitigate_noise"),
            ("decide_next_step", "solve_with_query"), ("decide_next_step", "solve_directly"),
            ("define_tool_calls", "run_tool_call"), ("define_tool_calls", "integrate_new_information"),
            ("integrate_new_information", "integrate_new_information"),
            ("integrate_new_information", "decide_next_step"), ("integrate_new_information", "solve_forced"),
            ("parse_solution", "generate_forced_solution"), ("parse_solution", "output"), ("output", "__end__"),
            ("solve_forced", "process_math"), ("generate_forced_solution", "parse_solution")} <= drawn
    assert ("parse_solution", "__end__") not in drawn  # every way to the end goes through the output step


class Narrow(TypedDict, total=False):
    count: int


async def test_the_node_reads_the_state_its_annotation_names() -> None:
    """As with ``add_node``: a node annotated with a narrower schema gets only those keys."""
    seen: list[dict[str, Any]] = []

    async def look(state: Narrow) -> dict[str, Any]:
        seen.append(dict(state))
        return {"log": ["looked"]}

    g = StateGraph(State)
    add_routed_node(g, "look", look, to_end)
    g.add_edge(START, "look")
    out = await g.compile().ainvoke({"count": 3, "todo": ["x"], "log": ["a"]})
    assert seen == [{"count": 3}] and out["log"] == ["a", "looked"]
