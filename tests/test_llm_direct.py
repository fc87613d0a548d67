"""Structured output without LangChain's include_raw chain (kgagents.nodes.llm.DirectStructured), and the chat models'
HTTP client (kgagents.nodes.http_client): the same requests, replies, parse errors and API errors as before, less
CPU."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from kgagents.core.retry import is_transient
from kgagents.core.scripted import ScriptedChatModel
from kgagents.nodes.http_client import LoopLocalAioHttpClient, LoopLocalTransport
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.llm import DirectStructured, LLMCaller, StructuredOutputError, structured_runnable
from kgagents.nodes.models import build_chat_model
from tests.fakes import isolate_model_env
from tests.fakes.openai_server import FakeOpenAIServer, Step


class Verdict(BaseModel):
    """A verdict on the claim."""

    verdict: str = Field(description="true or false")
    confidence: float


#: The options the LLM layer passes for OpenAI models (KGoTContext.structured_output_method's default).
FC = {"include_raw": True, "method": "function_calling"}


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_model_env(monkeypatch, tmp_path)


def built(server: FakeOpenAIServer) -> Any:
    """The chat model a run gets for a model string on an OpenAI-compatible server."""
    return build_chat_model("gpt-4o-mini", base_url=server.base_url, timeout_s=5.0)


class Runs(AsyncCallbackHandler):
    """Counts the traced runs of a call: chains (runnables around the model) and chat models."""

    def __init__(self) -> None:
        self.chains = 0
        self.models = 0
        self.metadata: list[dict[str, Any]] = []

    async def on_chain_start(self, *args: Any, **kwargs: Any) -> None:
        self.chains += 1

    async def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.models += 1
        self.metadata.append(kwargs.get("metadata") or {})


# -- DirectStructured -------------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_an_openai_structured_call_is_one_model_run_with_the_same_request(
        openai_server: FakeOpenAIServer) -> None:
    model = built(openai_server)
    runnable = structured_runnable(model, Verdict, FC)
    assert isinstance(runnable, DirectStructured)
    openai_server.tool_call({"verdict": "true", "confidence": 0.8})
    runs = Runs()
    result = await runnable.ainvoke([("user", "Is water wet?")], {"callbacks": [runs]})
    assert result["parsed"] == Verdict(verdict="true", confidence=0.8) and result["parsing_error"] is None
    assert result["raw"].tool_calls[0]["name"] == "Verdict"
    assert (runs.chains, runs.models) == (0, 1)  # LangChain's chain: 6 chain runs around the model run
    # the request LangChain's own chain sends: the schema as the one tool, forced, no parallel calls
    openai_server.tool_call({"verdict": "false", "confidence": 0.1})
    await model.with_structured_output(Verdict, include_raw=True, method="function_calling").ainvoke("Is water wet?")
    direct, chain = openai_server.chat_requests
    for key in ("tools", "tool_choice", "parallel_tool_calls", "model"):
        assert direct.body.get(key) == chain.body.get(key), key
    assert direct.body["tool_choice"] == {"type": "function", "function": {"name": "Verdict"}}


@pytest.mark.slow
async def test_the_traced_schema_is_the_json_schema_of_langchains_chain(openai_server: FakeOpenAIServer) -> None:
    model = built(openai_server)
    runnable = structured_runnable(model, Verdict, FC)
    meta = runnable.bound.kwargs["ls_structured_output_format"]
    assert isinstance(meta["schema"], dict) and meta["schema"]["title"] == "Verdict"
    openai_server.tool_call({"verdict": "true", "confidence": 0.8})
    openai_server.tool_call({"verdict": "true", "confidence": 0.8})
    direct, chain = Runs(), Runs()
    await runnable.ainvoke("q", {"callbacks": [direct]})
    await model.with_structured_output(Verdict, include_raw=True, method="function_calling").ainvoke(
        "q", {"callbacks": [chain]})
    assert direct.models == chain.models == 1


@pytest.mark.slow
@pytest.mark.parametrize("arguments", ['{"verdict": "tr', {"verdict": "true"}, {"confidence": "high"}])
async def test_a_reply_that_does_not_parse_is_a_parsing_error_as_in_langchains_chain(
        openai_server: FakeOpenAIServer, arguments: Any) -> None:
    model = built(openai_server)
    openai_server.tool_call(arguments)
    openai_server.tool_call(arguments)
    direct = await structured_runnable(model, Verdict, FC).ainvoke("q")
    chain = await model.with_structured_output(Verdict, include_raw=True, method="function_calling").ainvoke("q")
    assert direct["parsed"] is None and chain["parsed"] is None
    assert type(direct["parsing_error"]) is type(chain["parsing_error"])
    assert str(direct["parsing_error"]) == str(chain["parsing_error"])


def refusing(server: FakeOpenAIServer) -> None:
    """Let the server send OpenAI's refusals: a step of kind ``refusal`` answers with a ``refusal`` message."""
    original = server.completion

    def completion(body: dict[str, Any], step: Step) -> dict[str, Any]:
        reply = original(body, step)
        if step.kind == "refusal":
            reply["choices"][0]["message"]["refusal"] = "I cannot help with that."
        return reply

    server.completion = completion  # type: ignore[method-assign]


