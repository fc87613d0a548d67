"""The private parts of other libraries (kgagents.core.third_party, docs/dependencies.md): each one broken when a model
is built or at call time still sends its requests to a loopback OpenAI-compatible server, on the public path, and
says so in exactly one warning that names the symbol, the library and its version."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from langchain_core.runnables import RunnableGenerator
from openai._vendor.httpx_aiohttp import client as aiohttp_client
from openai._vendor.httpx_aiohttp import transport as aiohttp_transport
from pydantic import BaseModel

from kgagents.core import third_party
from kgagents.nodes import models, openai_chat
from kgagents.nodes.http_client import LoopLocalAioHttpClient, LoopLocalTransport
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.llm import DirectStructured, LLMCaller, structured_runnable
from kgagents.nodes.models import build_chat_model
from tests.fakes import isolate_model_env
from tests.fakes.openai_server import FakeOpenAIServer

DOC = Path(__file__).resolve().parents[1] / "docs" / "dependencies.md"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_model_env(monkeypatch, tmp_path)
    monkeypatch.setattr(third_party, "_warned", set())  # each test is a process's first use
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


class Verdict(BaseModel):
    """A verdict on the claim."""

    verdict: str


def warnings_about(caplog: pytest.LogCaptureFixture, symbol: str) -> list[str]:
    """The warnings that name ``symbol``'s fallback."""
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.name == third_party.__name__ and symbol in r.getMessage()]


def one_warning(caplog: pytest.LogCaptureFixture, library: str, symbol: str) -> str:
    """The one warning of the fallback of ``library``'s ``symbol``, checked for what it must name."""
    [message] = warnings_about(caplog, symbol)
    assert f"{library} {third_party.installed_version(library)}" in message and "public path" in message
    [part] = [p for p in third_party.registered() if (p.library, p.symbol) == (library, symbol)]
    assert part.fallback in message
    return message


def built(server: FakeOpenAIServer) -> Any:
    return build_chat_model("gpt-4o-mini", base_url=server.base_url, timeout_s=5.0)


def ask_on_new_loops(model: Any, server: FakeOpenAIServer, times: int = 2) -> None:
    """``times`` calls, each on an event loop of its own (as CLI commands and tests make them), each answered."""
    for i in range(times):
        server.reply(f"answer {i}")
        assert asyncio.run(model.ainvoke("q")).content == f"answer {i}"


def refuse(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("simulated drift of a private symbol")


# -- httpx2: the per-loop pools ----------------------------------------------------------------------------------
@pytest.mark.parametrize("broken", ["the SDK's transport factory", "the transport class it makes"])
def test_a_transport_factory_failing_at_call_time_takes_httpxs_own_transport(
        openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        broken: str) -> None:
    model = built(openai_server)
    assert isinstance(model.http_async_client, LoopLocalAioHttpClient)  # built on the private path
    if broken == "the SDK's transport factory":
        monkeypatch.setattr(aiohttp_client.Httpx2AiohttpClient, "_init_transport", refuse)
    else:
        monkeypatch.setattr(aiohttp_transport, "AiohttpTransport", refuse)
    with caplog.at_level(logging.WARNING):
        ask_on_new_loops(model, openai_server)
    assert len(openai_server.chat_requests) == 2
    assert "simulated drift" in one_warning(caplog, "httpx2", "AsyncClient._init_transport")


class _ForwardingProxy(ThreadingHTTPServer):
    """A plain-HTTP forward proxy on loopback: passes each request (absolute URL) on and counts them."""

    def __init__(self) -> None:
        self.forwarded = 0
        super().__init__(("127.0.0.1", 0), _ProxyHandler)


class _ProxyHandler(BaseHTTPRequestHandler):
    server: _ForwardingProxy

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test output
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "proxy-connection",
                                                                               "connection", "content-length")}
        request = urllib.request.Request(self.path, data=body, headers=headers, method="POST")
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10) as reply:
            data, status, kind = reply.read(), reply.status, reply.headers.get("Content-Type", "application/json")
        self.server.forwarded += 1
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True


