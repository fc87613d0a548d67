"""``kgagents doctor`` asks every distinct model one real completion (and every named embedding model one embedding)
and names the kind of each failure, against a loopback OpenAI-compatible server that is down or wrong in each way."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kgagents.cli import main
from tests.fakes import closed_port, isolate_model_env
from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_model_env(monkeypatch, tmp_path)
    for name in ("NEO4J_URI", "FALKORDB_URL", "SPARQL_ENDPOINT", "CRAG_SERVER"):
        monkeypatch.delenv(name, raising=False)


def doctor(server: FakeOpenAIServer, *extra: str) -> int:
    return main(["doctor", "--workflow", "ark", "--model", "gpt-4o-mini", "--base-url", server.base_url,
                 "--timeout", "2", "--call-timeout", "3", *extra])


def model_line(out: str) -> str:
    return next(line for line in out.splitlines() if " model " in f" {line[9:]}")


@pytest.mark.parametrize(("kind", "named"), [
    ("500", "server error"),
    ("html", "malformed response"),
    ("broken_json", "malformed response"),
    ("empty", "malformed response"),
    ("silent", "timeout"),
])
def test_a_server_that_is_down_or_wrong_is_flagged_with_its_kind(openai_server: FakeOpenAIServer, capsys,
                                                                 kind: str, named: str) -> None:
    openai_server.always(kind)
    assert doctor(openai_server) == 1
    line = model_line(capsys.readouterr().out)
    assert line.startswith("MISSING  model (every role)"), line
    assert f"gpt-4o-mini at {openai_server.base_url}: {named} — " in line
    assert len(openai_server.chat_requests) <= 2  # at most one retry


def test_a_model_that_never_answers_a_completion_times_out(openai_server: FakeOpenAIServer, capsys) -> None:
    """The model list answers, the completion does not: the call's own limit ends it."""
    openai_server.hang(60)
    assert doctor(openai_server) == 1
    line = model_line(capsys.readouterr().out)
    assert line.startswith("MISSING") and ": timeout — the server is reachable" in line
    assert "did not answer a completion within 3 s" in line and "stuck" not in line
    assert len(openai_server.chat_requests) == 1  # a timeout is not sent again


