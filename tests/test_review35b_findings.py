"""Review of issue 35 items 10 (budgets) and 12-14 (Agent-G at scale): each test reproduces one finding and fails
on the reviewed code (branch review35b at 4f253d0). Severity and the suggested fix are in each test's docstring."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel

from kgagents.core.config import Settings
from kgagents.core.scripted import ScriptedChatModel
from kgagents.core.usage import Usage, merge_usage, reply_usage, usage_entry
from kgagents.nodes.budget import ToolBudgetGuard
from kgagents.nodes.kgot import KGoTContext
from kgagents.tools.manager import ToolEnv

TOKEN_BUDGET = "token budget reached"


class Unmetered(ScriptedChatModel):
    """A scripted model whose replies report no token usage (as some OpenAI-compatible servers do)."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        result = super()._generate(*args, **kwargs)
        result.generations[0].message.usage_metadata = None
        return result


class Spent(TypedDict, total=False):
    """A run's state as every workflow has it: its usage (summed), and what a node returned."""

    usage: Annotated[Usage, merge_usage]
    output: Annotated[list[str], operator.add]


def one_node_graph(node: Any) -> Any:
    g = StateGraph(Spent, context_schema=KGoTContext)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    return g.compile(checkpointer=InMemorySaver())


#: A run that has spent 1,000 tokens of a 100-token budget before its next step.
OVER_BUDGET: Usage = usage_entry("scripted", 900, 100)


# -- 1. the search agent (a subgraph run by a KGoT tool) ---------------------------------------------------
async def test_search_agent_inside_a_run_over_its_budget_makes_no_model_call(tmp_path):
    """HIGH. ``ask_search_agent`` runs the surfer graph as a subgraph of KGoT's ``run_tool_call`` with the run's
    context (and budget). The surfer's ``LLMCaller`` asks :func:`kgagents.nodes.budget.admit`, which reads the
    *surfer's* ``usage`` channel and the in-flight calls of the *surfer's* step: what the KGoT run spent before
    (and what its concurrent tool calls spend meanwhile) is not seen. A KGoT run at 99% of its cap can thus spend
    up to one more whole cap inside the surfer (12 steps of the tools' model), and the surfer's calls are not seen
    by the sibling tool calls of the same step either.

    Fix: a nested graph's check must count its parent's spend: e.g. pass the parent's ``spent()`` (or a
    ToolBudgetGuard-like handle bound to the parent's step) into the surfer through its configurable/ToolEnv and
    let ``admit`` add it (and record the surfer's calls under the parent's step too), or give the surfer the run's
    remaining budget (cap minus the parent's spend) as its context's budget."""
    from kgagents.graphs import surfer

    llm = ScriptedChatModel(steps=[{"content": "I could not find it.", "times": 0}])
    ctx = KGoTContext(model=llm, tools_model=llm, budget_tokens=100, work_dir=str(tmp_path))
    env = ToolEnv(work_dir=tmp_path / "work", llm=llm, settings=Settings(), max_retries=1, backoff_base_s=0.001,
                  backoff_max_s=0.002, extra={"context": ctx}, budget_guard=ToolBudgetGuard(ctx))
    tool = surfer.make_surfer_tool(env)

    async def run_tool_call(state: Spent) -> dict[str, Any]:
        return {"output": [await tool.ainvoke({"query": "Who opened the observatory on Lake Vornhal?"})]}

    graph = one_node_graph(run_tool_call)
    await graph.ainvoke({"usage": OVER_BUDGET}, {"configurable": {"thread_id": "t"}}, context=ctx)
    assert llm.calls == []  # the run had spent 1,000 of its 100 tokens: no call of the search agent may start


# -- 2. transcriptions ------------------------------------------------------------------------------------
class _Transcriptions:
    def __init__(self) -> None:
        self.calls = 0

    async def create(self, **_: Any) -> Any:
        self.calls += 1

        class Usage:
            type = "tokens"
            input_tokens = 400
            output_tokens = 100

        class Result:
            text = "hello"
            usage = Usage()

        return Result()


class _Audio:
    def __init__(self) -> None:
        self.transcriptions = _Transcriptions()


class _Client:
    def __init__(self) -> None:
        self.audio = _Audio()


