"""A model that cannot be reached stops the run at once, naming the model and its URL; retries and degradation
stay for models that have answered before; a run whose every model call failed is a failed run."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from kgagents.cli import main
from kgagents.core.config import ConfigurationError
from kgagents.core.retry import ModelUnavailableError, is_unreachable
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.llm import LLMCaller, LLMError
from kgagents.nodes.models import build_chat_model
from kgagents.tools.base import run_tool_with_retry
from kgagents.tools.manager import ToolEnv
from tests.fakes import closed_port, isolate_model_env
from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_model_env(monkeypatch, tmp_path)


class Answer(BaseModel):
    """The answer."""

    answer: str


#: Retries that would take minutes if they happened: a test that ends in seconds shows there were none.
SLOW_RETRIES = {"max_api_retries": 6, "api_backoff_base_s": 20.0, "api_backoff_max_s": 60.0}


@pytest.mark.slow
def test_a_wrong_base_url_stops_the_run_in_seconds_naming_the_model_and_url(tmp_path: Path, capsys) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"  # a typo in the port: nothing listens there
    code = main(["--runs-dir", str(tmp_path / "runs"), "ask", "What is 2 + 2?", "--model", "qwen2.5:7b",
                 "--base-url", url, "--thread", "typo", "--quiet",
                 *(f"--set={k}={v}" for k, v in SLOW_RETRIES.items())])
    err = capsys.readouterr().err
    assert code == 1  # stopped at once (the message below), not retried with SLOW_RETRIES' waits
    assert f"models: qwen2.5:7b at {url} (every role)" in err  # the start line
    assert f"model (qwen2.5:7b at {url}) cannot be used: the connection was refused" in err
    assert "kgagents resume typo" in err
    assert main(["--runs-dir", str(tmp_path / "runs"), "runs"]) == 0
    assert re.search(r"typo\s+kgot\s+failed", capsys.readouterr().out)


@pytest.mark.slow
async def test_an_unknown_host_is_fatal_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "models.example.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    model = build_chat_model("local-model", base_url="http://models.example.invalid:8000/v1", timeout_s=5.0)
    llm = LLMCaller(KGoTContext(model=model, **SLOW_RETRIES), "graph_executor")
    started = time.monotonic()
    with pytest.raises(ModelUnavailableError, match=r"local-model at http://models.example.invalid:8000/v1\) "
                                                    "cannot be used: the host name does not resolve"):
        await llm.structured("q", Answer)
    assert time.monotonic() - started < 30


@pytest.mark.slow
async def test_a_model_that_answered_before_is_retried_and_degraded_around(openai_server: FakeOpenAIServer):
    """A server that answered and then goes away (a restart): retried with backoff, then an LLMError the node
    degrades around, not a stopped run."""
    model = build_chat_model("gpt-4o-mini", base_url=openai_server.base_url, timeout_s=2.0)
    llm = LLMCaller(KGoTContext(model=model, max_api_retries=2, api_backoff_base_s=0.0, api_backoff_max_s=0.0),
                    "graph_executor")
    openai_server.reply("first")
    assert await llm.text("q") == "first"
    openai_server.stop()
    with pytest.raises(LLMError, match="after 3 attempt") as info:
        await llm.text("q again")
    assert not isinstance(info.value, ModelUnavailableError) and is_unreachable(info.value)


@pytest.mark.slow
def test_a_missing_key_refuses_before_any_call(monkeypatch: pytest.MonkeyPatch, capsys):
    with pytest.raises(ConfigurationError, match="needs ANTHROPIC_API_KEY"):
        build_chat_model("anthropic:claude-sonnet-4-5")
    with pytest.raises(ConfigurationError, match="needs OPENAI_API_KEY"):
        build_chat_model("openai:gpt-4o-mini")
    assert main(["ask", "q", "--model", "anthropic:claude-sonnet-4-5"]) == 2
    assert "needs ANTHROPIC_API_KEY" in capsys.readouterr().err
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    build_chat_model("anthropic:claude-sonnet-4-5")  # with the key: built (nothing is sent yet)


@pytest.mark.slow
async def test_the_tools_model_that_cannot_be_reached_stops_the_run_too(tmp_path: Path) -> None:
    """A tool's model call that cannot be reached is no tool error to retry six times: it stops the run."""
    from langchain_core.tools import StructuredTool

    model = build_chat_model("m", base_url=f"http://127.0.0.1:{closed_port()}/v1", timeout_s=2.0)
    env = ToolEnv(work_dir=tmp_path, llm=model, max_retries=6, backoff_base_s=20.0)

    async def ask(query: str) -> str:
        return str((await env.ask_llm(query)).content)

    tool = StructuredTool.from_function(coroutine=ask, name="llm_query", description="Ask the model.")
    started = time.monotonic()
    with pytest.raises(ModelUnavailableError, match=r"the tools' model \(m at http://127.0.0.1:"):
        await run_tool_with_retry(tool, {"query": "q"}, max_retries=6, backoff_base_s=20.0)
    assert time.monotonic() - started < 30


