"""Choosing chat models per role: context, environment, a local Ollama server, or a clear configuration error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_ollama import ChatOllama
from langchain_openai import ChatOpenAI

from kgagents.core.config import ROLES, ConfigurationError, get_settings, ollama_url
from kgagents.core.scripted import ScriptedChatModel
from kgagents.core.trust import trust_folder
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.llm import LLMCaller, LLMError
from kgagents.nodes.models import build_chat_model, configured_model_string, model_label, resolve_model
from tests.fakes import closed_port, isolate_model_env
from tests.fakes.ollama_server import FakeOllamaServer
from tests.fakes.openai_server import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]
ROLE_VARIABLES = ["KGAGENTS_GRAPH_EXECUTOR_MODEL", "KGAGENTS_TOOL_EXECUTOR_MODEL", "KGAGENTS_TOOLS_MODEL"]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_model_env(monkeypatch, tmp_path)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"name": "tiny", "steps": [{"content": "scripted hello", "times": 0}]}))
    return path


def scripted(name: str) -> ScriptedChatModel:
    return ScriptedChatModel(steps=[{"content": name, "times": 0}], model_name=name)


# --------------------------------------------------------------------------------------------------
# resolution order


def test_context_instance_beats_everything(monkeypatch: pytest.MonkeyPatch, script: Path) -> None:
    monkeypatch.setenv("KGAGENTS_MODEL", f"scripted:{script}")
    monkeypatch.setenv("KGAGENTS_GRAPH_EXECUTOR_MODEL", f"scripted:{script}")
    given = scripted("given")
    assert resolve_model(KGoTContext(model=given), "graph_executor") is given
    # a role's own instance beats the context's default, whether that is an instance or a string
    role = scripted("role")
    assert resolve_model(KGoTContext(model=given, graph_executor_model=role), "graph_executor") is role
    assert resolve_model(KGoTContext(model=given, graph_executor_model=role), "tool_executor") is given
    assert resolve_model(KGoTContext(model=f"scripted:{script}", tools_model=role), "tools") is role


def test_context_string_beats_the_environment(monkeypatch: pytest.MonkeyPatch, script: Path) -> None:
    monkeypatch.setenv("KGAGENTS_MODEL", "openai:gpt-4o")
    monkeypatch.setenv("KGAGENTS_GRAPH_EXECUTOR_MODEL", "anthropic:claude-sonnet-4-5")
    ctx = KGoTContext(model=f"scripted:{script}")
    for role in ROLES:
        assert configured_model_string(role, ctx) == f"scripted:{script}"
    ctx = KGoTContext(model="openai:gpt-4o-mini", tool_executor_model="openai:gpt-4.1-nano")
    assert configured_model_string("graph_executor", ctx) == "openai:gpt-4o-mini"
    assert configured_model_string("tool_executor", ctx) == "openai:gpt-4.1-nano"


def test_role_override_beats_kgagents_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGAGENTS_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("KGAGENTS_TOOL_EXECUTOR_MODEL", "openai:gpt-4.1-mini")
    monkeypatch.setenv("KGAGENTS_TOOLS_MODEL", "ollama:llama3.2")
    assert configured_model_string("graph_executor") == "openai:gpt-4o-mini"
    assert configured_model_string("graph_executor", KGoTContext()) == "openai:gpt-4o-mini"
    assert configured_model_string("tool_executor", KGoTContext()) == "openai:gpt-4.1-mini"
    assert configured_model_string("tools", KGoTContext()) == "ollama:llama3.2"


def test_role_override_alone_is_enough_for_that_role(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGAGENTS_GRAPH_EXECUTOR_MODEL", "openai:gpt-4o")
    assert configured_model_string("graph_executor") == "openai:gpt-4o"
    with pytest.raises(ConfigurationError):
        configured_model_string("tools")


def test_blank_variables_count_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGAGENTS_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("KGAGENTS_GRAPH_EXECUTOR_MODEL", "   ")
    assert configured_model_string("graph_executor") == "openai:gpt-4o-mini"


def test_kgagents_model_beats_a_running_ollama(monkeypatch: pytest.MonkeyPatch,
                                               ollama_server: FakeOllamaServer) -> None:
    monkeypatch.setenv("OLLAMA_HOST", ollama_server.url)
    monkeypatch.setenv("KGAGENTS_MODEL", "openai:gpt-4o-mini")
    assert configured_model_string("graph_executor") == "openai:gpt-4o-mini"
    assert ollama_server.requests == []  # not even asked


def test_unknown_role_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown model role"):
        get_settings().model_for("planner")


# --------------------------------------------------------------------------------------------------
# nothing configured


def test_nothing_configured_names_the_variables() -> None:
    with pytest.raises(ConfigurationError) as info:
        resolve_model(KGoTContext(), "graph_executor")
    message = str(info.value)
    for name in ["KGAGENTS_MODEL", "KGAGENTS_BASE_URL", "KGAGENTS_API_KEY", "OPENAI_API_KEY", *ROLE_VARIABLES]:
        assert name in message
    assert ".env" in message


def test_dotenv_in_the_working_directory_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import kgagents.core.config

    monkeypatch.delenv("KGAGENTS_NO_DOTENV")
    monkeypatch.setattr(kgagents.core.config, "_dotenv_loaded", False)  # read once per process: once more here
    monkeypatch.setenv("KGAGENTS_TOOLS_MODEL", "openai:from-environment")
    (tmp_path / ".env").write_text("KGAGENTS_MODEL=openai:from-dotenv\nKGAGENTS_TOOLS_MODEL=openai:from-dotenv\n")
    monkeypatch.setattr(os, "environ", dict(os.environ))  # load_dotenv writes here; keep it to this test
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError):  # a folder's .env is read only once the user trusts the folder
        configured_model_string("graph_executor")
    trust_folder(tmp_path)
    monkeypatch.setattr(kgagents.core.config, "_dotenv_loaded", False)
    assert configured_model_string("graph_executor") == "openai:from-dotenv"
    assert configured_model_string("tools") == "openai:from-environment"  # real variables win


# --------------------------------------------------------------------------------------------------
# Ollama auto-detection


async def test_ollama_is_used_when_nothing_else_is_configured(monkeypatch: pytest.MonkeyPatch,
                                                              ollama_server: FakeOllamaServer) -> None:
    monkeypatch.setenv("OLLAMA_HOST", ollama_server.url)
    ollama_server.replies.append("hello from ollama")

    assert configured_model_string("graph_executor", KGoTContext()) == "ollama:qwen2.5:7b"
    model = resolve_model(KGoTContext(), "graph_executor")
    assert isinstance(model, ChatOllama)
    assert model.model == "qwen2.5:7b" and model.base_url == ollama_server.url

    llm = LLMCaller(KGoTContext(), "tool_executor")
    assert await llm.text("hi") == "hello from ollama"
    assert llm.usage == {"qwen2.5:7b": {"calls": 1, "input_tokens": 9, "output_tokens": 3, "cost_usd": None}}
    chat = [body for method, path, body in ollama_server.requests if path == "/api/chat"]
    assert chat and chat[0]["model"] == "qwen2.5:7b"
    assert chat[0]["messages"][-1]["content"] == "hi"


def test_ollama_host_without_a_scheme(monkeypatch: pytest.MonkeyPatch, ollama_server: FakeOllamaServer) -> None:
    """Ollama's own tools accept OLLAMA_HOST=host:port; so do we."""
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{ollama_server.port}")
    assert configured_model_string("graph_executor") == "ollama:qwen2.5:7b"
    model = resolve_model(KGoTContext(), "graph_executor")
    assert model.base_url == ollama_server.url  # type: ignore[attr-defined]