async def test_a_transcription_does_not_start_once_the_budget_is_reached(tmp_path):
    """MEDIUM. ``tools/files/media.transcribe`` calls the provider's transcription API without the run's
    budget guard (only ``ToolEnv.ask_llm`` asks ``budget_guard.admit()``): a KGoT run over its cap still sends
    audio to be transcribed (gpt-4o-transcribe bills tokens, whisper-1 seconds).

    Fix: ``if env.budget_guard is not None: env.budget_guard.admit()`` before ``transcriptions.create`` (a
    :class:`CallRefused`, not retried)."""
    from kgagents.tools.files.media import transcribe

    client = _Client()
    ctx = KGoTContext(budget_tokens=100)
    guard = ToolBudgetGuard(ctx)
    guard.record(OVER_BUDGET)  # the run's earlier calls
    env = ToolEnv(work_dir=tmp_path, llm=None, settings=Settings(), extra={"transcription_client": client},
                  budget_guard=guard)
    with pytest.raises(Exception, match=TOKEN_BUDGET):
        await transcribe(env, b"RIFF....WAVE", "a.wav")
    assert client.audio.transcriptions.calls == 0


async def test_a_transcriptions_tokens_count_for_the_next_tools_call(tmp_path):
    """MEDIUM. A transcription's usage goes to ``env.add_usage`` only, never to ``budget_guard.record``: the calls
    that follow in the same step (the tools' model, the other concurrent tool calls) do not see its tokens, so
    the step's check misses them. Here 500 transcription tokens of a 100-token budget, then a tools' model call
    that should be refused.

    Fix: record the transcription's delta with ``env.budget_guard.record(delta)`` (e.g. make ``ToolEnv.add_usage``
    do it for every delta, and ``record_usage`` call ``add_usage``)."""
    from kgagents.tools.files.media import transcribe

    llm = ScriptedChatModel(steps=[{"content": "an answer", "times": 0}])
    ctx = KGoTContext(budget_tokens=100)
    env = ToolEnv(work_dir=tmp_path, llm=llm, settings=Settings(), extra={"transcription_client": _Client()},
                  budget_guard=ToolBudgetGuard(ctx))
    assert await transcribe(env, b"RIFF....WAVE", "a.wav") == "hello"
    with pytest.raises(Exception, match=TOKEN_BUDGET):
        await env.ask_llm([HumanMessage("what was said?")])
    assert llm.calls == []


# -- 3. OpenAI embeddings (Agent-G's VSS, Text-RAG) ---------------------------------------------------------
async def test_agent_g_embedding_calls_are_in_the_runs_usage(tmp_path):
    """MEDIUM. ``OpenAIEmbedder`` (``embedding_model=openai:text-embedding-ada-002``, the paper's Agent-G and
    STaRK's VSS) sends paid requests whose usage (the server reports ``prompt_tokens``) is dropped: it is in
    neither the run's ``usage`` nor its ``cost_usd``, and no budget checks it. Indexing a STaRK KB's documents
    through it (what the README's one-liner did before item 14) is the largest cost of a run, unseen.

    Fix: the embedder returns/records its usage (``response.usage.prompt_tokens``) into the run (e.g. through
    ``budget.record`` plus the node's usage update) and asks ``budget.admit`` before each batch, with its own
    price entry (text-embedding-ada-002: $0.10 / 1M tokens)."""
    from tests.agent_g.conftest import build_prime, decide, validate
    from tests.agent_g.test_graph import run
    from tests.fakes.openai_server import FakeOpenAIServer

    graph = build_prime(tmp_path / "prime")
    steps = [decide(1, source="text documents", times=0), validate(1, "yes", times=0)]
    with FakeOpenAIServer() as server:
        state, _, _ = await run({"question": "drugs for roundworms", "graph": graph}, steps, task="retrieval",
                                embedding_model="openai:text-embedding-ada-002", embedding_base_url=server.base_url)
        requests = len(server.embedding_requests)
    assert requests >= 1 and state["ranked_ids"]
    embedding = {model: u for model, u in (state.get("usage") or {}).items() if "embedding" in model}
    assert embedding, f"{requests} embeddings requests, none in the run's usage: {sorted(state.get('usage') or {})}"


