"""The LLM layer (kgagents.nodes.llm.LLMCaller) with the real langchain-openai client against a scripted fake server.

Covers structured output with parse-retry, API retries with backoff (500, 429 + Retry-After, timeouts, bodies
cut short or not JSON), non-transient errors, faults that leave no way forward (a rejected key, an unknown
model), tool calls, usage and cost per model, usage surviving SQLite checkpoints, and the fake server's seeded
fault policy.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

import kgagents.core.usage as usage_mod
from kgagents.core.retry import is_transient, retry_after_s
from kgagents.core.usage import register_price
from kgagents.graphs.io import final_state
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.llm import LLMCaller, LLMError, ModelUnavailableError, StructuredOutputError
from kgagents.nodes.models import build_chat_model
from tests.fakes import isolate_model_env
from tests.fakes.openai_server import FAULT_KINDS, FakeOpenAIServer, FaultPolicy, RecordedRequest, Step

GPT4O_MINI = {"input": 0.15, "output": 0.60}


class Answer(BaseModel):
    """The answer to the question."""

    answer: str = Field(description="the answer itself")
    confidence: float


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_model_env(monkeypatch, tmp_path)


def chat_model(server: FakeOpenAIServer, *, timeout: float = 10.0, model: str = "gpt-4o-mini",
               api_key: str = "test") -> ChatOpenAI:
    return ChatOpenAI(model=model, base_url=server.base_url, api_key=api_key, max_retries=0, timeout=timeout)


def context(server: FakeOpenAIServer | None = None, **overrides: Any) -> KGoTContext:
    values: dict[str, Any] = {"api_backoff_base_s": 0.01, "api_backoff_max_s": 0.05, "max_api_retries": 3,
                              "max_parse_retries": 2, "llm_timeout_s": 5.0}
    if server is not None:
        values["model"] = chat_model(server)
    values.update(overrides)
    return KGoTContext(**values)


def caller(server: FakeOpenAIServer, **overrides: Any) -> LLMCaller:
    return LLMCaller(context(server, **overrides), "graph_executor")


# --------------------------------------------------------------------------------------------------
# success paths


async def test_structured_success_sends_the_schema_as_a_forced_tool(openai_server: FakeOpenAIServer) -> None:
    openai_server.tool_call({"answer": "Paris", "confidence": 0.9})
    llm = caller(openai_server)

    result = await llm.structured("What is the capital of France?", Answer, system="Be brief.")

    assert result == Answer(answer="Paris", confidence=0.9)
    [request] = openai_server.chat_requests
    body = request.body
    assert body["model"] == "gpt-4o-mini"
    assert not body.get("stream")
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == "What is the capital of France?"
    [schema_tool] = body["tools"]
    assert schema_tool["function"]["name"] == "Answer"
    params = schema_tool["function"]["parameters"]
    assert set(params["properties"]) == {"answer", "confidence"}
    assert sorted(params["required"]) == ["answer", "confidence"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "Answer"}}
    assert request.headers["authorization"] == "Bearer test"


@pytest.mark.slow
async def test_text_reply(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply("Hello there.")
    llm = caller(openai_server)

    assert await llm.text("Say hello") == "Hello there."
    assert "tools" not in openai_server.chat_requests[0].body
    assert llm.usage["gpt-4o-mini"]["calls"] == 1


@pytest.mark.slow
async def test_message_with_tools_returns_tool_calls(openai_server: FakeOpenAIServer) -> None:
    @tool
    def web_search(query: str, max_results: int = 3) -> str:
        """Search the web for a query."""
        return "unused"

    openai_server.tool_calls([("web_search", {"query": "KGoT paper"}),
                              ("web_search", {"query": "ARK-V1", "max_results": 1})])
    llm = caller(openai_server)

    reply = await llm.message("Find the papers", tools=[web_search])

    assert [c["name"] for c in reply.tool_calls] == ["web_search", "web_search"]
    assert reply.tool_calls[0]["args"] == {"query": "KGoT paper"}
    assert reply.tool_calls[1]["args"] == {"query": "ARK-V1", "max_results": 1}
    assert all(c["id"] for c in reply.tool_calls)
    [sent] = openai_server.chat_requests[0].tools
    assert sent["function"]["name"] == "web_search"
    assert sent["function"]["description"] == "Search the web for a query."
    assert set(sent["function"]["parameters"]["properties"]) == {"query", "max_results"}
    assert "tool_choice" not in openai_server.chat_requests[0].body


@pytest.mark.slow
async def test_message_tool_choice_is_sent(openai_server: FakeOpenAIServer) -> None:
    @tool
    def lookup(term: str) -> str:
        """Look a term up."""
        return term

    openai_server.tool_call({"term": "x"})
    reply = await caller(openai_server).message("q", tools=[lookup], tool_choice="lookup")

    assert reply.tool_calls[0]["name"] == "lookup"
    assert openai_server.chat_requests[0].body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}


async def test_message_with_text_where_a_tool_call_was_expected_is_returned_as_is(
        openai_server: FakeOpenAIServer) -> None:
    @tool
    def lookup(term: str) -> str:
        """Look a term up."""
        return term

    openai_server.reply("I do not need a tool.")
    reply = await caller(openai_server).message("q", tools=[lookup])

    assert reply.tool_calls == [] and reply.text == "I do not need a tool."
    assert len(openai_server.chat_requests) == 1


# --------------------------------------------------------------------------------------------------
# transient API errors: retried with backoff


@pytest.mark.slow
@pytest.mark.parametrize("failure", ["500", "502", "503", "429"])
async def test_transient_error_then_success_is_retried(openai_server: FakeOpenAIServer, failure: str) -> None:
    if failure == "429":
        openai_server.rate_limit(retry_after=0)
    else:
        openai_server.error(int(failure))
    openai_server.tool_call({"answer": "ok", "confidence": 1})
    llm = caller(openai_server)

    assert (await llm.structured("q", Answer)).answer == "ok"
    requests = openai_server.chat_requests
    assert len(requests) == 2
    assert requests[0].body == requests[1].body  # the very same request again
    assert llm.usage["gpt-4o-mini"]["calls"] == 1  # a failed request is not a billed call


async def test_text_and_message_are_retried_too(openai_server: FakeOpenAIServer) -> None:
    openai_server.server_error().reply("one").rate_limit().reply("two")
    llm = caller(openai_server)

    assert await llm.text("a") == "one"
    assert (await llm.message("b")).text == "two"
    assert len(openai_server.chat_requests) == 4
    assert llm.usage["gpt-4o-mini"]["calls"] == 2


@pytest.mark.slow
async def test_429_retry_after_header_is_honoured(openai_server: FakeOpenAIServer) -> None:
    openai_server.rate_limit(retry_after=1).reply("done")
    llm = caller(openai_server, api_backoff_base_s=0.001, api_backoff_max_s=5)

    start = time.monotonic()
    assert await llm.text("q") == "done"
    assert time.monotonic() - start >= 0.95
    assert len(openai_server.chat_requests) == 2


async def test_retry_after_is_capped_by_the_backoff_limit(openai_server: FakeOpenAIServer) -> None:
    openai_server.rate_limit(retry_after=120).reply("done")
    llm = caller(openai_server, api_backoff_max_s=0.05)

    start = time.monotonic()
    assert await llm.text("q") == "done"
    assert time.monotonic() - start < 5


@pytest.mark.slow
async def test_timeout_of_the_context_then_success(openai_server: FakeOpenAIServer) -> None:
    """The server hangs; KGoTContext.llm_timeout_s ends the call (the client's own timeout is longer)."""
    openai_server.hang(30).reply("after the hang")
    llm = LLMCaller(context(model=chat_model(openai_server, timeout=30), llm_timeout_s=0.5), "graph_executor")

    start = time.monotonic()
    assert await llm.text("q") == "after the hang"
    assert time.monotonic() - start < 10
    assert len(openai_server.chat_requests) == 2


@pytest.mark.slow
async def test_timeout_of_the_client_then_success(openai_server: FakeOpenAIServer) -> None:
    """The server hangs; the OpenAI client's own timeout fires (APITimeoutError), which is retried."""
    openai_server.hang(30).tool_call({"answer": "late", "confidence": 0.1})
    llm = LLMCaller(context(model=chat_model(openai_server, timeout=0.4), llm_timeout_s=30), "graph_executor")

    assert (await llm.structured("q", Answer)).answer == "late"
    assert len(openai_server.chat_requests) == 2


@pytest.mark.slow
async def test_persistent_500_fails_after_all_retries(openai_server: FakeOpenAIServer) -> None:
    """A model that answered before is retried in full (one that never answered: tests/test_misbehaving_server.py)."""
    openai_server.reply("warm")
    llm = caller(openai_server, max_api_retries=2)
    assert await llm.text("hello") == "warm"
    llm.usage = {}
    openai_server.server_error(times=10)

    with pytest.raises(LLMError) as info:
        await llm.structured("q", Answer)

    assert not isinstance(info.value, StructuredOutputError)
    assert len(openai_server.chat_requests) == 1 + 3  # the warm-up, then max_api_retries + 1
    assert "3 attempt(s)" in str(info.value)
    assert "500" in str(info.value)
    assert llm.usage == {}


@pytest.mark.slow
async def test_persistent_timeouts_fail_after_all_retries(openai_server: FakeOpenAIServer) -> None:
    for _ in range(3):
        openai_server.hang(30)
    llm = LLMCaller(context(model=chat_model(openai_server, timeout=30), llm_timeout_s=0.2, max_api_retries=1),
                    "graph_executor")

    with pytest.raises(LLMError, match="2 attempt"):
        await llm.text("q")
    assert len(openai_server.chat_requests) == 2


@pytest.mark.slow
@pytest.mark.parametrize("status", [400, 422])
async def test_non_transient_http_error_fails_at_once(openai_server: FakeOpenAIServer, status: int) -> None:
    openai_server.error(status, "bad request: something is wrong").reply("never sent")
    llm = caller(openai_server)

    with pytest.raises(LLMError, match="1 attempt") as info:
        await llm.text("q")
    assert "something is wrong" in str(info.value)
    assert len(openai_server.chat_requests) == 1


@pytest.mark.slow
async def test_wrong_api_key_fails_at_once(openai_server: FakeOpenAIServer) -> None:
    openai_server.api_key = "the-right-key"
    openai_server.reply("never sent")
    llm = LLMCaller(context(model=chat_model(openai_server, api_key="wrong")), "graph_executor")

    with pytest.raises(ModelUnavailableError, match="AuthenticationError") as info:
        await llm.structured("q", Answer)
    assert "cannot be used" in str(info.value) and "resume the run" in str(info.value)
    assert len(openai_server.chat_requests) == 1
    assert openai_server.pending == 1


@pytest.mark.slow
@pytest.mark.parametrize("status", [401, 403, 404])
async def test_a_fault_that_leaves_no_way_forward_is_no_llm_error(openai_server: FakeOpenAIServer,
                                                                  status: int) -> None:
    """A rejected key, no access or an unknown model: not retried, and not an LLMError (which nodes degrade
    around), so the run stops with a message that says what to check."""
    openai_server.error(status, "The model `gpt-5-nano-x` does not exist or you do not have access to it.")
    openai_server.reply("never sent")
    llm = caller(openai_server)

    with pytest.raises(ModelUnavailableError) as info:
        await llm.text("q")
    assert not isinstance(info.value, LLMError)
    message = str(info.value)
    expected = f"graph_executor model (gpt-4o-mini at {openai_server.base_url}) cannot be used"
    assert f"{expected}: the server answered {status}" in message and "does not exist" in message
    assert "API key" in message and "base URL" in message
    assert len(openai_server.chat_requests) == 1


# --------------------------------------------------------------------------------------------------
# broken bodies: transport faults, retried like a dropped connection


@pytest.mark.parametrize("fault", ["truncated", "not_json"])
async def test_a_broken_body_is_retried(openai_server: FakeOpenAIServer, fault: str) -> None:
    getattr(openai_server, fault)()
    openai_server.reply("whole").tool_call({"name": "x"})
    llm = caller(openai_server)

    assert await llm.text("q") == "whole"
    assert len(openai_server.chat_requests) == 2
    assert llm.usage["gpt-4o-mini"]["calls"] == 1


@pytest.mark.parametrize("fault", ["truncated", "not_json"])
async def test_a_broken_body_of_a_structured_call_is_sent_again_unchanged(openai_server: FakeOpenAIServer,
                                                                          fault: str) -> None:
    """A retry of the same request, not a re-ask: the model never saw the body that broke."""
    getattr(openai_server, fault)()
    openai_server.tool_call({"answer": "ok", "confidence": 1})
    llm = caller(openai_server)

    assert (await llm.structured("q", Answer)).answer == "ok"
    first, second = openai_server.chat_requests
    assert first.body == second.body


async def test_an_html_page_instead_of_an_answer_is_retried(openai_server: FakeOpenAIServer) -> None:
    openai_server.html_page().reply("fine")
    llm = caller(openai_server, max_api_retries=2)

    assert await llm.text("q") == "fine"
    assert len(openai_server.chat_requests) == 2


async def test_bodies_that_keep_breaking_fail_after_the_api_retries(openai_server: FakeOpenAIServer) -> None:
    """For a model that answered before (one that never answered stops the run: test_misbehaving_server.py)."""
    openai_server.reply("warm")
    llm = caller(openai_server, max_api_retries=2)
    assert await llm.text("hello") == "warm"
    openai_server.truncated().not_json().truncated().tool_call({"answer": "late", "confidence": 1})

    with pytest.raises(LLMError) as info:
        await llm.structured("q", Answer)
    assert not isinstance(info.value, StructuredOutputError)
    assert "3 attempt(s)" in str(info.value) and "JSONDecodeError" in str(info.value)
    assert len(openai_server.chat_requests) == 1 + 3 and openai_server.pending == 1


def test_json_errors_of_http_bodies_are_transient_and_other_json_errors_are_not() -> None:
    def error_of(decode: Any) -> json.JSONDecodeError:
        with pytest.raises(json.JSONDecodeError) as info:
            decode()
        return info.value

    assert is_transient(error_of(lambda: httpx.Response(200, content=b'{"choices": [').json()))
    assert not is_transient(error_of(lambda: json.loads('{"answer": ')))


# --------------------------------------------------------------------------------------------------
# parse failures: re-asked with the error


@pytest.mark.slow
async def test_malformed_json_arguments_then_valid(openai_server: FakeOpenAIServer) -> None:
    openai_server.tool_call('{"answer": "Par', name="Answer").tool_call({"answer": "Paris", "confidence": 0.8})
    llm = caller(openai_server)

    assert await llm.structured("Capital of France?", Answer) == Answer(answer="Paris", confidence=0.8)

    first, second = openai_server.chat_requests
    assert first.messages == [{"role": "user", "content": "Capital of France?"}]
    assert second.messages[0] == first.messages[0]  # the question is asked again, with a correction after it
    correction = second.last_user_text
    assert len(second.messages) == 2
    assert "could not be used" in correction
    assert "not valid JSON" in correction
    assert '{"answer": "Par' in correction  # the model sees what it sent
    assert "Answer" in correction
    assert second.body["tool_choice"] == first.body["tool_choice"]
    assert llm.usage["gpt-4o-mini"]["calls"] == 2  # both replies were billed


async def test_plain_text_instead_of_a_tool_call_is_re_asked(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply("The answer is Paris.").tool_call({"answer": "Paris", "confidence": 1.0})
    llm = caller(openai_server)

    assert (await llm.structured("q", Answer)).answer == "Paris"
    correction = openai_server.chat_requests[1].last_user_text
    assert "no structured answer" in correction
    assert "The answer is Paris." in correction


async def test_arguments_that_miss_a_field_are_re_asked(openai_server: FakeOpenAIServer) -> None:
    openai_server.tool_call({"answer": "Paris"}).tool_call({"answer": "Paris", "confidence": "0.5"})
    llm = caller(openai_server)

    assert await llm.structured("q", Answer) == Answer(answer="Paris", confidence=0.5)
    correction = openai_server.chat_requests[1].last_user_text
    assert "confidence" in correction and "Field required" in correction


@pytest.mark.slow
async def test_parse_retries_exhausted_raise_structured_output_error(openai_server: FakeOpenAIServer) -> None:
    for _ in range(5):
        openai_server.tool_call("not json at all", name="Answer")
    llm = caller(openai_server, max_parse_retries=2)

    with pytest.raises(StructuredOutputError) as info:
        await llm.structured("q", Answer)

    err = info.value
    assert err.schema is Answer and err.attempts == 3
    assert "not valid JSON" in err.last_error
    assert "no valid Answer after 3 attempt(s)" in str(err)
    assert len(openai_server.chat_requests) == 3
    assert openai_server.pending == 2
    assert llm.usage["gpt-4o-mini"]["calls"] == 3
    # each re-ask carries the conversation so far: the question and one correction per failure
    assert [len(r.messages) for r in openai_server.chat_requests] == [1, 2, 3]


@pytest.mark.slow
async def test_zero_parse_retries_means_one_attempt(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply("no tool call").tool_call({"answer": "x", "confidence": 0})
    with pytest.raises(StructuredOutputError):
        await caller(openai_server, max_parse_retries=0).structured("q", Answer)
    assert len(openai_server.chat_requests) == 1


@pytest.mark.slow
async def test_api_retries_and_parse_retries_combine(openai_server: FakeOpenAIServer) -> None:
    (openai_server.server_error().tool_call("{oops", name="Answer").rate_limit()
     .tool_call({"answer": "fine", "confidence": 0.3}))
    llm = caller(openai_server)

    assert (await llm.structured("q", Answer)).answer == "fine"
    requests = openai_server.chat_requests
    assert [len(r.messages) for r in requests] == [1, 1, 2, 2]
    assert llm.usage["gpt-4o-mini"]["calls"] == 2


@pytest.mark.slow
async def test_json_schema_method(openai_server: FakeOpenAIServer) -> None:
    """Structured output through response_format=json_schema; a bad JSON reply is re-asked like the others."""
    openai_server.reply('{"answer": "Par').reply(json.dumps({"answer": "Paris", "confidence": 0.7}))
    llm = caller(openai_server, structured_output_method="json_schema")

    assert await llm.structured("q", Answer) == Answer(answer="Paris", confidence=0.7)
    first, second = openai_server.chat_requests
    assert first.body["response_format"]["type"] == "json_schema"
    assert first.body["response_format"]["json_schema"]["name"] == "Answer"
    assert "tools" not in first.body
    assert "could not be used" in second.last_user_text
    assert llm.usage["gpt-4o-mini"]["calls"] >= 1


# --------------------------------------------------------------------------------------------------
# usage and cost


async def test_usage_per_model_with_cost_from_the_price_table(openai_server: FakeOpenAIServer) -> None:
    openai_server.tool_call({"answer": "a", "confidence": 1}, usage=(1000, 200))
    openai_server.reply("b", usage=(3000, 400))
    openai_server.reply("c", usage=(500, 50), model="gpt-4o-mini-2024-07-18")  # providers report dated names
    llm = caller(openai_server)

    await llm.structured("q", Answer)
    await llm.text("q")
    await llm.text("q")

    plain = llm.usage["gpt-4o-mini"]
    assert plain["calls"] == 2 and plain["input_tokens"] == 4000 and plain["output_tokens"] == 600
    assert plain["cost_usd"] == pytest.approx((4000 * 0.15 + 600 * 0.60) / 1e6)
    dated = llm.usage["gpt-4o-mini-2024-07-18"]
    assert dated == {"calls": 1, "input_tokens": 500, "output_tokens": 50,
                     "cost_usd": pytest.approx((500 * 0.15 + 50 * 0.60) / 1e6)}


@pytest.mark.slow
async def test_failed_parses_are_counted(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply("text", usage=(100, 10)).tool_call({"answer": "a", "confidence": 1}, usage=(150, 20))
    llm = caller(openai_server)
    await llm.structured("q", Answer)
    assert llm.usage["gpt-4o-mini"]["input_tokens"] == 250
    assert llm.usage["gpt-4o-mini"]["output_tokens"] == 30


async def test_unknown_model_has_an_unknown_cost_but_counts_tokens(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply("x", usage=(10, 20), model="my-local-llama")
    llm = caller(openai_server)
    await llm.text("q")
    assert llm.usage == {"my-local-llama": {"calls": 1, "input_tokens": 10, "output_tokens": 20, "cost_usd": None}}


@pytest.mark.slow
async def test_custom_price_from_the_prices_file(openai_server: FakeOpenAIServer, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"my-local-llama": {"input": 1.0, "output": 3.0},
                                  "gpt-4o-mini": {"input": 0.2, "output": 0.8}}))
    monkeypatch.setenv("KGAGENTS_PRICES_FILE", str(prices))
    openai_server.reply("x", usage=(1_000_000, 100_000), model="my-local-llama")
    openai_server.reply("y", usage=(1_000_000, 1_000_000))
    llm = caller(openai_server)

    await llm.text("q")
    await llm.text("q")

    assert llm.usage["my-local-llama"]["cost_usd"] == pytest.approx(1.0 + 0.3)
    assert llm.usage["gpt-4o-mini"]["cost_usd"] == pytest.approx(0.2 + 0.8)  # the file overrides the default


@pytest.mark.slow
async def test_custom_price_from_register_price(openai_server: FakeOpenAIServer) -> None:
    register_price("my-local-llama", 2.0, 4.0)
    openai_server.reply("x", usage=(500_000, 250_000), model="my-local-llama")
    llm = caller(openai_server)
    await llm.text("q")
    assert llm.usage["my-local-llama"]["cost_usd"] == pytest.approx(1.0 + 1.0)
    assert usage_mod.price_for("my-local-llama") == {"input": 2.0, "output": 4.0}


# --------------------------------------------------------------------------------------------------
# models built from configuration strings, talking to the same server


async def test_bare_model_with_kgagents_base_url(openai_server: FakeOpenAIServer,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    openai_server.api_key = "server-key"
    monkeypatch.setenv("KGAGENTS_MODEL", "local-model")
    monkeypatch.setenv("KGAGENTS_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("KGAGENTS_API_KEY", "server-key")
    openai_server.server_error().reply("hi from local")
    llm = LLMCaller(context(), "tool_executor")

    assert isinstance(llm.model, ChatOpenAI)
    assert await llm.text("q") == "hi from local"
    requests = openai_server.chat_requests
    assert len(requests) == 2  # one retry by our layer, none by the SDK
    assert requests[0].body["model"] == "local-model"
    assert requests[0].headers["authorization"] == "Bearer server-key"
    assert set(llm.usage) == {"local-model"}


@pytest.mark.slow
async def test_the_sdk_does_not_retry_by_itself(openai_server: FakeOpenAIServer,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGAGENTS_BASE_URL", openai_server.base_url)
    openai_server.server_error(times=5)
    llm = LLMCaller(context(model="local-model", max_api_retries=0), "graph_executor")
    with pytest.raises(LLMError):
        await llm.text("q")
    assert len(openai_server.chat_requests) == 1


@pytest.mark.slow
async def test_model_name_with_a_colon_on_an_openai_compatible_server(openai_server: FakeOpenAIServer) -> None:
    """Ollama's /v1 and vLLM serve names like ``qwen2.5:7b``: that is a model, not provider ``qwen2.5``."""
    openai_server.reply("ok")
    llm = LLMCaller(context(model="qwen2.5:7b", base_url=openai_server.base_url), "graph_executor")
    assert await llm.text("q") == "ok"
    assert openai_server.chat_requests[0].body["model"] == "qwen2.5:7b"
    assert openai_server.chat_requests[0].headers["authorization"] == "Bearer not-needed"


@pytest.mark.slow
async def test_provider_string_with_openai_base_url(openai_server: FakeOpenAIServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.rate_limit().tool_call({"answer": "via init_chat_model", "confidence": 1})
    llm = LLMCaller(context(model="openai:gpt-4o-mini"), "graph_executor")

    assert (await llm.structured("q", Answer)).answer == "via init_chat_model"
    assert len(openai_server.chat_requests) == 2
    assert openai_server.chat_requests[0].headers["authorization"] == "Bearer sk-from-env"


@pytest.mark.slow
async def test_provider_string_with_context_base_url(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply("hello")
    llm = LLMCaller(context(model="openai:gpt-4o-mini", base_url=openai_server.base_url), "tools")
    assert await llm.text("q") == "hello"
    assert openai_server.chat_requests[0].body["model"] == "gpt-4o-mini"


@pytest.mark.slow
async def test_built_model_uses_the_context_timeout(openai_server: FakeOpenAIServer) -> None:
    openai_server.hang(30).reply("after")
    model = build_chat_model("gpt-4o-mini", base_url=openai_server.base_url, timeout_s=0.3)
    assert model.max_retries == 0
    llm = LLMCaller(context(model=model, llm_timeout_s=30), "graph_executor")
    assert await llm.text("q") == "after"


# --------------------------------------------------------------------------------------------------
# usage in the graph state survives checkpoints


@pytest.mark.slow
async def test_usage_survives_sqlite_checkpoints(openai_server: FakeOpenAIServer, tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime

    from kgagents.nodes.state import UsageState

    class State(UsageState, total=False):
        question: str
        answer: str

    async def answer(state: State, runtime: Runtime[KGoTContext]) -> dict[str, Any]:
        llm = LLMCaller(runtime.context, "graph_executor")
        result = await llm.structured(state["question"], Answer)
        return {"answer": result.answer, "usage": llm.usage}

    builder = StateGraph(State, context_schema=KGoTContext)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)

    openai_server.tool_call({"answer": "one", "confidence": 1}, usage=(100, 10))
    openai_server.server_error()
    openai_server.reply("not structured", usage=(200, 20))
    openai_server.tool_call({"answer": "two", "confidence": 1}, usage=(300, 30))
    ctx = context(openai_server)
    db = tmp_path / "checkpoints.sqlite"
    config = {"configurable": {"thread_id": "t-1"}}

    async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
        graph = builder.compile(checkpointer=saver)
        first = await final_state(graph, {"question": "first?"}, config, context=ctx)
        second = await final_state(graph, {"question": "second?"}, config, context=ctx)
    assert first["answer"] == "one" and second["answer"] == "two"

    async with AsyncSqliteSaver.from_conn_string(str(db)) as fresh:
        saved = await fresh.aget_tuple(config)
        assert saved is not None
        usage = saved.checkpoint["channel_values"]["usage"]
        state = await builder.compile(checkpointer=fresh).aget_state(config)

    expected = {"calls": 3, "input_tokens": 600, "output_tokens": 60,
                "cost_usd": pytest.approx((600 * 0.15 + 60 * 0.60) / 1e6)}
    assert usage == {"gpt-4o-mini": expected}
    assert state.values["usage"] == {"gpt-4o-mini": expected}
    json.dumps(usage)  # plain JSON: shows as is in Studio and in `kgagents show --json`


# --------------------------------------------------------------------------------------------------
# the retry policy itself and the fake server's own contract


def test_retry_after_parsing() -> None:
    def err(headers: dict[str, str], status: int = 429) -> Exception:
        exc = Exception("x")
        exc.response = httpx.Response(status, headers=headers)  # type: ignore[attr-defined]
        return exc

    assert retry_after_s(err({"Retry-After": "3"})) == 3.0
    assert retry_after_s(err({"retry-after-ms": "250"})) == 0.25
    assert retry_after_s(err({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0  # in the past
    assert retry_after_s(err({"Retry-After": "soon"})) is None
    assert retry_after_s(err({})) is None
    assert retry_after_s(ValueError("no response")) is None
    assert is_transient(err({}, 429)) and is_transient(err({}, 503))  # status from the response
    assert not is_transient(err({}, 400)) and not is_transient(ValueError("bad"))
    exc = Exception("x")
    exc.status_code = 529  # type: ignore[attr-defined]
    assert is_transient(exc) and is_transient(TimeoutError()) and is_transient(ConnectionResetError())


def test_fake_server_contract(openai_server: FakeOpenAIServer) -> None:
    def post(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(f"{openai_server.base_url}/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    with urllib.request.urlopen(f"{openai_server.base_url}/models", timeout=5) as resp:
        assert [m["id"] for m in json.loads(resp.read())["data"]] == openai_server.models

    status, body = post({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    assert status == 400 and "stream" in body["error"]["message"]
    status, body = post({"model": "m", "messages": []})
    assert status == 400 and "no scripted reply" in body["error"]["message"]

    openai_server.reply("hello")
    status, body = post({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False})
    assert status == 200
    assert body["model"] == "m" and body["choices"][0]["message"]["content"] == "hello"
    assert body["usage"] == {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    assert len(openai_server.chat_requests) == 3


def test_the_fault_policy_is_seeded_by_the_request() -> None:
    """About the share of faults asked for, of every kind in turn; the same requests meet them for the same seed
    and request history, whatever the order the requests come in."""
    def request(i: int) -> RecordedRequest:
        return RecordedRequest("POST", "/v1/chat/completions", {}, {"model": "m", "messages": [
            {"role": "user", "content": f"question {i % 50}"}], "tools": [{"type": "function", "function": {
                "name": "Answer", "parameters": {}}}]})

    def run(seed: int, order: list[int]) -> dict[int, list[str]]:
        policy = FaultPolicy(lambda r: Step("reply", content="fine"), seed=seed)
        seen: dict[int, list[str]] = {}
        for i in order:
            step = policy.step_for(request(i))
            seen.setdefault(i % 50, []).append("ok" if step.content == "fine" else "fault")
        return seen

    order = list(range(1000))
    first = run(7, order)
    assert run(7, order[::-1]) == first
    assert run(8, order) != first
    policy = FaultPolicy(lambda r: Step("reply", content="fine"), seed=7)
    for i in order:
        policy.step_for(request(i))
    assert 0.25 < policy.faults / 1000 < 0.35
    assert set(policy.injected) == {*FAULT_KINDS, "ok"}
    assert max(policy.injected[k] for k in FAULT_KINDS) - min(policy.injected[k] for k in FAULT_KINDS) <= 1


def test_fake_server_stops_while_a_request_hangs() -> None:
    server = FakeOpenAIServer().start()
    server.hang(60)
    url = f"{server.base_url}/chat/completions"
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    errors: list[BaseException] = []

    def client() -> None:
        try:
            urllib.request.urlopen(urllib.request.Request(url, body, {"Content-Type": "application/json"}),
                                   timeout=30)
        except Exception as exc:  # noqa: BLE001 - the connection is dropped
            errors.append(exc)

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while not server.chat_requests and time.monotonic() < deadline:
        time.sleep(0.01)
    start = time.monotonic()
    server.stop()
    thread.join(timeout=5)
    assert time.monotonic() - start < 3
    assert not thread.is_alive() and errors
