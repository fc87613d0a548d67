"""The samples of one decision (kgagents.nodes.llm.LLMCaller.structured_samples): as the ``n`` choices of one request on
an OpenAI-compatible server, each choice parsed and re-asked on its own; one request per sample elsewhere, when
switched off, or when the server rejects ``n``."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from pydantic import BaseModel

from kgagents.core.scripted import ScriptedChatModel
from kgagents.nodes import openai_chat
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.llm import LLMCaller, LLMError, StructuredOutputError
from kgagents.nodes.models import build_chat_model
from kgagents.nodes.openai_chat import OpenAIChatModel
from tests.fakes import isolate_model_env
from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_model_env(monkeypatch, tmp_path)


class Choice(BaseModel):
    """The decision."""

    query_type: str
    reason: str


def caller(server: FakeOpenAIServer, **context: Any) -> LLMCaller:
    model = build_chat_model("gpt-4o-mini", base_url=server.base_url, timeout_s=5.0)
    assert isinstance(model, OpenAIChatModel)
    return LLMCaller(KGoTContext(model=model, max_api_retries=1, api_backoff_base_s=0.0, api_backoff_max_s=0.0,
                                 **context), "graph_executor")


def vote(kind: str, why: str = "r") -> dict[str, str]:
    return {"query_type": kind, "reason": why}


async def test_the_samples_are_the_choices_of_one_request(openai_server: FakeOpenAIServer) -> None:
    openai_server.choices([vote("RETRIEVE", "a"), vote("INSERT", "b"), vote("RETRIEVE", "c")], usage=(100, 30))
    llm = caller(openai_server)
    samples = await llm.structured_samples("Solve or enhance?", Choice, 3)
    assert [(s.query_type, s.reason) for s in samples] == [("RETRIEVE", "a"), ("INSERT", "b"), ("RETRIEVE", "c")]
    [request] = openai_server.chat_requests
    assert request.body["n"] == 3 and request.body["stream"] is False
    assert request.body["tool_choice"]["function"]["name"] == "Choice"
    # the prompt is paid once: the request's usage, not once per choice
    [entry] = llm.usage.values()
    assert (entry["input_tokens"], entry["output_tokens"], entry["calls"]) == (100, 30, 1)


async def test_a_choice_that_does_not_parse_is_asked_again_on_its_own(openai_server: FakeOpenAIServer) -> None:
    openai_server.choices([vote("RETRIEVE"), '{"query_type": ', {"reason": "no type"}])
    openai_server.tool_call(vote("INSERT", "second try"))
    openai_server.tool_call(vote("INSERT", "third"))
    llm = caller(openai_server)
    samples = await llm.structured_samples("Solve or enhance?", Choice, 3)
    assert [s.query_type for s in samples] == ["RETRIEVE", "INSERT", "INSERT"]
    _, *again = openai_server.chat_requests
    assert len(again) == 2 and all("n" not in r.body for r in again)
    assert all(r.last_user_text.startswith("Your previous reply could not be used") for r in again)
    # each re-ask is the prompt and its own choice's error, nothing of the other choices
    assert all([m["role"] for m in r.messages] == ["user", "user"] for r in again)
    assert sorted("not valid JSON" in r.last_user_text for r in again) == [False, True]
    assert llm.usage[next(iter(llm.usage))]["calls"] == 3


async def test_a_choice_that_never_parses_is_that_samples_error(openai_server: FakeOpenAIServer) -> None:
    openai_server.choices([vote("RETRIEVE"), "not json"])
    openai_server.tool_call("still not json")
    llm = caller(openai_server, max_parse_retries=1)
    ok, failed = await llm.structured_samples("Solve or enhance?", Choice, 2)
    assert isinstance(ok, Choice) and isinstance(failed, StructuredOutputError) and failed.attempts == 2
    assert len(openai_server.chat_requests) == 2


async def test_samples_a_server_did_not_return_are_asked_separately(openai_server: FakeOpenAIServer) -> None:
    """Servers that ignore ``n`` answer with one choice."""
    openai_server.choices([vote("RETRIEVE", "only one")])
    for why in ("x", "y"):
        openai_server.tool_call(vote("INSERT", why))
    samples = await caller(openai_server).structured_samples("Solve or enhance?", Choice, 3)
    assert samples[0].reason == "only one" and sorted(s.reason for s in samples[1:]) == ["x", "y"]
    assert [r.body.get("n") for r in openai_server.chat_requests] == [3, None, None]


@pytest.mark.slow
async def test_a_server_that_rejects_n_gets_one_request_per_sample_from_then_on(
        openai_server: FakeOpenAIServer) -> None:
    openai_server.error(400, "Unsupported parameter: 'n'")
    for _ in range(4):
        openai_server.tool_call(vote("RETRIEVE"))
    llm = caller(openai_server)
    assert all(isinstance(s, Choice) for s in await llm.structured_samples("Solve or enhance?", Choice, 2))
    assert all(isinstance(s, Choice) for s in await llm.structured_samples("Solve or enhance?", Choice, 2))
    assert [r.body.get("n") for r in openai_server.chat_requests] == [2, None, None, None, None]


async def test_a_prompt_rejected_either_way_says_nothing_about_n(openai_server: FakeOpenAIServer) -> None:
    """A client error the separate requests meet too (a prompt too long, say) fails the samples, and the next
    decision still asks for its samples in one request."""
    for _ in range(3):
        openai_server.error(400, "This model's maximum context length is 8192 tokens.")
    openai_server.choices([vote("RETRIEVE"), vote("INSERT")])
    llm = caller(openai_server)
    failed = await llm.structured_samples("Solve or enhance? " * 10, Choice, 2)
    assert all(isinstance(s, LLMError) and "context length" in str(s) for s in failed)
    assert all(isinstance(s, Choice) for s in await llm.structured_samples("Solve or enhance?", Choice, 2))
    assert [r.body.get("n") for r in openai_server.chat_requests] == [2, None, None, 2]


async def test_a_request_for_n_that_fails_is_tried_once_then_one_sample_at_a_time(
        openai_server: FakeOpenAIServer) -> None:
    """llama.cpp's server answers a request for several choices with a 500 ("Only one completion choice is
    allowed"): the request for n is not retried, and counts toward no stop of the model; each sample is asked on
    its own, and the model asks for one at a time from then on."""
    openai_server.server_error(1)
    for why in "abcd":
        openai_server.tool_call(vote("INSERT", why))
    llm = caller(openai_server)
    samples = await llm.structured_samples("Solve or enhance?", Choice, 3)
    assert sorted(s.reason for s in samples if isinstance(s, Choice)) == ["a", "b", "c"]
    assert all(isinstance(s, Choice) for s in await llm.structured_samples("Solve or enhance?", Choice, 1))
    assert [r.body.get("n") for r in openai_server.chat_requests] == [3, None, None, None, None]


async def test_samples_whose_own_requests_fail_for_good_are_failures(openai_server: FakeOpenAIServer) -> None:
    """Of a model that answered before (one that never did is stopped by three 500s in a row instead)."""
    openai_server.reply("hello")
    openai_server.server_error(1 + 2 * 2)  # the request for n (tried once), then each sample and its one retry
    llm = caller(openai_server)
    assert await llm.text("hi") == "hello"
    samples = await llm.structured_samples("Solve or enhance?", Choice, 2)
    assert len(samples) == 2 and all(isinstance(s, LLMError) and "500" in str(s) for s in samples)
    assert len(openai_server.chat_requests) == 1 + 5


async def test_switched_off_every_sample_is_a_request_of_its_own(openai_server: FakeOpenAIServer) -> None:
    for why in "abc":
        openai_server.tool_call(vote("INSERT", why))
    llm = caller(openai_server, samples_in_one_request=False)
    samples = await llm.structured_samples("Solve or enhance?", Choice, 3)
    assert sorted(s.reason for s in samples) == ["a", "b", "c"]
    assert [r.body.get("n") for r in openai_server.chat_requests] == [None] * 3


async def test_without_langchain_openais_api_decision_every_sample_is_a_request_of_its_own(
        openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """``takes_n`` rests on one private method of ``ChatOpenAI``: without it (another langchain-openai), or
    when it fails, the public path (one request per sample) is taken."""
    llm = caller(openai_server)
    assert llm.model.takes_n({}) is True  # type: ignore[attr-defined]
    monkeypatch.setattr(openai_chat, "API_DECISION", "_gone_in_another_version")
    assert llm.model.takes_n({}) is False  # type: ignore[attr-defined]
    for why in "ab":
        openai_server.tool_call(vote("INSERT", why))
    samples = await llm.structured_samples("Solve or enhance?", Choice, 2)
    assert sorted(s.reason for s in samples) == ["a", "b"]
    assert [r.body.get("n") for r in openai_server.chat_requests] == [None] * 2
    monkeypatch.setattr(openai_chat, "API_DECISION", "_failing")
    monkeypatch.setattr(OpenAIChatModel, "_failing", lambda self, kwargs: 1 / 0, raising=False)
    assert llm.model.takes_n({}) is False  # type: ignore[attr-defined]


async def test_models_without_n_get_one_call_per_sample() -> None:
    model = ScriptedChatModel(steps=[{"when": "Solve", "structured": vote("RETRIEVE"), "times": 0}])
    samples = await LLMCaller(KGoTContext(model=model), "graph_executor").structured_samples("Solve?", Choice, 4)
    assert [s.query_type for s in samples] == ["RETRIEVE"] * 4 and len(model.calls) == 4


class _State(TypedDict):
    reasons: Annotated[list[str], operator.add]


@pytest.mark.slow
async def test_the_one_request_is_not_streamed_when_the_graph_streams_messages(
        openai_server: FakeOpenAIServer) -> None:
    """Under ``stream_mode="messages"`` LangChain would stream the call, and a stream carries one choice: the
    request says ``stream: false`` (the fake server refuses streams), and the run's callbacks see one model run."""
    openai_server.choices([vote("RETRIEVE", "a"), vote("INSERT", "b")])
    llm = caller(openai_server)

    async def decide(state: _State) -> dict[str, Any]:
        samples = await llm.structured_samples("Solve or enhance?", Choice, 2)
        return {"reasons": [s.reason for s in samples]}

    graph = StateGraph(_State).add_node("decide", decide).add_edge(START, "decide").compile(InMemorySaver())
    chunks = [chunk async for chunk in graph.astream({"reasons": []}, {"configurable": {"thread_id": "t"}},
                                                    stream_mode=["messages", "values"])]
    assert chunks[-1] == ("values", {"reasons": ["a", "b"]})
    assert [r.body["stream"] for r in openai_server.chat_requests] == [False]