# -- 4. the local token count of servers without usage ------------------------------------------------------
def test_the_local_count_of_non_english_text_is_not_a_quarter_of_its_tokens():
    """MEDIUM (token budgets on servers without usage). ``estimate_tokens`` is characters / 4, OpenAI's rule for
    English. CJK text takes roughly 0.6-1.5 tokens per character depending on the tokenizer (not measured here:
    no tokenizer data offline), Cyrillic/Greek about 0.3-0.5: a Chinese run's token budget fires at 2.5-6x its
    cap, far from "within one call". The test asks only for half a token per CJK character.

    Fix: count by UTF-8 bytes for non-ASCII text (e.g. ``max(len(text)/4, len(text.encode())/3)``), or a real
    tokenizer (tiktoken's o200k_base, shipped with the OpenAI client) where one is available; say which in
    docs."""
    text = "知识图谱推理的工作流程" * 100  # 1,100 CJK characters
    usage = reply_usage(AIMessage(content=""), "local", [HumanMessage(text)])["local"]
    assert usage["estimated_tokens"] >= 0.5 * len(text), usage


async def test_the_local_count_includes_the_tool_definitions_sent():
    """LOW-MEDIUM. With tools bound (KGoT's tool calls, the surfer, ARK's/grounded's tool protocols), each request
    carries every tool's name, description and JSON schema; on a server without usage the local count leaves
    them out (``reply_usage`` sees only the messages). KGoT's tool definitions are thousands of characters per
    call, so its token budget undercounts each call by hundreds to thousands of tokens.

    Fix: pass what ``bind_tools`` sends (``convert_to_openai_tool`` of each tool, JSON) and the structured-output
    schema to ``reply_usage`` / ``estimate_tokens``."""
    from kgagents.nodes.llm import LLMCaller

    def lookup(query: str) -> str:
        return query

    tool = StructuredTool.from_function(lookup, name="lookup", description="Look a thing up. " * 250)  # 4,250 chars
    model = Unmetered(steps=[{"content": "done", "times": 0}])
    llm = LLMCaller(KGoTContext(model=model, budget_tokens=10_000), "graph_executor")
    await llm.message([HumanMessage("hi")], tools=[tool])
    [entry] = llm.usage.values()
    assert entry["estimated_tokens"] >= 1000, entry


# -- 5. replies the client itself fails to parse (json_schema): paid, re-asked, never counted --------------
class Answer(BaseModel):
    answer: str


@pytest.mark.slow
async def test_replies_that_fail_to_parse_in_the_client_are_counted():
    """MEDIUM. With ``structured_output_method="json_schema"`` the OpenAI client parses the reply itself and
    raises on a bad one; ``LLMCaller._parsed`` turns that into a re-ask with ``raw=None`` and records nothing. Each
    such reply was answered and billed (here 150 tokens each, 3 attempts), yet the run's usage stays empty: the
    budget never sees them, and ``cost_usd`` under-reports.

    Fix: recover the raw reply's usage when the client raises (the exception's ``__cause__``/the response, or a
    callback's ``on_llm_end``), or record such a call as unmeasured with its local count, so it counts."""
    from kgagents.nodes.llm import LLMCaller, StructuredOutputError
    from kgagents.nodes.models import build_chat_model
    from tests.fakes.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(default_usage=(100, 50)) as server:
        for _ in range(3):
            server.reply("this is not json at all")
        model = build_chat_model("gpt-4o-mini", base_url=server.base_url, timeout_s=5.0)
        ctx = KGoTContext(model=model, structured_output_method="json_schema", max_parse_retries=2,
                          api_backoff_base_s=0.001)
        llm = LLMCaller(ctx, "graph_executor")
        with pytest.raises(StructuredOutputError):
            await llm.structured("q", Answer)
        answered = len(server.chat_requests)
    assert answered == 3
    calls = sum(int(u.get("calls", 0)) for u in llm.usage.values())
    assert calls == answered, f"{answered} replies answered and paid, {calls} counted: {llm.usage}"


