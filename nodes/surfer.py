"""Nodes of the surfer agent: a ReAct loop (think → browse → think ...) over the web tools of
:mod:`kgagents.tools.web.tools`, bounded by a number of steps, ending with findings and their sources.

The browser's state (page, viewport, find position) lives in the graph state as a plain dict, so every step is
checkpointed and two runs never share a browser. The tools' environment (settings, the tools' model, limits)
comes from the caller through ``config["configurable"][TOOL_ENV_KEY]`` (the ``ask_search_agent`` tool passes
its own); a run started alone (Studio, tests) builds one from the run's
:class:`~kgagents.nodes.kgot.context.KGoTContext`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from kgagents.core.config import ConfigurationError
from kgagents.core.retry import ModelUnavailableError
from kgagents.core.usage import Usage, merge_usage, subtract_usage
from kgagents.nodes.kgot import KGoTContext, context_of, tool_env
from kgagents.nodes.llm import LLMCaller
from kgagents.nodes.runtime import EPHEMERAL, thread_id_of, work_dir_for
from kgagents.prompts import surfer as P
from kgagents.prompts.kgot import render
from kgagents.tools.base import run_tool_with_retry
from kgagents.tools.http import limits_of
from kgagents.tools.manager import ToolEnv
from kgagents.tools.web.browser import TextBrowser
from kgagents.tools.web.tools import make_surfer_tools

#: Where a caller puts its :class:`ToolEnv` in ``config["configurable"]`` (objects are never checkpointed).
TOOL_ENV_KEY = "kgagents_tool_env"
#: Steps of the agent (LLM turns) before it must answer, as in the surfer of the KGoT paper's tool suite.
DEFAULT_MAX_STEPS = 12
#: The most steps a caller may ask for.
MAX_STEPS_LIMIT = 50
FINAL_ANSWER = "final_answer"


class FinalAnswer(BaseModel):
    """Finish the research and report to your colleague."""

    answer: str = Field(description="The findings, in the three required parts.")
    sources: list[str] = Field(default_factory=list, description="URLs the answer rests on.")


def _final_answer_tool() -> dict[str, Any]:
    schema = convert_to_openai_tool(FinalAnswer)
    schema["function"]["name"] = FINAL_ANSWER
    return schema


class SurferInput(TypedDict, total=False):
    """What a caller gives the surfer."""

    question: str
    max_steps: int


#: The state keys ``ask_search_agent`` reads from a finished surfer run (a caller of the served graph gets the
#: workflows' common output instead, :class:`kgagents.graphs.io.RunOutput`).
RESULT_KEYS = ("answer", "sources", "usage", "usage_before")


class SurferState(TypedDict, total=False):
    """The surfer's state: the conversation, the browser, the step count, the findings, usage."""

    question: str
    max_steps: int
    messages: Annotated[list[AnyMessage], add_messages]
    browser: dict[str, Any]
    steps: int
    answer: str
    sources: list[str]
    error: str
    usage: Annotated[Usage, merge_usage]
    usage_before: Usage
    """Usage in the state when this run started (a namespace reused by a second call keeps the first's)."""
    final_answer: str
    """The answer, as every served graph's output names it (the same text as ``answer``)."""
    exit_reason: str
    """Why the research ended: an answer, its step limit, or a model that failed."""


# -- the run's environment ------------------------------------------------------------------------------
def surfer_env(ctx: KGoTContext, config: RunnableConfig | None) -> ToolEnv:
    """The caller's :class:`ToolEnv` (from the config), else one built from the run's context."""
    given = ((config or {}).get("configurable") or {}).get(TOOL_ENV_KEY)
    if isinstance(given, ToolEnv):
        return given
    return tool_env(ctx, config, work_dir=_work_dir(ctx, config))


def _work_dir(ctx: KGoTContext, config: RunnableConfig | None) -> Path:
    if ctx.work_dir or thread_id_of(config) != EPHEMERAL:
        return work_dir_for(ctx, config) / "tools"
    return Path(tempfile.gettempdir()) / "kgagents-surfer"  # never created: the surfer's tools write no files


def _max_steps(state: SurferState) -> int:
    return min(MAX_STEPS_LIMIT, max(1, int(state.get("max_steps") or DEFAULT_MAX_STEPS)))


def tool_schemas(env: ToolEnv) -> list[Any]:
    """The tools the agent's model sees: the web tools and ``final_answer``."""
    return [*make_surfer_tools(env, TextBrowser()), _final_answer_tool()]


# -- nodes ----------------------------------------------------------------------------------------------
def start(state: SurferState) -> dict[str, Any]:
    """Begin a research run: the instructions and the request, a blank browser, no steps taken."""
    question = (state.get("question") or "").strip()
    max_steps = _max_steps(state)
    return {
        "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES),
                     SystemMessage(render(P.SYSTEM, max_steps=max_steps)),
                     HumanMessage(render(P.TASK, question=question or "(no request was given)"))],
        "browser": TextBrowser().to_state(),
        "steps": 0,
        "max_steps": max_steps,
        "answer": "",
        "sources": [],
        "error": "",
        "usage_before": dict(state.get("usage") or {}),
    }


async def run_env(runtime: Runtime[KGoTContext], config: RunnableConfig) -> tuple[KGoTContext, ToolEnv]:
    """The run's context and tool environment (built in a worker thread: it may read files)."""
    ctx = context_of(runtime)
    return ctx, await asyncio.to_thread(surfer_env, ctx, config)


