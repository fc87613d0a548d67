"""The direct path of the OpenAI-compatible chat model (nodes.openai_chat): the same requests, results and errors
as ``ChatOpenAI`` through the OpenAI SDK, compared call by call on a loopback server."""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from langchain_core.caches import InMemoryCache
from langchain_core.callbacks import AsyncCallbackHandler, AsyncCallbackManager
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI
from openai._utils import maybe_transform
from openai.types.chat import completion_create_params
from pydantic import BaseModel

from kgagents.retry import is_transient
from nodes import openai_chat
from nodes.models import build_chat_model
from nodes.openai_chat import OpenAIChatModel
from tests.fakes import isolate_model_env
from tests.fakes.openai_server import FakeOpenAIServer, openai_server  # noqa: F401 - fixture


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_model_env(monkeypatch, tmp_path)


class Lookup(BaseModel):
    """Look a term up."""

    term: str
    limit: int = 5


def built(server: FakeOpenAIServer, **kwargs: Any) -> OpenAIChatModel:
    model = build_chat_model("gpt-4o-mini", base_url=server.base_url, timeout_s=2.0, **kwargs)
    assert isinstance(model, OpenAIChatModel)
    return model


class Counted:
    """Counts the direct path's and the SDK path's calls of one model."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.direct = 0
        self.sdk = 0
        post, sdk = OpenAIChatModel._post, ChatOpenAI._agenerate

        async def counted_post(model: Any, *args: Any, **kwargs: Any) -> Any:
            self.direct += 1
            return await post(model, *args, **kwargs)

        async def counted_sdk(model: Any, *args: Any, **kwargs: Any) -> Any:
            self.sdk += 1
            return await sdk(model, *args, **kwargs)

        monkeypatch.setattr(OpenAIChatModel, "_post", counted_post)
        monkeypatch.setattr(ChatOpenAI, "_agenerate", counted_sdk)


def sdk_twin(model: OpenAIChatModel) -> ChatOpenAI:
    """The same model as a plain ``ChatOpenAI`` on the same client (the SDK path)."""
    return ChatOpenAI(model=model.model_name, base_url=model.openai_api_base, api_key=model.openai_api_key,
                      max_retries=0, timeout=model.request_timeout, temperature=model.temperature, seed=model.seed,
                      http_async_client=model.http_async_client)


CONVERSATION = [
    SystemMessage("You look things up."),
    HumanMessage("What is KGoT? Ünïcödé ✓"),
    AIMessage("", tool_calls=[{"name": "Lookup", "args": {"term": "KGoT"}, "id": "call_1"}]),
    ToolMessage("Knowledge Graph of Thoughts", tool_call_id="call_1"),
]


def replies(server: FakeOpenAIServer, shape: dict[str, Any]) -> None:
    """Let the server answer every request with ``shape`` (a chat completion as some server sends it)."""
    server.completion = lambda body, step: copy.deepcopy(shape)  # type: ignore[method-assign]


FULL = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini-2024",
    "system_fingerprint": "fp_1", "service_tier": "default",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": None, "refusal": None,
        "tool_calls": [{"id": "call_9", "type": "function",
                        "function": {"name": "Lookup", "arguments": "{\"term\": \"graph\", \"limit\": 2}"}}]}}],
    "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25,
              "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 2, "audio_tokens": 0}},
}
#: What small OpenAI-compatible servers send: no fingerprint, no id, no usage details, extra fields.
SPARSE = {
    "object": "chat.completion", "model": "qwen2.5:7b",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "A graph of thoughts.", "reasoning_content": "hm"}}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
}
TWO_CHOICES = {
    "id": "chatcmpl-2", "object": "chat.completion", "created": 2, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "one"}},
                {"index": 1, "finish_reason": "length", "message": {"role": "assistant", "content": "two"}}],
}
REFUSAL = {
    "id": "chatcmpl-3", "object": "chat.completion", "created": 3, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": None, "refusal": "I cannot help with that."}}],
}


def comparable(result: Any) -> dict[str, Any]:
    """A LangChain result as plain data, its run id aside (each reply's id is made from it, as LangChain
    does)."""
    data = result.model_dump()
    (run,) = data.pop("run")
    for generations in data["generations"]:
        for index, generation in enumerate(generations):
            assert generation["message"].pop("id") == f"lc_run--{run['run_id']}-{index}"
    return data


@pytest.mark.parametrize("shape", [FULL, SPARSE, TWO_CHOICES, REFUSAL], ids=["full", "sparse", "n2", "refusal"])
async def test_the_direct_path_sends_and_returns_what_the_sdk_path_does(
        openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, shape: dict[str, Any]) -> None:
    model = built(openai_server, temperature=0.3, seed=7)
    counted = Counted(monkeypatch)
    replies(openai_server, shape)
    results = []
    for chat in (model, sdk_twin(model)):
        bound = chat.bind_tools([Lookup], tool_choice="any")
        openai_server.reply("unused")
        results.append(await bound.agenerate([CONVERSATION], stop=["\n\n"]))
    assert (counted.direct, counted.sdk) == (1, 1)
    direct, sdk = openai_server.chat_requests
    assert direct.path == sdk.path
    # the same JSON, encoded alike (keys in LangChain's order rather than the SDK's)
    assert json.loads(direct.raw) == json.loads(sdk.raw)
    assert len(direct.raw) == len(sdk.raw)
    aiohttp_own = {"accept-encoding", "connection", "user-agent", "host", "content-length"}
    assert {k: v for k, v in direct.headers.items() if k not in aiohttp_own} == \
        {k: v for k, v in sdk.headers.items() if k not in aiohttp_own}
    assert direct.headers["user-agent"] == sdk.headers["user-agent"]  # the SDK's, not aiohttp's
    assert comparable(results[0]) == comparable(results[1])


def test_langchains_payloads_are_what_the_sdk_would_send() -> None:
    """The direct path sends LangChain's payload as it is: the SDK's parameter transform leaves it unchanged."""
    model = OpenAIChatModel(model="gpt-4o-mini", api_key="k", temperature=0.2, seed=3, max_tokens=50)
    payload = model.bind_tools([Lookup], tool_choice="any")
    payload = model._get_request_payload(CONVERSATION, stop=["x"], tools=payload.kwargs["tools"],
                                         tool_choice=payload.kwargs["tool_choice"])
    assert model._direct_payload(payload)
    transformed = maybe_transform(payload, completion_create_params.CompletionCreateParamsNonStreaming)
    assert transformed == payload


async def test_calls_it_does_not_reproduce_take_the_sdk_path(openai_server: FakeOpenAIServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    model = built(openai_server)
    counted = Counted(monkeypatch)
    cases = [
        model.with_structured_output(Lookup, method="json_schema"),  # response_format
        model.bind(extra_body={"top_k": 3}),  # a request option
        model.model_copy(update={"include_response_headers": True}),
    ]
    for runnable in cases:
        openai_server.reply(json.dumps({"term": "t"}))
        await runnable.ainvoke("q")
    assert (counted.direct, counted.sdk) == (0, 3)
    assert openai_server.chat_requests[1].body["top_k"] == 3
    retrying = OpenAIChatModel(model="m", base_url=openai_server.base_url, api_key="k", max_retries=2,
                               http_async_client=model.http_async_client)
    openai_server.reply("ok")
    assert (await retrying.ainvoke("q")).content == "ok"
    assert (counted.direct, counted.sdk) == (0, 4)  # SDK retries stay the SDK's


async def test_a_changed_api_key_is_sent(openai_server: FakeOpenAIServer) -> None:
    model = built(openai_server)
    openai_server.reply("a").reply("b")
    await model.ainvoke("q")
    model.root_async_client.api_key = "sk-new"
    await model.ainvoke("q")
    assert [r.headers["authorization"] for r in openai_server.chat_requests] == \
        ["Bearer not-needed", "Bearer sk-new"]


def refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


FAULTS = {
    "400": lambda s: s.error(400, "bad things"),
    "400-context": lambda s: s.error(400, "This model's maximum context length is 8192 tokens "
                                          "(context_length_exceeded)"),
    "401": lambda s: s.error(401, "Incorrect API key provided."),
    "404": lambda s: s.error(404, "The model does not exist"),
    "429": lambda s: s.rate_limit(0),
    "500": lambda s: s.server_error(),
    "truncated": lambda s: s.truncated(),
    "not_json": lambda s: s.not_json(),
    "html": lambda s: s.html_page(),
    "hang": lambda s: s.hang(5),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_faults_raise_what_the_sdk_path_raises(openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch,
                                                     fault: str) -> None:
    model = built(openai_server)
    counted = Counted(monkeypatch)
    errors = []
    for chat in (model, sdk_twin(model)):
        FAULTS[fault](openai_server)
        with pytest.raises(Exception) as info:
            await chat.ainvoke("q")
        errors.append(info.value)
    assert (counted.direct, counted.sdk) == (1, 1)
    direct, sdk = errors
    assert type(direct) is type(sdk)
    assert str(direct) == str(sdk)
    assert is_transient(direct) == is_transient(sdk)
    assert getattr(direct, "status_code", None) == getattr(sdk, "status_code", None)
    assert getattr(direct, "body", None) == getattr(sdk, "body", None)
    assert type(direct.__cause__) is type(sdk.__cause__)


async def test_a_refused_connection_is_a_connection_error_as_with_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{refused_port()}/v1"
    model = build_chat_model("gpt-4o-mini", base_url=url, timeout_s=2.0)
    httpx_model = ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key="not-needed", max_retries=0, timeout=2.0)
    errors = []
    for chat in (model, httpx_model):
        with pytest.raises(Exception) as info:
            await chat.ainvoke("q")
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1])
    assert is_transient(errors[0]) and is_transient(errors[1])


def test_a_sdk_without_the_pieces_the_direct_path_needs_leaves_every_call_to_it(
        openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    monkeypatch.setattr(openai_chat, "AVAILABLE", False)
    model = built(openai_server)
    counted = Counted(monkeypatch)
    openai_server.reply("fine")
    assert asyncio.run(model.ainvoke("q")).content == "fine"
    assert (counted.direct, counted.sdk) == (0, 1)


def test_results_keep_step_replies(openai_server: FakeOpenAIServer) -> None:
    """A scripted tool call comes back as the tool call the server sent (the server's own reply builder)."""
    import asyncio

    model = built(openai_server)
    openai_server.tool_call({"term": "x"}, name="Lookup")
    message = asyncio.run(model.bind_tools([Lookup]).ainvoke("q"))
    assert message.tool_calls[0]["args"] == {"term": "x"}
    assert message.usage_metadata is not None


class Recorder(AsyncCallbackHandler):
    """A callback handler that notes the chat-model runs it sees."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    async def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any,
                                  **kwargs: Any) -> None:
        self.events.append(("start", run_id))

    async def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
        self.events.append(("end", run_id))


class Runs:
    """Counts the chat-model runs langchain-core opens (its callback path)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened = 0
        start = AsyncCallbackManager.on_chat_model_start

        async def counted(manager: Any, *args: Any, **kwargs: Any) -> Any:
            self.opened += 1
            return await start(manager, *args, **kwargs)

        monkeypatch.setattr(AsyncCallbackManager, "on_chat_model_start", counted)


async def test_a_call_nothing_observes_skips_the_callback_run(openai_server: FakeOpenAIServer,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    model = built(openai_server)
    runs = Runs(monkeypatch)
    openai_server.tool_call({"term": "x"}, name="Lookup")
    message = await model.bind_tools([Lookup], tool_choice="any").ainvoke("q")
    assert runs.opened == 0
    assert message.tool_calls[0]["args"] == {"term": "x"}
    assert message.id.startswith("lc_run--") and message.id.endswith("-0")
    assert message.response_metadata["model_provider"] == "openai"
    assert message.response_metadata["finish_reason"] == "tool_calls"
    assert message.usage_metadata is not None


async def test_handlers_see_every_call(openai_server: FakeOpenAIServer,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A handler in the call's config or on the model, or one a configure hook adds (``collect_runs``), makes
    the call langchain-core's traced run: the handler sees it start and end, and the reply's id is that
    run's."""
    from langchain_core.tracers.context import collect_runs

    model = built(openai_server)
    runs = Runs(monkeypatch)
    in_config, on_model = Recorder(), Recorder()
    openai_server.reply("a").reply("b").reply("c")
    first = await model.ainvoke("q", config={"callbacks": [in_config]})
    second = await model.model_copy(update={"callbacks": [on_model]}).ainvoke("q")
    with collect_runs() as collected:
        third = await model.ainvoke("q")
    assert runs.opened == 3
    for recorder, message in ((in_config, first), (on_model, second)):
        assert [kind for kind, _ in recorder.events] == ["start", "end"]
        assert message.id == f"lc_run--{recorder.events[0][1]}-0"
    (run,) = collected.traced_runs
    assert third.content == "c" and run.outputs["generations"][0][0]["message"]["kwargs"]["content"] == "c"


async def test_langgraphs_messages_stream_sees_the_reply(openai_server: FakeOpenAIServer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """What Studio shows: a graph streamed with ``messages`` gets the model's reply; streamed without it, the
    same node's call opens no run."""
    from langgraph.graph import END, START, MessagesState, StateGraph

    # the fake server does not stream; the messages stream then gets the whole reply at its end
    model = built(openai_server).model_copy(update={"disable_streaming": True})
    runs = Runs(monkeypatch)

    async def ask(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = (StateGraph(MessagesState).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
             .compile())
    openai_server.reply("streamed").reply("quiet")
    streamed = [message async for message, _ in graph.astream({"messages": [HumanMessage("q")]},
                                                              stream_mode="messages")]
    assert runs.opened == 1
    assert [m.content for m in streamed if isinstance(m, AIMessage)] == ["streamed"]
    values = [v async for v in graph.astream({"messages": [HumanMessage("q")]}, stream_mode="values")]
    assert runs.opened == 1
    assert values[-1]["messages"][-1].content == "quiet"


async def test_a_cached_model_answers_from_its_cache(openai_server: FakeOpenAIServer) -> None:
    model = built(openai_server).model_copy(update={"cache": InMemoryCache()})
    openai_server.reply("once").reply("twice")
    assert [(await model.ainvoke("same")).content for _ in range(2)] == ["once", "once"]
    assert len(openai_server.chat_requests) == 1


def test_tracing_verbose_models_and_streaming_count_as_observed(openai_server: FakeOpenAIServer) -> None:
    model = built(openai_server)
    conversation = [[HumanMessage("q")]]
    assert model._unobserved(conversation, None, {})
    assert not model._unobserved(conversation * 2, None, {})  # a batch of conversations: LangChain's gather
    assert not model._unobserved(conversation, None, {"stream": True})
    assert not model.model_copy(update={"verbose": True})._unobserved(conversation, None, {})
    assert not model.model_copy(update={"output_version": "v1"})._unobserved(conversation, None, {})
    from langchain_core.tracers.context import tracing_v2_enabled
    from langsmith import Client, tracing_context

    client = Client(api_url=f"http://127.0.0.1:{refused_port()}", api_key="test-key")  # nothing is sent
    with tracing_v2_enabled(project_name="kgagents-test", client=client):
        assert not model._unobserved(conversation, None, {})
    with tracing_context(enabled=True, client=client):  # LangSmith's own switch, as LANGSMITH_TRACING sets it
        assert not model._unobserved(conversation, None, {})
    assert model._unobserved(conversation, None, {})