@pytest.fixture
def proxy() -> Iterator[_ForwardingProxy]:
    server = _ForwardingProxy()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_proxy_transport_factory_failing_at_call_time_takes_httpxs_own_proxy_transport(
        openai_server: FakeOpenAIServer, proxy: _ForwardingProxy, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
    model = built(openai_server)
    assert isinstance(model.http_async_client, LoopLocalAioHttpClient)
    monkeypatch.setattr(aiohttp_client.Httpx2AiohttpClient, "_init_proxy_transport", refuse)
    with caplog.at_level(logging.WARNING):
        ask_on_new_loops(model, openai_server)
    assert len(openai_server.chat_requests) == 2 and proxy.forwarded == 2  # through the proxy, as configured
    one_warning(caplog, "httpx2", "AsyncClient._init_proxy_transport")


@pytest.mark.parametrize("drift", ["transports not made through _init_transport", "_init_transport raises",
                                   "no _transport"])
def test_a_client_that_cannot_be_built_on_the_private_path_is_the_sdks_default_said_once(
        openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        drift: str) -> None:
    from openai import DefaultAioHttpClient

    if drift == "transports not made through _init_transport":
        monkeypatch.setattr(LoopLocalAioHttpClient, "_init_transport", DefaultAioHttpClient._init_transport)
        symbol = "AsyncClient._init_transport"
    elif drift == "_init_transport raises":
        monkeypatch.setattr(LoopLocalAioHttpClient, "_init_transport", refuse)
        symbol = "AsyncClient._init_transport"
    else:
        init = LoopLocalAioHttpClient.__init__

        def without_transport(self: Any, **kwargs: Any) -> None:
            init(self, **kwargs)
            del self._transport

        monkeypatch.setattr(LoopLocalAioHttpClient, "__init__", without_transport)
        symbol = "AsyncClient._transport"
    with caplog.at_level(logging.WARNING):
        models_built = [built(openai_server), build_chat_model("gpt-4o", base_url=openai_server.base_url)]
        assert all(isinstance(model.http_async_client._transport, LoopLocalTransport)  # public, one pool per loop
                   and not isinstance(model.http_async_client, LoopLocalAioHttpClient) for model in models_built)
        ask_on_new_loops(models_built[0], openai_server)
    assert len(openai_server.chat_requests) == 2
    one_warning(caplog, "httpx2", symbol)


# -- aiohttp: closing the pools of ended loops -------------------------------------------------------------------
def test_a_connector_that_cannot_be_closed_at_once_is_left_to_the_collector_said_once(
        openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    model = built(openai_server)
    monkeypatch.setattr(aiohttp.BaseConnector, "_close", refuse)
    with caplog.at_level(logging.WARNING):
        ask_on_new_loops(model, openai_server, times=3)  # each new loop lets the ended loop's pool go
    assert len(openai_server.chat_requests) == 3
    one_warning(caplog, "aiohttp", "BaseConnector._close")


# -- langchain-openai: n choices in one request ------------------------------------------------------------------
@pytest.mark.parametrize("drift", ["gone", "raises"])
async def test_without_the_api_decision_each_sample_is_a_request_said_once(
        openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        drift: str) -> None:
    # ChatOpenAI calls the method itself, so the name kgagents calls is taken away (a renamed method), or made
    # to fail, rather than the method ChatOpenAI's own call needs
    monkeypatch.setattr(openai_chat, "API_DECISION", "_drifted")
    if drift == "raises":
        monkeypatch.setattr(openai_chat.OpenAIChatModel, "_drifted", refuse, raising=False)
    model = built(openai_server)
    caller = LLMCaller(KGoTContext(model=model, max_api_retries=0), "graph_executor")
    with caplog.at_level(logging.WARNING):
        for _round in range(2):
            for why in "ab":
                openai_server.tool_call({"verdict": why})
            samples = await caller.structured_samples("Is it true?", Verdict, 2)
            assert sorted(s.verdict for s in samples) == ["a", "b"]  # type: ignore[union-attr]
    assert [r.body.get("n") for r in openai_server.chat_requests] == [None] * 4
    one_warning(caplog, "langchain-openai", "BaseChatOpenAI._use_responses_api")


# -- langchain-core: the structured-output chain taken apart -----------------------------------------------------
def _drifted_check(original: Any) -> Any:
    """A refusal check as a later langchain-core might hold it: a generator that also takes its run manager
    (which the runnable's public path passes, and a direct call does not)."""

    def check(input: Iterator[Any], run_manager: Any) -> Iterator[Any]:  # noqa: A002 - LangChain's name
        yield from original(input)

    return check


async def test_a_generator_step_failing_at_call_time_runs_through_its_public_invoke(
        openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    model = built(openai_server)
    runnable = structured_runnable(model, Verdict, {"include_raw": True, "method": "function_calling"})
    assert isinstance(runnable, DirectStructured)
    [generator] = [p.step for p in runnable.parsers if isinstance(getattr(p, "step", None), RunnableGenerator)]
    generator._transform = _drifted_check(generator._transform)
    with caplog.at_level(logging.WARNING):
        for why in "ab":
            openai_server.tool_call({"verdict": why})
            caller = LLMCaller(KGoTContext(model=model, max_api_retries=0), "graph_executor")
            assert (await caller.structured("Is it true?", Verdict)).verdict == why
    assert len(openai_server.chat_requests) == 2  # no re-asks: each reply parsed on the public path
    one_warning(caplog, "langchain-core", "RunnableGenerator._transform")


async def test_a_generator_step_that_fails_on_both_paths_is_the_parse_error_without_a_warning(
        openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    """A refusal is what the step raises on either path: the reply's parse error, not a drifted library."""
    model = built(openai_server)
    runnable = structured_runnable(model, Verdict, {"include_raw": True, "method": "function_calling"})
    [step] = [p for p in runnable.parsers if isinstance(getattr(p, "step", None), RunnableGenerator)]

    def refuses(input: Iterator[Any]) -> Iterator[Any]:  # noqa: A002 - LangChain's name
        raise ValueError("the model refused")
        yield  # a generator

    step.step._transform = refuses
    with pytest.raises(ValueError, match="refused"):
        step("anything")
    assert not warnings_about(caplog, "RunnableGenerator._transform")


async def test_a_generator_step_without_its_private_names_keeps_langchains_chain_said_once(
        openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    init = RunnableGenerator.__init__

    def renamed(self: RunnableGenerator, *args: Any, **kwargs: Any) -> None:  # a langchain-core that renamed it
        init(self, *args, **kwargs)
        self.__dict__["_transform_v2"] = self.__dict__.pop("_transform", None)
        self.__dict__.pop("_atransform", None)

    monkeypatch.setattr(RunnableGenerator, "__init__", renamed)
    model = built(openai_server)
    with caplog.at_level(logging.WARNING):
        runnable = structured_runnable(model, Verdict, {"include_raw": True, "method": "function_calling"})
        assert not isinstance(runnable, DirectStructured)
    one_warning(caplog, "langchain-core", "RunnableGenerator._transform")


# -- langchain: the providers it knows ---------------------------------------------------------------------------
def test_without_langchains_provider_list_the_known_providers_are_used_said_once(
        openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from langchain.chat_models import base as chat_base

    monkeypatch.delattr(chat_base, "_BUILTIN_PROVIDERS")
    with caplog.at_level(logging.WARNING):
        assert models.is_provider("openai") and not models.is_provider("qwen2.5")
        model = build_chat_model("qwen2.5:7b", base_url=openai_server.base_url, timeout_s=5.0)
        ask_on_new_loops(model, openai_server, times=1)
    assert openai_server.chat_requests[0].body["model"] == "qwen2.5:7b"
    one_warning(caplog, "langchain", "chat_models.base._BUILTIN_PROVIDERS")


# -- the registry and the doc ------------------------------------------------------------------------------------
def _doc_rows() -> list[tuple[str, str]]:
    """docs/dependencies.md's table of private parts: (library with its tested version, private part) per row."""
    text = DOC.read_text(encoding="utf-8").split("## Private parts of libraries", 1)[1]
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 5 and not set(cells[0]) <= {"-"} and cells[0] != "library (tested)":
            rows.append((cells[0], cells[1]))
    return rows


def test_every_registered_private_part_is_in_the_docs_table() -> None:
    # the modules that register private parts (nodes.http_client, nodes.openai_chat, nodes.llm, nodes.models)
    # are imported above
    rows = _doc_rows()
    assert rows
    parts = third_party.registered()
    assert {p.library for p in parts} >= {"httpx2", "aiohttp", "langchain-openai", "langchain-core", "langchain"}
    for part in parts:
        method = part.symbol.rsplit(".", 1)[-1]
        found = [(lib, sym) for lib, sym in rows if lib.startswith(f"{part.library} {part.tested}")
                 and (part.symbol in sym or re.search(rf"`{re.escape(method)}`", sym))]
        assert found, f"{part.library} {part.symbol} (tested {part.tested}) is not in docs/dependencies.md's table"
