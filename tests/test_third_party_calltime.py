"""Private parts broken at call time in more ways than tests/test_third_party.py breaks them: a transport factory
that returns something else, an aiohttp transport whose first request raises, a client that cannot be built at all
serving a cached model on several event loops (against a server that keeps connections alive), and langchain's
private names changed in ways that look valid. Each still sends its requests, and says so once."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
from langchain_core.runnables import RunnableGenerator
from openai._vendor.httpx_aiohttp import client as aiohttp_client
from openai._vendor.httpx_aiohttp import transport as aiohttp_transport

from kgagents.core import third_party
from kgagents.nodes import models
from kgagents.nodes.http_client import LoopLocalAioHttpClient, LoopLocalTransport
from kgagents.nodes.llm import DirectStructured, structured_runnable
from kgagents.nodes.models import build_chat_model
from tests.fakes import isolate_model_env
from tests.test_third_party import Verdict, one_warning


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_model_env(monkeypatch, tmp_path)
    monkeypatch.setattr(third_party, "_warned", set())
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


class KeepAlive:
    """An OpenAI-compatible loopback server that keeps connections open (as vLLM, llama.cpp and OpenAI do)."""

    def __init__(self) -> None:
        self.posts = 0
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.posts += 1
                data = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": f"a{outer.posts}"}}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def server() -> Any:
    s = KeepAlive()
    yield s
    s.httpd.shutdown()


def ask(model: Any, times: int = 2) -> list[str]:
    return [asyncio.run(model.ainvoke("q")).content for _ in range(times)]


def test_factory_returning_a_wrong_type_at_call_time_still_sends(server, monkeypatch, caplog) -> None:
    """The SDK's transport factory drifts so that it returns something that is not a transport."""
    model = build_chat_model("gpt-4o-mini", base_url=server.base_url, timeout_s=5.0)
    assert isinstance(model.http_async_client, LoopLocalAioHttpClient)
    monkeypatch.setattr(aiohttp_client.Httpx2AiohttpClient, "_init_transport", lambda *a, **k: None)
    with caplog.at_level(logging.WARNING):
        answers = ask(model)
    assert server.posts == 2 and answers == ["a1", "a2"]
    one_warning(caplog, "httpx2", "AsyncClient._init_transport")


def test_the_aiohttp_transport_failing_on_its_first_request_still_sends(server, monkeypatch, caplog) -> None:
    """aiohttp drifts under the vendored transport: building the transport works, its first request raises
    (what a renamed aiohttp keyword, e.g. TCPConnector(keepalive_timeout=...), would do lazily in get_client)."""
    model = build_chat_model("gpt-4o-mini", base_url=server.base_url, timeout_s=5.0)

    def drifted(self: Any) -> Any:
        raise TypeError("TCPConnector.__init__() got an unexpected keyword argument 'keepalive_timeout'")

    monkeypatch.setattr(aiohttp_transport.AiohttpTransport, "get_client", drifted)
    with caplog.at_level(logging.WARNING):
        answers = ask(model)
    assert server.posts == 2 and answers == ["a1", "a2"]
    one_warning(caplog, "httpx2", "AsyncClient._init_transport")


async def test_a_network_error_on_the_first_request_is_no_drift(monkeypatch, caplog) -> None:
    """Only a programming error falls back: a refused connection on a loop's first request is the caller's to
    handle (the public transport is not tried, and nothing is said)."""
    public_used = []
    transport = LoopLocalTransport(lambda: RaisingTransport(httpx2.ConnectError("refused")),
                                   lambda: public_used.append(1) or RaisingTransport(RuntimeError("not here")))
    with caplog.at_level(logging.WARNING), pytest.raises(httpx2.ConnectError):
        await transport.handle_async_request(httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions"))
    assert not public_used and not [r for r in caplog.records if r.name == third_party.__name__]


class RaisingTransport(httpx2.AsyncBaseTransport):
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        raise self.exc


def test_the_build_time_fallback_serves_a_cached_model_on_several_loops(server, monkeypatch, caplog) -> None:
    """The private client cannot be built (another httpx/openai): the model gets the SDK's default client. A
    model is cached and served to every event loop (one per CLI command, per worker thread); against a server that
    keeps connections alive, the second loop's call must still be answered."""
    def refuse(self: Any, **kwargs: Any) -> None:
        raise RuntimeError("simulated drift")

    monkeypatch.setattr(LoopLocalAioHttpClient, "__init__", refuse)
    model = build_chat_model("gpt-4o-mini", base_url=server.base_url, timeout_s=5.0)
    with caplog.at_level(logging.WARNING):
        answers = ask(model, 3)
    assert server.posts == 3 and answers == ["a1", "a2", "a3"]
    one_warning(caplog, "httpx2", "AsyncClient._init_transport")
    assert not model.http_async_client.follow_redirects


# -- langchain's private names changed in ways that look valid ---------------------------------------------------
def test_a_provider_list_that_is_a_string_is_drift(monkeypatch, caplog) -> None:
    """``"openai" in "openai_like ..."`` would match parts of words: a str is not langchain's list."""
    from langchain.chat_models import base as chat_base

    monkeypatch.setattr(chat_base, "_BUILTIN_PROVIDERS", "openai anthropic qwen")
    with caplog.at_level(logging.WARNING):
        assert models.is_provider("openai") and not models.is_provider("qwen") and not models.is_provider("open")
    one_warning(caplog, "langchain", "chat_models.base._BUILTIN_PROVIDERS")


def test_a_generator_whose_sync_function_moved_is_said_once(server, monkeypatch, caplog) -> None:
    """``_transform`` renamed while ``_atransform`` is kept (a sync generator given both): LangChain's chain is
    used, and said; a generator that is async only (no sync function anywhere) is no drift."""
    init = RunnableGenerator.__init__

    def renamed(self: RunnableGenerator, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        moved = self.__dict__.pop("_transform", None)
        if moved is not None:
            self.__dict__["_transform_v2"] = moved

            async def atransform(input: Any) -> Any:  # noqa: A002 - LangChain's name
                async for item in input:
                    yield item

            self.__dict__.setdefault("_atransform", atransform)

    monkeypatch.setattr(RunnableGenerator, "__init__", renamed)
    model = build_chat_model("gpt-4o-mini", base_url=server.base_url, timeout_s=5.0)
    with caplog.at_level(logging.WARNING):
        runnable = structured_runnable(model, Verdict, {"include_raw": True, "method": "function_calling"})
        assert not isinstance(runnable, DirectStructured)
    one_warning(caplog, "langchain-core", "RunnableGenerator._transform")