async def test_a_refusal_is_a_parsing_error_and_is_asked_again(openai_server: FakeOpenAIServer) -> None:
    model = built(openai_server)
    refusing(openai_server)
    openai_server._push(Step("refusal"))
    result = await structured_runnable(model, Verdict, FC).ainvoke("q")
    assert result["parsed"] is None and "cannot help" in str(result["parsing_error"])
    # through the LLM layer: re-asked with the error, then answered
    openai_server._push(Step("refusal"))
    openai_server.tool_call({"verdict": "false", "confidence": 0.5})
    llm = LLMCaller(KGoTContext(model=model, max_api_retries=0), "graph_executor")
    assert await llm.structured("q", Verdict) == Verdict(verdict="false", confidence=0.5)
    assert "cannot help" in openai_server.chat_requests[-1].last_user_text


async def test_the_scripted_model_and_the_layers_retries_take_the_direct_path() -> None:
    model = ScriptedChatModel(steps=[{"structured": {"verdict": "maybe"}},
                                     {"structured": {"verdict": "true", "confidence": 1.0}}])
    assert isinstance(structured_runnable(model, Verdict, {"include_raw": True}), DirectStructured)
    llm = LLMCaller(KGoTContext(model=model, max_parse_retries=1), "graph_executor")
    assert await llm.structured("q", Verdict) == Verdict(verdict="true", confidence=1.0)
    assert "confidence" in model.calls[1] and "Field required" in model.calls[1]
    model = ScriptedChatModel(steps=[{"structured": {"verdict": "maybe"}, "times": 0}])
    with pytest.raises(StructuredOutputError, match="no valid Verdict after 2 attempt"):
        await LLMCaller(KGoTContext(model=model, max_parse_retries=1), "graph_executor").structured("q", Verdict)


@pytest.mark.slow
async def test_a_chain_it_does_not_know_keeps_langchains_runnable(openai_server: FakeOpenAIServer) -> None:
    model = built(openai_server)  # OpenAI's json_schema parser is a lambda: not taken apart
    runnable = structured_runnable(model, Verdict, {"include_raw": True, "method": "json_schema"})
    assert not isinstance(runnable, DirectStructured)
    openai_server.reply('{"verdict": "true", "confidence": 0.3}')
    assert (await runnable.ainvoke("q"))["parsed"] == Verdict(verdict="true", confidence=0.3)


# -- the HTTP client --------------------------------------------------------------------------------------------
def test_models_on_an_openai_compatible_server_use_the_aiohttp_client(openai_server: FakeOpenAIServer) -> None:
    model = built(openai_server)
    assert isinstance(model.http_async_client, LoopLocalAioHttpClient)
    assert isinstance(model.root_async_client._client._transport, LoopLocalTransport)


@pytest.mark.slow
def test_an_httpx_that_makes_its_transports_otherwise_gets_the_sdks_default_client(
        openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-loop pools rest on httpx's private ``_init_transport``: where the client's transport is not
    ours (a later httpx that no longer calls it), the model gets the SDK's default client (over httpx's own
    transport, one pool per loop) and still answers."""
    from openai import DefaultAioHttpClient

    monkeypatch.setattr(LoopLocalAioHttpClient, "_init_transport", DefaultAioHttpClient._init_transport)
    model = build_chat_model("gpt-4o-mini", base_url=openai_server.base_url, timeout_s=2.0, temperature=0.3)
    assert not isinstance(model.http_async_client, LoopLocalAioHttpClient)
    for i in range(2):  # on one event loop after another, as the SDK's default client allows
        openai_server.reply(f"answer {i}")
        assert asyncio.run(model.ainvoke("q")).content == f"answer {i}"


@pytest.mark.slow
def test_one_cached_model_serves_one_event_loop_after_another(openai_server: FakeOpenAIServer) -> None:
    model = built(openai_server)
    transport = model.root_async_client._client._transport
    for i in range(3):
        openai_server.reply(f"answer {i}")
        assert asyncio.run(model.ainvoke("q")).content == f"answer {i}"
        assert transport.loops == 1  # the ended loops' pools were closed and let go


@pytest.mark.slow
async def test_concurrent_calls_share_the_loops_pool(openai_server: FakeOpenAIServer) -> None:
    model = built(openai_server)
    for _ in range(20):
        openai_server.reply("ok")
    replies = await asyncio.gather(*(model.ainvoke(f"q{i}") for i in range(20)))
    assert [r.content for r in replies] == ["ok"] * 20


FAULTS = {
    "500": lambda s: s.server_error(),
    "429": lambda s: s.rate_limit(0),
    "401": lambda s: s.error(401, "Incorrect API key provided."),
    "truncated": lambda s: s.truncated(),
    "not_json": lambda s: s.not_json(),
    "html": lambda s: s.html_page(),
    "hang": lambda s: s.hang(5),
}


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_faults_raise_what_the_default_client_raises(openai_server: FakeOpenAIServer, fault: str) -> None:
    """Each fault reaches the LLM layer as the same SDK error, with the same transient/fatal verdict."""
    default = ChatOpenAI(model="gpt-4o-mini", base_url=openai_server.base_url, api_key="not-needed",
                         max_retries=0, timeout=1.0)
    aio = build_chat_model("gpt-4o-mini", base_url=openai_server.base_url, timeout_s=1.0)
    errors = []
    for model in (default, aio):
        FAULTS[fault](openai_server)
        with pytest.raises(Exception) as info:
            await model.ainvoke("q")
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1])
    assert is_transient(errors[0]) == is_transient(errors[1])
    assert getattr(errors[0], "status_code", None) == getattr(errors[1], "status_code", None)
