"""The KGoT paper's baselines as graphs, so that a report can put KGoT beside them on the same data and model.

Zero-shot — the model alone::

    receive task → answer zero-shot

Simple RAG — KGoT's tool loop with a vector store of tool outputs instead of a knowledge graph::

    receive task → iteration check ─(limit reached)──────────────────────────────┐
                        └→ define tool calls (sees the retrieved chunks) ─(none)─→ retrieve and answer
                              └→ tool calls (concurrent) → index tool outputs → iteration check

Each is a :class:`Workflow` (``build``, ``compile_graph``, ``graph``), registered as ``zeroshot`` and ``rag``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from nodes import baselines as n
from nodes.kgot import run_tool_call, tool_tasks
from nodes.runtime import context_of


def build_zeroshot() -> StateGraph:
    """The uncompiled zero-shot graph."""
    g = StateGraph(n.BaselineState, context_schema=n.BaselineContext)
    g.add_node("receive_task", n.receive_task)
    g.add_node("answer_zero_shot", n.answer_zero_shot)
    g.add_edge(START, "receive_task")
    g.add_edge("receive_task", "answer_zero_shot")
    g.add_edge("answer_zero_shot", END)
    return g


async def route_iteration_check(state: n.BaselineState, runtime: Any) -> Literal["define_tool_calls", "retrieve_and_answer"]:
    """Gather more while iterations are left; then answer with what the store holds."""
    if state.get("iteration", 0) >= context_of(runtime).max_iterations:
        return "retrieve_and_answer"
    return "define_tool_calls"


async def route_tool_calls(state: n.BaselineState) -> Literal["retrieve_and_answer"] | list[Send]:
    """No tool call means the retrieved chunks suffice: answer. Otherwise run the calls concurrently."""
    tasks = tool_tasks(state)
    return [Send("run_tool_call", t) for t in tasks] if tasks else "retrieve_and_answer"


def build_rag() -> StateGraph:
    """The uncompiled simple-RAG graph."""
    g = StateGraph(n.BaselineState, context_schema=n.BaselineContext)
    g.add_node("receive_task", n.receive_task)
    g.add_node("check_iteration", n.check_iteration)
    g.add_node("define_tool_calls", n.define_tool_calls)
    g.add_node("run_tool_call", run_tool_call)
    g.add_node("index_tool_outputs", n.index_tool_outputs)
    g.add_node("retrieve_and_answer", n.retrieve_and_answer)
    g.add_edge(START, "receive_task")
    g.add_edge("receive_task", "check_iteration")
    g.add_conditional_edges("check_iteration", route_iteration_check)
    g.add_conditional_edges("define_tool_calls", route_tool_calls, ["run_tool_call", "retrieve_and_answer"])
    g.add_edge("run_tool_call", "index_tool_outputs")
    g.add_edge("index_tool_outputs", "check_iteration")
    g.add_edge("retrieve_and_answer", END)
    return g


@dataclass(frozen=True)
class Workflow:
    """A workflow defined next to others in one module: what ``kgagents.workflows`` needs of it."""

    name: str
    build: Callable[[], StateGraph]

    def compile_graph(self, checkpointer: Any = None, **kwargs: Any):
        """The compiled graph, with a checkpointer for Python callers, tests and the CLI."""
        return self.build().compile(checkpointer=checkpointer, name=self.name, **kwargs)

    @property
    def graph(self):
        """For ``langgraph dev``: no checkpointer."""
        return self.build().compile(name=self.name)


zeroshot = Workflow("zeroshot", build_zeroshot)
rag = Workflow("rag", build_rag)

#: For ``langgraph.json``.
zeroshot_graph = zeroshot.graph
rag_graph = rag.graph
