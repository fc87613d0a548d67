"""The surfer agent (KGoT paper, §3.3): a web-research ReAct loop as its own graph, and the
``ask_search_agent`` tool that runs it.

    start → think ─(tool calls)→ browse ─(steps left)→ think ...
              │                    └─(out of steps)→ wrap_up → finish
              └─(final_answer / plain reply / model error)→ finish → output

A caller of the served graph gets every workflow's output (:class:`kgagents.graphs.io.RunOutput`: the answer,
cost and tokens, ``evidence.sources``, ``exit_reason``); ``ask_search_agent`` reads the findings and usage from
the run's state (:data:`kgagents.nodes.surfer.RESULT_KEYS`).

``ask_search_agent`` invokes this graph with the config of the tool call, so when a workflow node runs the
tool, LangGraph nests the surfer as a subgraph in the parent's checkpoint namespace: every surfer step is
checkpointed with the parent run and a resumed parent resumes the surfer where it stopped. The surfer's model
calls are part of the calling step for the run's budget (:func:`kgagents.nodes.budget.nested_config`): checked
against the whole run's usage and seen by the step's other tool calls.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field

from kgagents.core.config import Settings
from kgagents.core.retry import ModelUnavailableError
from kgagents.core.usage import merge_usage
from kgagents.graphs import io
from kgagents.graphs.routing import add_routed_node
from kgagents.graphs.spec import Workflow
from kgagents.nodes import budget
from kgagents.nodes import surfer as n
from kgagents.nodes.kgot import KGoTContext
from kgagents.tools.manager import ToolEnv, ToolStatus, register_tool

__all__ = ["NAME", "WORKFLOW", "build", "check_surfer", "compile_graph", "graph", "make_surfer_tool",
           "recursion_limit"]

NAME = "surfer"
#: Enough super-steps for ``max_steps`` agent steps (two per step, plus start, wrap-up, finish and output).
RECURSION_PER_STEP = 2
RECURSION_EXTRA = 10


def build() -> StateGraph[Any, Any, Any, Any]:
    """The uncompiled surfer graph."""
    g = io.workflow_graph(n.SurferState, context_schema=KGoTContext, input_schema=n.SurferInput,
                          evidence=io.surfer_evidence)
    g.add_node("start", n.start)
    add_routed_node(g, "think", n.think, n.route_after_think)
    add_routed_node(g, "browse", n.browse, n.route_after_browse)
    g.add_node("wrap_up", n.wrap_up)
    g.add_node("finish", n.finish)
    g.add_edge(START, "start")
    g.add_edge("start", "think")
    g.add_edge("wrap_up", "finish")
    g.add_edge("finish", END)
    return g


def recursion_limit(max_steps: int = n.MAX_STEPS_LIMIT) -> int:
    """The recursion limit a run of ``max_steps`` agent steps needs."""
    return RECURSION_PER_STEP * max_steps + RECURSION_EXTRA


WORKFLOW = Workflow(
    name=NAME, description="KGoT's web-research agent alone: search, read pages, report with sources",
    build=build, context=KGoTContext, served="kgagents.graphs.surfer:graph",
    no_demo="it reads the live web (a search API key); KGoT's demo runs the workflow that calls it",
    compile_options={"recursion_limit": recursion_limit()})


def compile_graph(checkpointer: Any = None, **kw: Any) -> Any:
    """The compiled surfer graph (``checkpointer=None``: none of its own, or its parent's when nested)."""
    return WORKFLOW.compile_graph(checkpointer, **kw)


graph = compile_graph()


# -- the ask_search_agent tool ------------------------------------------------------------------------------
class AskSearchAgentInput(BaseModel):
    query: str = Field(description="Your request as a full sentence with all useful context (what you already "
                                   "know, time frame, where to look). Not a keyword query.")


DESCRIPTION = (
    "Send a web-research request to a team member who searches the web (Google through SerpApi), reads "
    "pages, PDFs and Wikipedia (also as they were on a past date, and archived pages) and reports back with "
    "a short answer, a detailed one and the source URLs. Ask them anything that needs the web; they cannot "
    "solve the wider problem for you. Give as much context as you can, in particular a time frame. Example: "
    "ask_search_agent(query=\"What was the population of Zurich in the 2020 census according to the city's "
    "statistics office?\")"
)


def make_surfer_tool(env: ToolEnv) -> BaseTool:
    """The ``ask_search_agent`` tool of one run: runs the surfer graph with this run's tool environment."""

    async def ask_search_agent(query: str, config: RunnableConfig) -> str:
        ctx = env.extra.get("context")
        if not isinstance(ctx, KGoTContext):
            ctx = KGoTContext()
        cfg: dict[str, Any] = dict(config or {})
        # the search is part of the calling run's step: its calls count against (and for) the run's budget
        cfg["configurable"] = budget.nested_config({**(cfg.get("configurable") or {}), n.TOOL_ENV_KEY: env})
        cfg["recursion_limit"] = max(int(cfg.get("recursion_limit") or 0), recursion_limit())
        try:
            result = await graph.ainvoke({"question": query}, config=cfg, context=ctx,
                                         output_keys=list(n.RESULT_KEYS))
        except (GraphBubbleUp, ModelUnavailableError):
            raise  # the parent graph's interrupts and commands; a model that cannot be used stops the run
        except Exception as exc:  # noqa: BLE001 - the controller gets a clear error, the run goes on
            return f"Error: the search agent failed: {type(exc).__name__}: {exc}"
        # (not add_usage: the search's calls were counted for the run's budget as they were made)
        env.usage = merge_usage(env.usage, n.usage_of_run(result))
        return n.report(result)

    return StructuredTool.from_function(coroutine=ask_search_agent, name="ask_search_agent",
                                        description=DESCRIPTION, args_schema=AskSearchAgentInput)


def check_surfer(settings: Settings) -> ToolStatus:
    """Available with a SerpApi key or a SerpApi-compatible endpoint (``KGAGENTS_SEARCH_API_BASE``)."""
    if settings.serpapi_api_key:
        return ToolStatus("ask_search_agent", True, "available")
    if settings.search_api_base:
        return ToolStatus("ask_search_agent", True, f"available (search endpoint {settings.search_api_base})")
    return ToolStatus("ask_search_agent", False, "missing key SERPAPI_API_KEY")


register_tool(make_surfer_tool, name="ask_search_agent", check=check_surfer)