def _caller(ctx: KGoTContext, env: ToolEnv) -> LLMCaller:
    if env.llm is None:
        raise ConfigurationError("no chat model is configured for the tools (KGAGENTS_MODEL or "
                                 "KGAGENTS_TOOLS_MODEL, or the run's context)")
    return LLMCaller(ctx, "tools", model=env.llm)


async def think(state: SurferState, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
    """One agent step: the tools' model reads the conversation and calls tools (or final_answer)."""
    ctx, env = await run_env(runtime, config)
    try:
        llm = _caller(ctx, env)
        reply = await llm.message(state.get("messages") or [], tools=tool_schemas(env))
    except ModelUnavailableError:
        raise  # a model that cannot be used stops the run, not only the search
    except Exception as exc:  # noqa: BLE001 - a failed model (LLMError, no model) ends the search clearly
        return {"error": f"the search agent's model failed: {exc}", "steps": state.get("steps", 0) + 1}
    return {"messages": [reply], "steps": state.get("steps", 0) + 1, "usage": llm.usage}


def _last_ai(state: SurferState) -> AIMessage | None:
    for message in reversed(state.get("messages") or []):
        if isinstance(message, AIMessage):
            return message
    return None


async def browse(state: SurferState, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
    """Run the step's tool calls in order on the run's browser (bounded retries; errors become text)."""
    _, env = await run_env(runtime, config)
    env = dataclasses.replace(env, usage={})
    browser = TextBrowser.from_state(state.get("browser"), limits=limits_of(env.extra))
    tools = {t.name: t for t in make_surfer_tools(env, browser)}
    message = _last_ai(state)
    results: list[ToolMessage] = []
    for call in (message.tool_calls if message else []):
        tool = tools.get(call["name"])
        if tool is None:
            known = ", ".join([*tools, FINAL_ANSWER])
            output = f"Error: there is no tool {call['name']!r}; the tools are: {known}"
        else:
            run = await run_tool_with_retry(tool, call.get("args") or {}, max_retries=env.max_retries,
                                            backoff_base_s=env.backoff_base_s, backoff_max_s=env.backoff_max_s,
                                            max_output_chars=env.max_output_chars)
            output = run.output
        results.append(ToolMessage(content=output, tool_call_id=call.get("id") or call["name"], name=call["name"]))
    return {"messages": results, "browser": browser.to_state(), "usage": env.usage}


async def wrap_up(state: SurferState, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
    """Out of steps: the model writes its final answer from what it found, without tools."""
    ctx, env = await run_env(runtime, config)
    messages = list(state.get("messages") or [])
    prompt = HumanMessage(render(P.WRAP_UP, max_steps=_max_steps(state)))
    try:
        llm = _caller(ctx, env)
        reply = await llm.message([*messages, prompt])
    except ModelUnavailableError:
        raise
    except Exception as exc:  # noqa: BLE001 - as in think()
        return {"error": f"the search agent's model failed: {exc}"}
    return {"messages": [prompt, reply], "usage": llm.usage}


def finish(state: SurferState) -> dict[str, Any]:
    """The findings and their sources (those the agent named, then the pages it read)."""
    message = _last_ai(state)
    answer, named, reason = "", [], "answered"
    if state.get("error"):
        answer = f"The search could not be completed: {state['error']}"
        reason = f"the search failed: {state['error']}"
    elif message is not None:
        final = next((c for c in message.tool_calls if c["name"] == FINAL_ANSWER), None)
        if final is not None:
            args = final.get("args") or {}
            answer = str(args.get("answer") or "").strip()
            named = [str(s) for s in (args.get("sources") or []) if str(s).strip()]
        else:
            answer = (message.text if isinstance(message.text, str) else str(message.content)).strip()
            if state.get("steps", 0) >= _max_steps(state):
                reason = f"its step limit ({_max_steps(state)} steps): it answered from what it had found"
    if not answer:
        answer = "The search agent gave no answer."
    browser = TextBrowser.from_state(state.get("browser"))
    sources: list[str] = []
    for url in [*named, *browser.visited()]:
        if url not in sources:
            sources.append(url)
    return {"answer": answer, "sources": sources, "final_answer": answer, "exit_reason": reason}


# -- routers --------------------------------------------------------------------------------------------
async def route_after_think(state: SurferState) -> Literal["browse", "finish"]:
    """Browse when the model called tools; finish on final_answer, a plain reply or an error."""
    message = _last_ai(state)
    if state.get("error") or message is None or not message.tool_calls:
        return "finish"
    if any(c["name"] == FINAL_ANSWER for c in message.tool_calls):
        return "finish"
    return "browse"


async def route_after_browse(state: SurferState) -> Literal["think", "wrap_up"]:
    """Another step while steps are left; otherwise write the answer."""
    return "wrap_up" if state.get("steps", 0) >= _max_steps(state) else "think"


def report(result: dict[str, Any]) -> str:
    """The surfer's result as the text ``ask_search_agent`` returns."""
    sources = result.get("sources") or []
    listing = "\n".join(f"- {s}" for s in sources) if sources else "- (no web pages were read)"
    return render(P.REPORT, answer=str(result.get("answer") or "").strip(), sources=listing)


def usage_of_run(result: dict[str, Any]) -> Usage:
    """The usage of this run alone (the state's usage minus what it held when the run started)."""
    return subtract_usage(result.get("usage"), result.get("usage_before"))