# -- 6. STaRK's pair merge --------------------------------------------------------------------------------
def _starks_skb_edges(heads: list[int], tails: list[int], types: list[int]) -> set[tuple[int, int, int]]:
    """What STaRK's ``SKB.__init__`` keeps, written here from its description: ``is_undirected(edge_index)``
    (torch_geometric: the edge list, sorted, equals its flip, sorted, as multisets: no attributes, no
    de-duplication); if not, ``to_undirected(edge_index, edge_types, reduce="mean")`` (every edge and its reverse,
    duplicates of an ordered pair merged with the mean) and ``.long()``."""
    pairs = sorted(zip(heads, tails, strict=True))
    if pairs == sorted(zip(tails, heads, strict=True)):
        return set(zip(heads, tails, types, strict=True))
    merged: dict[tuple[int, int], list[int]] = {}
    for h, t, r in zip(heads + tails, tails + heads, types + types, strict=True):
        merged.setdefault((h, t), []).append(r)
    return {(h, t, sum(rs) // len(rs)) for (h, t), rs in merged.items()}


def _as_undirected(edges: set[tuple[int, int, int]]) -> set[tuple[int, int, int]]:
    return {(min(h, t), max(h, t), r) for h, t, r in edges}


def test_a_pair_bought_and_viewed_one_way_and_viewed_the_other_merges_as_starks():
    """LOW. ``starks_relations`` decides "already undirected" on the *set* of pairs (``np.unique``), STaRK (via
    torch_geometric's ``is_undirected(edge_index)``) on the *multiset* of edges. Amazon's product 0 lists 1 as
    both also-bought and also-viewed, and 1 lists 0 as also-viewed: the pairs are symmetric as a set, not as a
    multiset. STaRK merges (mean of 0, 1, 1 → 0: also bought only); kgagents keeps the also-viewed edges, so the
    graph, its documents and Agent-G's relation-constrained ego-graphs differ from STaRK's on such a KB.

    Fix: compare sorted edge lists with duplicates (``np.sort(heads * count + tails)`` against
    ``np.sort(tails * count + heads)``), not ``np.unique``."""
    from kgagents.tools.pgraph.stark import starks_relations

    heads, tails, types = [0, 0, 1], [1, 1, 0], [0, 1, 1]  # 0→1 also_buy, 0→1 also_view, 1→0 also_view
    h, t, r = starks_relations(np.array(heads), np.array(tails), np.array(types), 2)
    ours = _as_undirected(set(zip(h.tolist(), t.tolist(), r.tolist(), strict=True)))
    assert ours == _as_undirected(_starks_skb_edges(heads, tails, types)) == {(0, 1, 0)}


# -- 7. LangGraph's private keys: a LangGraph without them --------------------------------------------------
async def test_without_the_running_steps_id_the_check_still_counts_the_runs_usage(monkeypatch):
    """LOW-MEDIUM. pyproject allows ``langgraph>=1.0,<2``, but ``Runtime.execution_info`` (the step's checkpoint
    id the in-flight table is keyed by) arrived in langgraph 1.1.3. Where it is absent (1.0.x-1.1.2, or a renamed
    key), ``budget.spent`` silently returns the caller's own usage: the run's committed usage, which
    ``__pregel_read`` could still give, is ignored too, and every call of a fresh node is admitted however far
    over its cap the run is (only the routers stop it). Simulated here by hiding the runtime key.

    Fix: raise the floor to ``langgraph>=1.1.3`` and, without a step id, still count the committed ``usage``
    read through ``__pregel_read`` (plus the caller's own); log once when the keys are missing."""
    from kgagents.nodes import budget
    from kgagents.nodes.llm import LLMCaller

    monkeypatch.setattr(budget, "_RUNTIME_KEY", "__absent__")
    model = ScriptedChatModel(steps=[{"content": "x", "times": 0}])
    ctx = KGoTContext(model=model, budget_tokens=100)

    async def node(state: Spent) -> dict[str, Any]:
        try:
            await LLMCaller(ctx, "graph_executor").text("hi")
        except Exception as exc:  # noqa: BLE001 - what the call met is the result
            return {"output": [type(exc).__name__]}
        return {"output": ["called"]}

    out = await one_node_graph(node).ainvoke({"usage": OVER_BUDGET}, {"configurable": {"thread_id": "t"}},
                                             context=ctx)
    assert out["output"] == ["BudgetSpent"] and model.calls == []