@pytest.mark.slow
def test_doctor_checks_the_endpoint_the_key_and_the_pieces(openai_server: FakeOpenAIServer,
                                                           monkeypatch: pytest.MonkeyPatch, capsys):
    openai_server.reply("OK")
    assert main(["doctor", "--model", "gpt-4o-mini", "--base-url", openai_server.base_url]) == 0
    out = capsys.readouterr().out
    assert f"ok       model (every role)     gpt-4o-mini at {openai_server.base_url}: answers a completion in " in out
    assert re.search(r"MISSING  tool ask_search_agent +missing key SERPAPI_API_KEY — without it: no web "
                     r"research", out)
    assert "sandbox" in out

    openai_server.api_key = "the-right-key"
    monkeypatch.setenv("KGAGENTS_BASE_URL", openai_server.base_url)  # the server the key goes to
    monkeypatch.setenv("KGAGENTS_API_KEY", "a-wrong-key")
    assert main(["doctor", "--model", "gpt-4o-mini", "--base-url", openai_server.base_url]) == 1
    out = capsys.readouterr().out
    assert "MISSING  model (every role)" in out and "rejected key — 401" in out
    monkeypatch.setenv("KGAGENTS_API_KEY", "the-right-key")
    assert main(["doctor", "--model", "no-such-model", "--base-url", openai_server.base_url]) == 1
    assert "does not list the model 'no-such-model'" in capsys.readouterr().out

    url = f"http://127.0.0.1:{closed_port()}/v1"
    monkeypatch.setenv("NEO4J_URI", f"bolt://127.0.0.1:{closed_port()}")
    assert main(["doctor", "--model", "m", "--base-url", url, "--timeout", "2"]) == 1
    out = capsys.readouterr().out
    assert f"m at {url}: connection refused" in out
    assert re.search(r"MISSING  NEO4J_URI .* cannot be reached .* without it: no the neo4j backend", out)


def test_what_a_run_cannot_do_is_said_at_its_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from kgagents.cli.preflight import run_limits

    [note] = run_limits("kgot", {})
    assert note.startswith("web search is off: no SERPAPI_API_KEY")
    assert run_limits("kgot", {"tools": ["llm_query"]}) == []  # a run without the search agent loses nothing
    monkeypatch.setenv("SERPAPI_API_KEY", "key")
    assert run_limits("kgot", {}) == [] and run_limits("fusion", {}) == []
    [crag] = run_limits("agent-g", {}, dataset="crag", graph=False)
    assert crag.startswith("CRAG's graph module is off: no CRAG_SERVER")
    assert run_limits("agent-g", {}, dataset="stark", graph=True) == []
    assert run_limits("agent-g", {"crag_api_url": "http://127.0.0.1:1"}, dataset="crag") == []
    monkeypatch.setenv("CRAG_SERVER", "http://127.0.0.1:1")
    assert run_limits("agent-g", {}, dataset="crag") == []
    [grader] = run_limits("grounded", {}, scorer="grbench", grader="none")
    assert "not graded" in grader and run_limits("grounded", {}, scorer="grbench", grader="openai:gpt-4o") == []


@pytest.mark.slow
def test_ask_says_at_its_start_that_web_search_is_off(tmp_path: Path, capsys) -> None:
    """The web search's key is missing: said before the run, not found in a trace."""
    main(["--runs-dir", str(tmp_path / "runs"), "ask", "q", "--model", "qwen", "--quiet",
          "--base-url", f"http://127.0.0.1:{closed_port()}/v1"])
    err = capsys.readouterr().err
    start = err.index("kgagents: web search is off: no SERPAPI_API_KEY")
    assert start < err.index("thread:")  # before the run starts


def test_doctor_checks_the_roles_of_every_papers_workflow(tmp_path, monkeypatch: pytest.MonkeyPatch, capsys):
    """A role only one workflow has (grounded's reasoner) is checked too, and the line says what it stops."""
    script = tmp_path / "script.json"
    script.write_text('{"steps": []}', encoding="utf-8")
    monkeypatch.setenv("KGAGENTS_MODEL", f"scripted:{script}")
    monkeypatch.setenv("KGAGENTS_REASONER_MODEL", "openai:gpt-4o-mini")
    for name in ("OPENAI_API_KEY", "KGAGENTS_API_KEY", "KGAGENTS_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["doctor", "--timeout", "1"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"MISSING  model \(grounded\) .*needs OPENAI_API_KEY.* — without it: no run of grounded", out)
    assert re.search(r"ok       model \(graph_executor, tool_executor, tools, ark_agent, agent_g\) .*in process", out)
    assert main(["doctor", "--workflow", "ark", "--timeout", "1"]) == 0  # ARK-V1 needs no reasoner
    assert re.search(r"ok       model \(every role\) +scripted", capsys.readouterr().out)