def test_ollama_url_forms() -> None:
    assert ollama_url("127.0.0.1") == "http://127.0.0.1:11434"
    assert ollama_url("localhost:1234") == "http://localhost:1234"
    assert ollama_url("http://10.0.0.2:11434/") == "http://10.0.0.2:11434"
    assert ollama_url("https://ollama.example.com") == "https://ollama.example.com"


def test_ollama_embedding_models_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOllamaServer(models=["nomic-embed-text:latest", "llama3.2:3b"]) as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        assert configured_model_string("tools") == "ollama:llama3.2:3b"


@pytest.mark.parametrize("models", [[], ["mxbai-embed-large"]])
def test_ollama_without_a_chat_model_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch,
                                                              models: list[str]) -> None:
    with FakeOllamaServer(models=models) as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        with pytest.raises(ConfigurationError, match="KGAGENTS_MODEL"):
            configured_model_string("graph_executor")


def test_something_else_on_the_ollama_port_is_not_ollama(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAIServer() as other:  # answers 404 to /api/tags
        monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{other.port}")
        with pytest.raises(ConfigurationError, match="KGAGENTS_MODEL"):
            configured_model_string("graph_executor")


def test_closed_ollama_port_is_quick(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{closed_port()}")
    start = time.monotonic()
    with pytest.raises(ConfigurationError):
        configured_model_string("graph_executor")
    assert time.monotonic() - start < 2


# --------------------------------------------------------------------------------------------------
# model strings


def test_bare_model_name_without_base_url_is_a_clear_error() -> None:
    with pytest.raises(ConfigurationError) as info:
        resolve_model(KGoTContext(model="gpt-4o-mini"), "graph_executor")
    message = str(info.value)
    assert "provider:model" in message and "openai:gpt-4o-mini" in message and "KGAGENTS_BASE_URL" in message


def test_bare_model_name_with_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGAGENTS_BASE_URL", "http://127.0.0.1:8000/v1")
    model = resolve_model(KGoTContext(model="meta-llama/Llama-3.1-8B-Instruct", llm_timeout_s=7), "graph_executor")
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "meta-llama/Llama-3.1-8B-Instruct"
    assert model.openai_api_base == "http://127.0.0.1:8000/v1"
    assert model.max_retries == 0 and model.request_timeout.read == 7
    assert model.request_timeout.connect == 7  # llm_connect_timeout_s (10), never past the call's own limit
    assert model.openai_api_key.get_secret_value() == "not-needed"  # type: ignore[union-attr]
    # the context's base_url wins over the environment's
    other = resolve_model(KGoTContext(model="m", base_url="http://127.0.0.1:9000/v1"), "tools")
    assert other.openai_api_base == "http://127.0.0.1:9000/v1"  # type: ignore[attr-defined]


def test_api_key_from_kgagents_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGAGENTS_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("KGAGENTS_API_KEY", "first")
    first = build_chat_model("m")
    monkeypatch.setenv("KGAGENTS_API_KEY", "second")
    second = build_chat_model("m")
    assert first.openai_api_key.get_secret_value() == "first"  # type: ignore[attr-defined]
    assert second.openai_api_key.get_secret_value() == "second"  # type: ignore[attr-defined]


@pytest.mark.slow
def test_provider_model_through_init_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = resolve_model(KGoTContext(model="openai:gpt-4o-mini", temperature=0.2), "graph_executor")
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o-mini" and model.temperature == 0.2 and model.max_retries == 0
    assert model_label(model) == "gpt-4o-mini"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    claude = resolve_model(KGoTContext(model="anthropic:claude-sonnet-4-5"), "tools")
    assert type(claude).__name__ == "ChatAnthropic" and model_label(claude) == "claude-sonnet-4-5"


def test_models_are_shared_within_a_process_but_not_across_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    a = build_chat_model("openai:gpt-4o-mini", timeout_s=5)
    assert build_chat_model("openai:gpt-4o-mini", timeout_s=5) is a
    assert build_chat_model("openai:gpt-4o-mini", timeout_s=6) is not a
    assert build_chat_model("openai:gpt-4o-mini", timeout_s=5, temperature=0.0) is not a


@pytest.mark.slow
async def test_the_context_seed_reaches_providers_that_take_one(monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    server = FakeOpenAIServer()
    server.start()
    try:
        server.reply("a")
        server.reply("b")
        seeded = resolve_model(KGoTContext(model="gpt-4o-mini", base_url=server.base_url, seed=7), "graph_executor")
        assert seeded.seed == 7  # type: ignore[attr-defined]
        assert resolve_model(KGoTContext(model="gpt-4o-mini", base_url=server.base_url, seed=8), "tools") is not seeded
        await LLMCaller(KGoTContext(model="gpt-4o-mini", base_url=server.base_url, seed=7), "tools").text("hi")
        await LLMCaller(KGoTContext(model="gpt-4o-mini", base_url=server.base_url), "tools").text("hi")
        assert [r.body.get("seed") for r in server.requests if r.path.endswith("/chat/completions")] == [7, None]
    finally:
        server.stop()
    assert isinstance(build_chat_model("ollama:qwen2.5:7b", seed=3), ChatOllama)
    assert build_chat_model("ollama:qwen2.5:7b", seed=3).seed == 3  # type: ignore[attr-defined]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with caplog.at_level("WARNING", logger="kgagents.nodes.models"):
        build_chat_model("anthropic:claude-sonnet-4-5", seed=3)   # no seed parameter: built without, and said
    assert "'anthropic' takes no sampling seed" in caplog.text


def test_provider_without_its_key_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="openai:gpt-4o-mini"):
        resolve_model(KGoTContext(model="openai:gpt-4o-mini"), "graph_executor")


def test_unknown_provider_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="nosuchprovider:model"):
        build_chat_model("nosuchprovider:model")


def test_scripted_model_string(script: Path) -> None:
    model = resolve_model(KGoTContext(model=f"scripted:{script}"), "graph_executor")
    assert isinstance(model, ScriptedChatModel) and isinstance(model, BaseChatModel)
    assert model.invoke("hi").content == "scripted hello"
    assert model.script_name == "tiny"


async def test_scripted_model_through_the_llm_layer(script: Path) -> None:
    llm = LLMCaller(KGoTContext(model=f"scripted:{script}"), "tools")
    assert await llm.text("hi") == "scripted hello"
    assert llm.usage["scripted"]["calls"] == 1


async def test_scripted_model_with_a_missing_file_names_it(tmp_path: Path) -> None:
    llm = LLMCaller(KGoTContext(model=f"scripted:{tmp_path / 'nope.json'}", max_api_retries=0), "graph_executor")
    with pytest.raises(LLMError, match=r"nope.json"):  # the script is read on the first call
        await llm.text("hi")


def test_context_from_a_mapping_takes_strings() -> None:
    ctx = KGoTContext.from_mapping({"model": "openai:gpt-4o-mini", "tools_model": "ollama:llama3.2"})
    assert configured_model_string("tools", ctx) == "ollama:llama3.2"
    with pytest.raises(ValueError, match="unknown context field"):
        KGoTContext.from_mapping({"modle": "x"})


# --------------------------------------------------------------------------------------------------
# the command line stops at once without a model


def _clean_env(tmp_path: Path) -> dict[str, str]:
    keep = {"PATH", "HOME", "LANG", "LC_ALL", "SYSTEMROOT", "TMPDIR"}
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update({"OLLAMA_HOST": f"http://127.0.0.1:{closed_port()}", "PYTHONPATH": str(REPO),
                "KGAGENTS_RUNS_DIR": str(tmp_path / "runs"), "PYTHONDONTWRITEBYTECODE": "1"})
    return env


@pytest.mark.slow
def test_cli_ask_without_a_model_exits_2_with_the_variables(tmp_path: Path) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    proc = subprocess.run([sys.executable, "-m", "kgagents.cli", "ask", "What is 2 + 2?"], cwd=work,
                          env=_clean_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert "KGAGENTS_MODEL" in proc.stderr
    for name in ROLE_VARIABLES:
        assert name in proc.stderr
    assert proc.stdout == ""
    assert not (tmp_path / "runs").exists()  # stopped before starting a run


@pytest.mark.slow
def test_cli_ask_with_a_bare_model_and_no_base_url_exits_2(tmp_path: Path) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    env = {**_clean_env(tmp_path), "KGAGENTS_MODEL": "gpt-4o-mini"}
    proc = subprocess.run([sys.executable, "-m", "kgagents.cli", "ask", "q"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "KGAGENTS_BASE_URL" in proc.stderr


@pytest.mark.slow
async def test_a_node_finds_the_local_ollama_off_the_event_loop_once(monkeypatch: pytest.MonkeyPatch,
                                                                    ollama_server: FakeOllamaServer) -> None:
    import threading

    import kgagents.core.config
    import kgagents.nodes.models

    monkeypatch.setenv("OLLAMA_HOST", ollama_server.url)
    ollama_server.replies.extend(["first", "second"])
    probes: list[str] = []
    real = kgagents.core.config.ollama_available

    def probe(url: str, *args, **kwargs) -> bool:
        probes.append(threading.current_thread().name)
        return real(url, *args, **kwargs)

    monkeypatch.setattr(kgagents.nodes.models, "ollama_available", probe)
    llm = LLMCaller(KGoTContext(), "graph_executor")  # resolves nothing yet
    assert probes == []
    assert await llm.text("hi") == "first"
    assert len(probes) == 1 and probes[0] != threading.current_thread().name  # in a worker thread
    again = LLMCaller(KGoTContext(), "tool_executor")
    assert await again.text("hi") == "second" and len(probes) == 1  # found once per process
    assert isinstance(again.model, ChatOllama) and again.label == "qwen2.5:7b"


async def test_nothing_configured_fails_at_the_first_call_with_the_variables_to_set() -> None:
    llm = LLMCaller(KGoTContext(), "graph_executor")
    with pytest.raises(ConfigurationError, match="KGAGENTS_MODEL"):
        await llm.text("hi")


def test_settings_are_read_again_when_a_variable_they_read_changes(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("KGAGENTS_MODEL", "openai:first")
    first = get_settings()
    assert get_settings() is first  # nothing changed: the same snapshot
    monkeypatch.setenv("KGAGENTS_MODEL", "openai:second")
    assert get_settings().model == "openai:second"
    monkeypatch.setenv("KGAGENTS_TOOLS_MODEL", "openai:tools")
    assert get_settings().model_for("tools") == "openai:tools"
    monkeypatch.delenv("KGAGENTS_TOOLS_MODEL")
    assert get_settings().model_for("tools") == "openai:second"
    monkeypatch.setenv("KGAGENTS_FILE_ROOTS", "~/data")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert get_settings().file_roots == (tmp_path / "data",)
    monkeypatch.setenv("HOME", str(tmp_path / "other"))  # ``~`` follows HOME
    assert get_settings().file_roots == (tmp_path / "other" / "data",)


def test_openai_compatible_models_are_the_openai_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from kgagents.nodes.openai_chat import OpenAIChatModel

    model = build_chat_model("openai:gpt-4o-mini", base_url="http://127.0.0.1:1/v1", temperature=0.1, timeout_s=3.0,
                             seed=5)
    assert isinstance(model, OpenAIChatModel) and isinstance(model, ChatOpenAI)
    assert (model.model_name, model.temperature, model.request_timeout, model.seed, model.max_retries) == \
        ("gpt-4o-mini", 0.1, 3.0, 5, 0)
