"""Budgets checked before every model call (``kgagents.nodes.budget.admit``): each workflow stops within one call
(or one round of concurrent calls) of its cap, not at its next router; servers that report no usage have their
tokens counted locally; a cost budget that cannot be checked says why."""

from __future__ import annotations

import asyncio
import json
import math
from importlib import resources
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.scripted import ScriptedChatModel
from kgagents.core.usage import CHARS_PER_TOKEN, reply_usage, usage_entry
from kgagents.graphs import agent_g, ark, grounded, kgot
from kgagents.nodes.agent_g import AgentGContext
from kgagents.nodes.ark import ArkContext
from kgagents.nodes.budget import BudgetError, budget_reached, tokens_spent
from kgagents.nodes.grounded import GroundedContext
from kgagents.nodes.kgot import KGoTContext
from tests import kgot_script as KS
from tests.agent_g.conftest import QUESTION as AGENT_G_QUESTION
from tests.agent_g.conftest import comment, decide, prime, validate  # noqa: F401  (prime: a fixture)
from tests.ark import script as AS
from tests.grounded.conftest import academic, step  # noqa: F401  (academic: a fixture)
from tests.grounded.test_graph import tot_agent_steps
from tests.test_budget import kgot_steps
from tests.test_kgot_graph import QUESTION

TOKEN_BUDGET = "token budget reached"