def test_a_good_server_answers_one_completion_per_distinct_model(openai_server: FakeOpenAIServer,
                                                                 monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The six roles of the four papers' workflows on one model and endpoint: one completion; a role with another
    model on the same server: one more, on a line of its own."""
    openai_server.reply("OK")
    assert main(["doctor", "--model", "gpt-4o-mini", "--base-url", openai_server.base_url]) == 0
    line = model_line(capsys.readouterr().out)
    assert re.match(rf"ok +model \(every role\) +gpt-4o-mini at {re.escape(openai_server.base_url)}: answers a "
                    r"completion in \d+\.\d\d s$", line), line
    [request] = openai_server.chat_requests
    assert request.body["model"] == "gpt-4o-mini" and request.last_user_text == "Reply with OK."

    monkeypatch.setenv("KGAGENTS_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("KGAGENTS_REASONER_MODEL", "local-model")
    openai_server.reply("OK").reply("OK")
    assert main(["doctor", "--base-url", openai_server.base_url]) == 0
    out = capsys.readouterr().out
    assert len(openai_server.chat_requests) == 3
    assert {r.body["model"] for r in openai_server.chat_requests[1:]} == {"gpt-4o-mini", "local-model"}
    assert re.search(r"ok +model \(reasoner\) +local-model at .*: answers a completion in", out)
    assert re.search(r"ok +model \(graph_executor, tool_executor, tools, ark_agent, agent_g\) +gpt-4o-mini", out)


def test_a_rejected_key_and_a_refused_address_are_named_without_a_completion(openai_server: FakeOpenAIServer,
                                                                             monkeypatch, capsys) -> None:
    openai_server.api_key = "the-right-key"
    monkeypatch.setenv("KGAGENTS_API_KEY", "a-wrong-key")
    monkeypatch.setenv("KGAGENTS_BASE_URL", openai_server.base_url)  # the server the key goes to
    assert doctor(openai_server) == 1
    assert ": rejected key — 401 for its model list" in model_line(capsys.readouterr().out)
    assert openai_server.chat_requests == []

    url = f"http://127.0.0.1:{closed_port()}/v1"
    assert main(["doctor", "--workflow", "ark", "--model", "m", "--base-url", url, "--timeout", "2"]) == 1
    assert f"m at {url}: connection refused — " in model_line(capsys.readouterr().out)


def test_with_nothing_configured_it_says_what_to_set_with_examples(capsys) -> None:
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    first = model_line(out)
    assert first.startswith("MISSING  model ") and "set KGAGENTS_MODEL" in first
    assert "export OPENAI_API_KEY=sk-... KGAGENTS_MODEL=openai:gpt-4o-mini" in first  # the line alone says it
    assert "Set one of:" not in out
    for example in ("KGAGENTS_MODEL=anthropic:claude-sonnet-4-5", "KGAGENTS_MODEL=ollama:", "KGAGENTS_BASE_URL=http"):
        assert example in out
    assert out.count("No chat model is configured") == 1  # said once, not once per workflow


def test_an_openai_embedding_model_embeds_one_text(openai_server: FakeOpenAIServer, capsys) -> None:
    openai_server.reply("OK")
    args = ["doctor", "--workflow", "agent-g", "--model", "gpt-4o-mini", "--base-url", openai_server.base_url,
            "--set", "embedding_model=openai:text-embedding-3-small",
            "--set", f"embedding_base_url={openai_server.base_url}", "--timeout", "2", "--call-timeout", "3"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert re.search(rf"ok +embedder \(agent-g's embedding_model\) openai:text-embedding-3-small at "
                     rf"{re.escape(openai_server.base_url)}: embeds a text in \d+\.\d\d s", out), out
    [request] = openai_server.embedding_requests
    assert request.body["model"] == "text-embedding-3-small"

    openai_server.always("500")
    assert main(args) == 1
    out = capsys.readouterr().out
    assert re.search(r"MISSING  embedder \(agent-g's embedding_model\) .*: server error — .* without it: no run of "
                     r"agent-g with it", out), out
    assert len(openai_server.embedding_requests) == 3  # the first, and one more for the 500


def test_a_setting_or_preset_that_no_workflow_has_is_refused(capsys) -> None:
    assert main(["doctor", "--workflow", "kgot", "--set", "embedding_model=x"]) == 2
    assert "--set embedding_model: no setting of that name" in capsys.readouterr().err
    assert main(["doctor", "--workflow", "kgot", "--preset", "paper-crag"]) == 2
    assert "has a preset 'paper-crag'" in capsys.readouterr().err


@pytest.mark.slow
def test_a_local_embedding_model_is_loaded_and_embeds(tmp_path: Path, capsys) -> None:
    """The packaged all-MiniLM-L6-v2 loads offline; a path with no model is flagged."""
    script = tmp_path / "script.json"
    script.write_text('{"steps": []}', encoding="utf-8")
    base = ["doctor", "--workflow", "grounded", "--model", f"scripted:{script}", "--set"]
    assert main([*base, "embedding_model=all-MiniLM-L6-v2"]) == 0
    assert re.search(r"ok +embedder \(grounded's embedding_model\) all-MiniLM-L6-v2: loads and embeds a text in "
                     r"\d+\.\d\d s \(dimension 384\)", capsys.readouterr().out)
    missing = tmp_path / "no-model-here"
    missing.mkdir()
    assert main([*base, f"embedding_model={missing}"]) == 1
    assert re.search(r"MISSING  embedder \(grounded's embedding_model\) .*no-model-here: cannot be loaded here",
                     capsys.readouterr().out)
