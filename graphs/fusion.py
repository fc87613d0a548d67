"""Fusion of KGoT variants (KGoT paper §5.1, appendix D.2) as a LangGraph fan-out.

    receive task → run variant (one KGoT run per backend × solve mode, concurrently) → combine answers
                                                           (majority over normalised answers, LLM on ties)

The variants come with the task (``{"question": ..., "variants": ["networkx:query", "falkordb:direct"]}``) or
from the context (``variants="networkx:query,neo4j:query"``, e.g. ``kgagents eval fusion --set variants=...``);
default: NetworkX with query-based retrieval and with Direct Retrieval. Each variant is the compiled KGoT graph
run as a subgraph, with its own task KG; the CLI runs this workflow with ``kgagents ask --fusion ...``.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from kgagents.graphs import io, kgot
from kgagents.graphs.routing import add_routed_node
from kgagents.graphs.spec import Workflow
from kgagents.nodes import fusion as f

__all__ = ["NAME", "PRESETS", "WORKFLOW", "build", "compile_graph", "graph"]

NAME = "fusion"

#: KGoT's named contexts (``--preset paper``): every variant runs as KGoT does with them.
PRESETS = kgot.PRESETS


async def route_variants(state: f.FusionState) -> list[Send] | Literal["combine_answers"]:
    """Run every variant that has no result yet, concurrently (all done: combine at once)."""
    tasks = f.variant_tasks(state)
    return [Send("run_variant", task) for task in tasks] if tasks else "combine_answers"


def build() -> StateGraph[Any, Any, Any, Any]:
    """The uncompiled fusion graph."""
    g = io.workflow_graph(f.FusionState, context_schema=f.FusionContext, input_schema=io.FusionInput,
                          evidence=io.fusion_evidence)
    add_routed_node(g, "receive_task", f.receive_fusion_task, route_variants,
                    destinations=("run_variant", "combine_answers"))
    g.add_node("run_variant", f.make_run_variant(kgot.graph))
    g.add_node("combine_answers", f.combine_answers)
    g.add_edge(START, "receive_task")
    g.add_edge("run_variant", "combine_answers")
    g.add_edge("combine_answers", END)
    return g


WORKFLOW = Workflow(
    name=NAME, description="Fusion of KGoT variants (backend x solve mode), run concurrently; majority answer",
    build=build, context=f.FusionContext, served="kgagents.graphs.fusion:graph", presets=PRESETS,
    no_demo="a fusion run is several KGoT runs: `kgagents demo` runs KGoT's; `kgagents ask --fusion ...`",
    adapter="kgagents.evals.runner:fusion_adapter", formatter="kgagents.cli.report:format_fusion")


def compile_graph(checkpointer: Any = None, **kwargs: Any):
    """The compiled fusion graph, with a checkpointer for Python callers, tests and the CLI."""
    return WORKFLOW.compile_graph(checkpointer, **kwargs)


#: For ``langgraph.json`` / ``langgraph dev``: no checkpointer (the server brings its own).
graph = compile_graph()