class Unmetered(ScriptedChatModel):
    """A scripted model whose replies report no token usage (as some OpenAI-compatible servers do)."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        result = super()._generate(*args, **kwargs)
        result.generations[0].message.usage_metadata = None
        return result


async def run(module, task: dict, context, thread: str = "t") -> tuple[dict, dict]:
    graph = module.compile_graph(InMemorySaver())
    config = {"configurable": {"thread_id": thread}, "recursion_limit": context.recursion_limit}
    output = await graph.ainvoke(task, config, context=context)
    return output, dict((await graph.aget_state(config)).values)


# -- KGoT: inside an iteration -------------------------------------------------------------------------------
async def test_kgot_stops_inside_its_iteration_not_at_the_next_iteration_check(tmp_path):
    model = ScriptedChatModel(steps=kgot_steps())
    ctx = KGoTContext(model=model, work_dir=str(tmp_path), solve_mode="direct", budget_tokens=1,
                      api_backoff_base_s=0.001, tool_backoff_base_s=0.001)
    output, state = await run(kgot, {"question": QUESTION}, ctx)
    forced = next(i for i, call in enumerate(model.calls) if KS.FORCED in call)
    # the votes (one concurrent round, the first calls of the run) and then nothing of the search: no merge of
    # the reasons, no tool calls, no KG write; the closing step (the forced solution) answers
    assert forced >= 1 and all(KS.VOTE in call for call in model.calls[:forced])
    assert output["budget_stop"].startswith(TOKEN_BUDGET) and output["final_answer"] == "65"
    assert not state.get("failures")  # a call the budget refused is no failed call


# -- grounded: ToT / GoT candidates run concurrently -------------------------------------------------------
@pytest.mark.parametrize("strategy", ["tot", "got"])
async def test_grounded_candidates_stop_after_one_round(academic, strategy):  # noqa: F811
    steps = [*tot_agent_steps(), step(r"\[stage: final answer\]", structured={"answer": "Ann Lee"})]
    model = ScriptedChatModel(steps=steps)
    ctx = GroundedContext(model=model, strategy=strategy, branching=3, keep=2, budget_tokens=1,
                          api_backoff_base_s=0.001)
    output, _ = await run(grounded, {"question": "Who wrote Deep Graphs?", "graph": academic}, ctx)
    stages = [call.split("]", 1)[0] for call in model.calls]
    thoughts = [s for s in stages if "agent thought" in s]
    # the k candidates' thoughts started together (one round); no action, vote or second step started after
    assert 1 <= len(thoughts) <= 3 and len(stages) == len(thoughts) + 1
    assert stages[-1] == "[stage: final answer"
    assert output["final_answer"] == "Ann Lee" and output["exit_reason"].startswith(TOKEN_BUDGET)


# -- servers without usage: counted locally ----------------------------------------------------------------
async def test_ark_on_a_server_without_usage_stops_at_its_token_budget():
    data = resources.files("kgagents") / "data" / "ark" / "example_data.json"
    example = json.loads(data.read_text("utf-8"))
    model = Unmetered(steps=[*AS.anchor("Yui Yuigahama"), *AS.final(None)])
    output, state = await run(ark, {"question": example["question"], "kg": example["graph"]},
                              ArkContext(model=model, budget_tokens=1, api_backoff_base_s=0.001))
    assert len(model.calls) == 2 and not state.get("steps")  # the anchor, then the final answer
    assert output["budget_stop"].startswith(TOKEN_BUDGET) and state["exit_reason"] == state["budget_stop"]
    [entry] = state["usage"].values()
    assert entry["unmeasured_calls"] == 2 and entry["estimated_tokens"] > 0 and entry["input_tokens"] == 0


async def test_agent_g_on_a_server_without_usage_stops_at_its_token_budget(prime):  # noqa: F811
    steps = [decide("\\d", entities=[("CYP3A4", "gene/protein")], relations=["enzyme"], times=0),
             validate("\\d", "No.", times=0), comment("\\d", "incorrect entity/relation", times=0)]
    model = Unmetered(steps=steps)
    ctx = AgentGContext(model=model, task="retrieval", max_iterations=3, budget_tokens=1, api_backoff_base_s=0.001)
    output, state = await run(agent_g, {"question": AGENT_G_QUESTION, "graph": prime}, ctx)
    assert len(state["iterations"]) == 1 and output["budget_stop"].startswith(TOKEN_BUDGET)


def test_a_reply_without_usage_is_counted_locally():
    sent = [HumanMessage("x" * 400)]
    reply = AIMessage(content="y" * 41)
    usage = reply_usage(reply, "local-model", sent)["local-model"]
    assert usage["estimated_tokens"] == math.ceil(441 / CHARS_PER_TOKEN) == 111
    assert usage["input_tokens"] == usage["output_tokens"] == 0 and usage["unmeasured_calls"] == 1
    assert tokens_spent({"local-model": usage}) == 111
    reason = budget_reached({"local-model": usage}, KGoTContext(budget_tokens=100))
    assert reason is not None and reason.startswith(TOKEN_BUDGET)


# -- the cost budget's error names its cause ---------------------------------------------------------------
def test_a_cost_budget_over_calls_without_usage_blames_the_missing_usage_not_the_price():
    unreported = usage_entry("gpt-4o-mini", 0, 0, measured=False, estimated_tokens=50)  # a priced model
    with pytest.raises(BudgetError, match=r"reported none for 1 call of gpt-4o-mini") as caught:
        budget_reached(unreported, KGoTContext(budget_usd=1.0))
    assert "price" not in str(caught.value)
    unpriced = usage_entry("my-local-model", 10, 10)
    with pytest.raises(BudgetError, match="my-local-model has none"):
        budget_reached(unpriced, KGoTContext(budget_usd=1.0))


# -- through an OpenAI-compatible server, with and without usage -------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("usage", [(12, 5), None])
async def test_a_call_does_not_start_once_the_budget_is_reached(usage):
    from kgagents.nodes.llm import BudgetSpent, LLMCaller
    from kgagents.nodes.models import build_chat_model
    from tests.fakes.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(default_usage=usage) as server:
        server.reply("first").reply("second")
        model = build_chat_model("gpt-4o-mini", base_url=server.base_url, timeout_s=5.0)
        llm = LLMCaller(KGoTContext(model=model, budget_tokens=5), "graph_executor")
        assert await llm.text("a question of some length") == "first"
        with pytest.raises(BudgetSpent, match=TOKEN_BUDGET):
            await llm.text("another question")
        assert len(server.chat_requests) == 1  # the second request was never sent
        priced = LLMCaller(KGoTContext(model=model, budget_usd=1.0), "graph_executor")
        assert await priced.text("q") == "second"
        if usage is None:
            with pytest.raises(BudgetError, match="reported none"):
                await priced.text("q")


async def test_a_tools_model_call_does_not_start_once_the_budget_is_reached(tmp_path):
    from kgagents.nodes.budget import CallRefused
    from kgagents.nodes.kgot import tool_env
    from kgagents.tools.base import run_tool_with_retry
    from kgagents.tools.llm_tool import make_llm_tool

    model = ScriptedChatModel(steps=[{"content": "an answer", "times": 0}])
    env = tool_env(KGoTContext(model=model, budget_tokens=5, tools_model=model), None, work_dir=tmp_path)
    tool = make_llm_tool(env)
    first = await run_tool_with_retry(tool, {"query": "a question long enough to pass five tokens"})
    assert first.ok and len(model.calls) == 1
    refused = await run_tool_with_retry(tool, {"query": "again"}, max_retries=3)
    assert not refused.ok and refused.attempts == 1 and TOKEN_BUDGET in refused.output  # no retry, no call
    assert len(model.calls) == 1 and issubclass(CallRefused, Exception)


# -- a graph run inside a tool call (KGoT's search agent) --------------------------------------------------
async def test_the_search_agents_calls_count_for_the_other_calls_of_its_step(tmp_path):
    """The surfer runs nested in a KGoT tool call: its model calls are recorded under the calling step, so a call
    that follows in that step (another tool call's, the tools' model here) sees them and does not start."""
    from langgraph.graph import END, START, StateGraph

    from kgagents.graphs import surfer
    from kgagents.nodes.budget import CallRefused, ToolBudgetGuard
    from kgagents.nodes.state import UsageState
    from kgagents.tools.manager import ToolEnv

    llm = ScriptedChatModel(steps=[{"content": "I could not find it.", "times": 0}])
    ctx = KGoTContext(model=llm, tools_model=llm, budget_tokens=50, work_dir=str(tmp_path))
    env = ToolEnv(work_dir=tmp_path / "work", llm=llm, max_retries=1, extra={"context": ctx},
                  budget_guard=ToolBudgetGuard(ctx))
    tool = surfer.make_surfer_tool(env)
    seen: list[str] = []

    async def run_tool_calls(state: UsageState) -> dict[str, Any]:
        seen.append(await tool.ainvoke({"query": "Who opened the observatory on Lake Vornhal?"}))
        with pytest.raises(CallRefused, match=TOKEN_BUDGET):
            await env.ask_llm([HumanMessage("and then?")])
        return {"usage": env.usage}

    g = StateGraph(UsageState, context_schema=KGoTContext)
    g.add_node("run_tool_calls", run_tool_calls)
    g.add_edge(START, "run_tool_calls")
    g.add_edge("run_tool_calls", END)
    out = await g.compile(checkpointer=InMemorySaver()).ainvoke({}, {"configurable": {"thread_id": "t"}},
                                                                 context=ctx)
    assert "I could not find it." in seen[0] and len(llm.calls) == 1  # the search's one call, then none
    assert tokens_spent(out["usage"]) > 50


# -- the local count: what the request sends beside its messages, replies the client rejects ---------------
async def test_the_tools_models_local_count_includes_the_tool_definitions(tmp_path):
    from langchain_core.tools import StructuredTool

    from kgagents.tools.manager import ToolEnv

    def lookup(query: str) -> str:
        return query

    tool = StructuredTool.from_function(lookup, name="lookup", description="Look a thing up. " * 250)
    model = Unmetered(steps=[{"content": "done", "times": 0}])
    env = ToolEnv(work_dir=tmp_path, llm=model, max_retries=1)
    await env.ask_llm([HumanMessage("hi")], tools=[tool])
    [entry] = env.usage.values()
    assert entry["estimated_tokens"] >= 4250 // CHARS_PER_TOKEN, entry  # the description alone


async def test_a_reply_the_client_rejects_without_its_response_is_counted_locally():
    """A client that parses the reply itself and raises without handing on the HTTP response: the call was
    answered, so it counts, as a call whose usage is unknown, its tokens counted from what was sent (the
    schema included)."""
    from pydantic import BaseModel, Field

    from kgagents.nodes.llm import LLMCaller, StructuredOutputError

    class Answer(BaseModel):
        answer: str = Field(description="The answer, in full. " * 100)

    class Rejecting(Unmetered):
        async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
            self.next_step("")  # the call was made and answered
            json.loads("this is not json")

    model = Rejecting(steps=[{"content": "x", "times": 0}])
    llm = LLMCaller(KGoTContext(model=model, max_parse_retries=1, api_backoff_base_s=0.001), "graph_executor")
    with pytest.raises(StructuredOutputError):
        await llm.structured("q", Answer)
    [entry] = llm.usage.values()
    assert entry["calls"] == entry["unmeasured_calls"] == 2 and entry["cost_usd"] is None
    assert entry["estimated_tokens"] >= 2 * 2100 // CHARS_PER_TOKEN, entry  # each call sent the schema


def test_the_local_count_of_text_outside_ascii_is_by_its_bytes():
    from kgagents.core.usage import BYTES_PER_TOKEN, estimate_tokens

    assert estimate_tokens("a" * 400) == 400 // CHARS_PER_TOKEN
    assert estimate_tokens("Привет" * 100) == 1200 // BYTES_PER_TOKEN  # 2 bytes a character
    assert estimate_tokens("知识" * 150) == 900 // BYTES_PER_TOKEN  # 3 bytes a character
    assert estimate_tokens("ab" + "é") == 2  # 0.5 + 2/3, rounded up


# -- OpenAI embeddings inside a node (Agent-G's VSS, Text-RAG) ---------------------------------------------
async def test_openai_embeddings_are_priced_in_the_runs_usage_and_stop_at_its_budget():
    """Each embeddings request asks the run's budget first (once reached, the next batch is not sent) and its
    usage (the server's prompt_tokens) is in the node's state update, priced."""
    from langgraph.graph import END, START, StateGraph

    from kgagents.nodes.llm import BudgetSpent, metered
    from kgagents.nodes.state import UsageState
    from kgagents.tools.pgraph.embeddings import OpenAIEmbedder
    from tests.fakes.openai_server import FakeOpenAIServer

    outcome: list[str] = []

    with FakeOpenAIServer() as server:
        embedder = OpenAIEmbedder("openai:text-embedding-ada-002", base_url=server.base_url, batch_size=1)

        @metered
        async def embed(state: UsageState) -> dict[str, Any]:
            try:
                await asyncio.to_thread(embedder.encode, ["five words in this text"] * 3)
            except BudgetSpent as exc:
                outcome.append(str(exc))
            return {}

        g = StateGraph(UsageState, context_schema=KGoTContext)
        g.add_node("embed", embed)
        g.add_edge(START, "embed")
        g.add_edge("embed", END)
        out = await g.compile(checkpointer=InMemorySaver()).ainvoke(
            {}, {"configurable": {"thread_id": "t"}}, context=KGoTContext(budget_tokens=8))
        requests = len(server.embedding_requests)
    assert requests == 2 and outcome and TOKEN_BUDGET in outcome[0]  # 5 + 5 tokens: the third not sent
    entry = out["usage"]["text-embedding-ada-002"]
    assert entry["calls"] == 2 and entry["input_tokens"] == 10
    assert entry["cost_usd"] == pytest.approx(10 * 0.10 / 1_000_000)


# -- LangGraph's private keys taken away: the public fallback (docs/dependencies.md) ------------------------
@pytest.mark.parametrize("hidden", [("_RUNTIME_KEY",), ("_RUNTIME_KEY", "_READ_KEY")])
async def test_without_langgraphs_task_keys_a_run_still_stops_at_its_budget(tmp_path, monkeypatch, caplog, hidden):
    """Without the running step's id (and the task's channel read) the check before each call counts less (the
    state's usage and the caller's own calls; then the caller's own only), says so once, and the routers' checks
    between steps still end the run at its budget, with its answer."""
    import threading

    from kgagents.nodes import budget

    for name in hidden:
        monkeypatch.setattr(budget, name, "__absent__")
    monkeypatch.setattr(budget, "_warned", threading.Event())
    model = ScriptedChatModel(steps=kgot_steps())
    ctx = KGoTContext(model=model, work_dir=str(tmp_path), solve_mode="direct", budget_tokens=1,
                      api_backoff_base_s=0.001, tool_backoff_base_s=0.001)
    with caplog.at_level("WARNING", logger="kgagents.nodes.budget"):
        output, state = await run(kgot, {"question": QUESTION}, ctx)
    assert state["budget_stop"].startswith(TOKEN_BUDGET) and output["final_answer"] == "65"
    assert state["decision"] == "FORCED_SOLVE" and state["iteration"] == 1
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "lacks the running step's id" in caplog.records[0].message
