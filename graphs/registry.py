"""Every workflow the application serves, by name: one line per workflow, pointing at its spec.

The specs (:class:`kgagents.graphs.spec.Workflow`) are declared beside their graphs and imported only when a
workflow is asked for, so that the CLI starts without building every graph. The CLI (``ask``, ``demo``,
``eval``, ``show``), the evaluation runner, the report and ``langgraph.json`` (checked by a test) all read this
table; a new workflow is its graph, nodes and prompts modules plus one line here.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kgagents.graphs.spec import Workflow, resolve

__all__ = ["SPECS", "Workflow", "adapter_of", "demo_of", "formatter_of", "get", "names", "workflows"]

#: workflow name -> import string of its :class:`Workflow` spec.
SPECS: dict[str, str] = {
    "kgot": "kgagents.graphs.kgot:WORKFLOW",
    "fusion": "kgagents.graphs.fusion:WORKFLOW",
    "surfer": "kgagents.graphs.surfer:WORKFLOW",
    "zeroshot": "kgagents.graphs.baselines:zeroshot",
    "rag": "kgagents.graphs.baselines:rag",
    "kgot-graphrag": "kgagents.graphs.baselines:graphrag",
    "kgot-nokg": "kgagents.graphs.baselines:nokg",
    "ark": "kgagents.graphs.ark:WORKFLOW",
    "grounded": "kgagents.graphs.grounded:WORKFLOW",
    "base": "kgagents.graphs.kg_rag:base",
    "text-rag": "kgagents.graphs.kg_rag:text_rag",
    "graph-rag": "kgagents.graphs.kg_rag:graph_rag",
    "agent-g": "kgagents.graphs.agent_g:WORKFLOW",
    "agent-g-cot": "kgagents.graphs.agent_g_baselines:cot",
    "agent-g-text-rag": "kgagents.graphs.agent_g_baselines:text_rag",
    "agent-g-graph-rag": "kgagents.graphs.agent_g_baselines:graph_rag",
    "agent-g-hybrid-rag": "kgagents.graphs.agent_g_baselines:hybrid_rag",
    "agent-g-corrective-rag": "kgagents.graphs.agent_g_baselines:corrective_rag",
    "agent-g-react": "kgagents.graphs.agent_g_baselines:react",
}


def names() -> list[str]:
    """The registered workflows' names, in the table's order."""
    return list(SPECS)


@cache
def get(name: str) -> Workflow:
    """The spec of the workflow ``name``; a clear error naming the workflows when there is none such."""
    if name not in SPECS:
        raise ValueError(f"unknown workflow {name!r}; available: {', '.join(SPECS)}")
    spec = resolve(SPECS[name])
    if not isinstance(spec, Workflow) or spec.name != name:
        raise TypeError(f"{SPECS[name]} is not the Workflow spec of {name!r}")
    return spec


def workflows() -> list[Workflow]:
    """Every registered workflow's spec (this imports every graph module)."""
    return [get(name) for name in SPECS]


def module_of(name: str) -> str:
    """The module that declares the workflow (what a worker process imports ahead of its items)."""
    if name not in SPECS:
        raise ValueError(f"unknown workflow {name!r}; available: {', '.join(SPECS)}")
    return SPECS[name].partition(":")[0]


def adapter_of(name: str) -> Any:
    """The function that makes the evaluation adapter the workflow's spec names (None: the runner's default)."""
    spec = get(name)
    return resolve(spec.adapter) if spec.adapter else None


def formatter_of(name: str) -> Any:
    """The report formatter the workflow's spec names (None: the report's common lines only)."""
    spec = get(name)
    return resolve(spec.formatter) if spec.formatter else None


def demo_of(name: str) -> Any:
    """The demo function the workflow's spec names; a clear error saying why when it has none."""
    spec = get(name)
    if spec.demo is None:
        with_demo = ", ".join(n for n in SPECS if get(n).demo)
        raise ValueError(f"no demo for the {name} workflow: {spec.no_demo} (demos: {with_demo})")
    return resolve(spec.demo)
