"""The surfer agent: a scripted model drives the real graph and tools through search → visit → page down →
find → answer, against the loopback fixture server; the tool's registration, status and nesting as a
checkpointed subgraph."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from kgagents.core.config import Settings
from kgagents.graphs import surfer
from kgagents.nodes import surfer as n
from kgagents.nodes.kgot import KGoTContext
from kgagents.prompts import surfer as P
from kgagents.prompts.template import placeholders
from kgagents.tools.base import run_tool_with_retry
from kgagents.tools.manager import ToolManager, tool_statuses
from tests.tools.conftest import make_env, scripted


def research_script(web) -> list[dict[str, Any]]:
    article = web.url("/files/article.html")
    return [
        {"when": r"<request>\s*Who opened the observatory on Lake Vornhal",
         "tool_calls": [{"name": "web_search", "args": {"query": "Lake Vornhal observatory"}}]},
        {"when": r"## Web search results for 'Lake Vornhal observatory'.*" + article.replace(".", r"\."),
         "tool_calls": [{"name": "visit_page", "args": {"url": article}}]},
        {"when": r"Title: Lake Vornhal\nViewport position: showing page 1 of",
         "tool_calls": [{"name": "page_down", "args": {}}]},
        {"when": r"Viewport position: showing page 2 of",
         "tool_calls": [{"name": "find_on_page", "args": {"search_string": "Ilse Brandt"}}]},
        {"when": r"\[Match 1 of 1 for 'Ilse Brandt'\.\].*opened in 1923 by the astronomer Ilse Brandt",
         "tool_calls": [{"name": "final_answer", "args": {
             "answer": "### 1. Search outcome (short version)\nIlse Brandt opened it in 1923.\n"
                       "### 2. Search outcome (extremely detailed version)\nThe observatory on Lake Vornhal "
                       "was opened in 1923 by the astronomer Ilse Brandt.\n### 3. Additional context\nNone.",
             "sources": [article]}}]},
    ]


QUESTION = "Who opened the observatory on Lake Vornhal, and when?"


def config_for(env, thread: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, n.TOOL_ENV_KEY: env}}


@pytest.mark.slow
async def test_search_visit_page_down_find_answer(tmp_path, settings, web):
    llm = scripted(*research_script(web))
    env = make_env(tmp_path, settings, llm=llm)
    graph = surfer.compile_graph(checkpointer=InMemorySaver())
    config = config_for(env)
    result = await graph.ainvoke({"question": QUESTION}, config=config, context=KGoTContext())
    article = web.url("/files/article.html")
    assert "Ilse Brandt opened it in 1923." in result["final_answer"] and result["exit_reason"] == "answered"
    assert result["evidence"] == {"sources": [article]}
    assert result["tokens"]["calls"] == 5 and llm.remaining() == []
    state = (await graph.aget_state(config)).values
    outputs = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [m.name for m in outputs] == ["web_search", "visit_page", "page_down", "find_on_page"]
    assert "1. [Lake Vornhal - fixture article]" in outputs[0].content
    assert outputs[1].content.startswith(f"Address: {article}\nTitle: Lake Vornhal")
    assert "showing page 2 of" in outputs[2].content
    assert "opened in 1923 by the astronomer Ilse Brandt" in outputs[3].content
    assert state["steps"] == 5 and state["browser"]["find_query"] == "Ilse Brandt"
    # the system prompt and tools the model saw
    assert "You have at most 12 steps" in llm.calls[0]


@pytest.mark.slow
async def test_ask_search_agent_tool_reports_answer_and_sources(tmp_path, settings, web):
    llm = scripted(*research_script(web))
    env = make_env(tmp_path, settings, llm=llm)
    manager = ToolManager(env, ["ask_search_agent"])
    tool = manager.get("ask_search_agent")
    assert tool is not None and len(tool.description) <= 1024
    run = await run_tool_with_retry(tool, {"query": QUESTION}, max_retries=2, backoff_base_s=0.01)
    assert run.ok, run.output
    assert "Ilse Brandt opened it in 1923." in run.output
    assert f"### Sources\n- {web.url('/files/article.html')}" in run.output
    assert env.usage["scripted"]["calls"] == 5


def test_status_needs_a_key_or_an_endpoint(tmp_path, monkeypatch):
    assert surfer.check_surfer(Settings()).reason == "missing key SERPAPI_API_KEY"
    assert not surfer.check_surfer(Settings()).available
    assert surfer.check_surfer(Settings(serpapi_api_key="k")).available
    assert surfer.check_surfer(Settings(search_api_base="http://127.0.0.1:1/search")).available
    statuses = {s.name: s for s in tool_statuses(Settings())}
    assert statuses["ask_search_agent"].reason == "missing key SERPAPI_API_KEY"
    for name in ["inspect_file_as_text", "image_inspector", "extract_zip"]:
        assert statuses[name].available
    manager = ToolManager(make_env(tmp_path, Settings()), ["ask_search_agent", "extract_zip"])
    assert [t.name for t in manager.get_tools()] == ["extract_zip"]
    assert [s.name for s in manager.unavailable()] == ["ask_search_agent"]


@pytest.mark.slow
async def test_runs_nested_in_a_checkpointed_parent(tmp_path, settings, web):
    llm = scripted(*research_script(web))
    env = make_env(tmp_path, settings, llm=llm)
    tool = surfer.make_surfer_tool(env)

    class Parent(TypedDict, total=False):
        question: str
        output: str

    async def call_tool(state: Parent) -> dict[str, Any]:
        run = await run_tool_with_retry(tool, {"query": state["question"]}, max_retries=1)
        return {"output": run.output}

    g = StateGraph(Parent)
    g.add_node("call_tool", call_tool)
    g.add_edge(START, "call_tool")
    g.add_edge("call_tool", END)
    saver = InMemorySaver()
    parent = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "parent-thread"}}
    result = await parent.ainvoke({"question": QUESTION}, config)
    assert "Ilse Brandt opened it in 1923." in result["output"]
    namespaces = {c.config["configurable"]["checkpoint_ns"] for c in saver.list(config)}
    nested = [ns for ns in namespaces if ns.startswith("call_tool:")]
    assert nested, namespaces  # the surfer's steps were checkpointed under the parent's node
    inner = list(saver.list({"configurable": {"thread_id": "parent-thread", "checkpoint_ns": nested[0]}}))
    assert any((c.checkpoint["channel_values"].get("browser") or {}).get("find_query") == "Ilse Brandt"
               for c in inner)


async def test_runs_out_of_steps_then_wraps_up(tmp_path, settings, web):
    llm = scripted({"unless": "You have used all", "times": 0,
                    "tool_calls": [{"name": "web_search", "args": {"query": "lake vornhal"}}]},
                   {"when": "You have used all 2 steps", "content": "### 1. Search outcome (short version)\n"
                                                               "Not found yet."})
    env = make_env(tmp_path, settings, llm=llm)
    result = await surfer.graph.ainvoke({"question": "q", "max_steps": 2}, config=config_for(env),
                                        context=KGoTContext())
    assert "Not found yet." in result["final_answer"] and result["tokens"]["calls"] == 3
    assert result["exit_reason"].startswith("its step limit (2 steps)")


async def test_model_failure_ends_with_a_clear_answer(tmp_path, settings):
    llm = scripted({"raise": "bad request", "status": 400})
    env = make_env(tmp_path, settings, llm=llm)
    tool = surfer.make_surfer_tool(env)
    out = await tool.ainvoke({"query": "anything"})
    assert "The search could not be completed: the search agent's model failed" in out
    assert "bad request" in out and "(no web pages were read)" in out


async def test_plain_reply_unknown_tool_and_tool_errors(tmp_path, settings, web):
    llm = scripted({"tool_calls": [{"name": "teleport", "args": {}},
                                   {"name": "visit_page", "args": {"url": web.url("/status/404")}}]},
                   {"when": r"there is no tool 'teleport'.*Error: visit_page failed: HTTP 404",
                    "content": "I could not find it."})
    env = make_env(tmp_path, settings, llm=llm)
    result = await surfer.graph.ainvoke({"question": "q"}, config=config_for(env), context=KGoTContext())
    assert result["final_answer"] == "I could not find it." and result["evidence"] == {"sources": []}


async def test_standalone_run_builds_its_environment_from_the_context(tmp_path, monkeypatch, web):
    monkeypatch.setenv("KGAGENTS_SEARCH_API_BASE", web.url("/search"))
    llm = scripted(*research_script(web))
    ctx = KGoTContext(tools_model=llm, work_dir=str(tmp_path / "work"))
    result = await surfer.graph.ainvoke({"question": QUESTION}, context=ctx)
    assert "Ilse Brandt" in result["final_answer"]
    assert result["evidence"]["sources"] == [web.url("/files/article.html")]


@pytest.mark.slow
async def test_a_second_run_in_the_same_thread_starts_fresh(tmp_path, settings, web):
    llm = scripted(*research_script(web), *research_script(web))
    env = make_env(tmp_path, settings, llm=llm)
    graph = surfer.compile_graph(checkpointer=InMemorySaver())
    config = config_for(env, "same")
    await graph.ainvoke({"question": QUESTION}, config=config, context=KGoTContext())
    second = await graph.ainvoke({"question": QUESTION}, config=config, context=KGoTContext(),
                                 output_keys=list(n.RESULT_KEYS))
    assert second["usage"]["scripted"]["calls"] == 10
    assert n.usage_of_run(second)["scripted"]["calls"] == 5
    state = (await graph.aget_state(config)).values
    assert sum(isinstance(m, ToolMessage) for m in state["messages"]) == 4  # only the second run's


def test_templates_match_what_the_nodes_supply():
    assert placeholders(P.SYSTEM) == {"max_steps"}
    assert placeholders(P.TASK) == {"question"}
    assert placeholders(P.WRAP_UP) == {"max_steps"}
    assert placeholders(P.REPORT) == {"answer", "sources"}


def test_graph_shape():
    nodes = set(surfer.graph.get_graph().nodes)
    assert {"start", "think", "browse", "wrap_up", "finish"} <= nodes
    assert surfer.graph.name == "surfer"
