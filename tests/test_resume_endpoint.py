"""A run or an evaluation that stopped because its model's address was wrong continues at the corrected one
(``resume THREAD --base-url URL``, ``eval ... --retry-failed --base-url URL``), and the move is recorded; another
model is refused with what to do instead: it would change what the run means."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgagents.cli import main
from kgagents.core.endpoint_change import (
    address_change,
    model_change_refusal,
    model_changes,
    run_models,
    same_but_address,
    same_model,
)
from kgagents.core.runs import RunRegistry
from tests import kgot_script as S
from tests.evals.test_cli_eval import GRADER, simpleqa_csv
from tests.fakes import closed_port, isolate_model_env
from tests.fakes.faults import fault_server_fixture  # noqa: F401
from tests.fakes.openai_server import FakeOpenAIServer, FaultPolicy, script_responder
from tests.test_kgot_faults import QUESTION, STEPS

MODEL = "openai:gpt-4o-mini"
#: No waits between tries: a test that ends shows nothing was retried for minutes.
FAST = ["--set=llm_timeout_s=5", "--set=max_api_retries=1", "--set=api_backoff_base_s=0.001",
        "--set=api_backoff_max_s=0.01", "--set=tool_backoff_base_s=0.001", "--set=tool_backoff_max_s=0.01"]


def test_the_same_model_at_another_address_is_no_change_of_model() -> None:
    assert same_model("openai:qwen2.5:7b", "qwen2.5:7b") and same_model("m", "m")
    assert not same_model("openai:gpt-4o", "gpt-4o-mini") and not same_model("anthropic:m", "m")
    assert not same_model("m", None) and same_model(None, None)
    started = run_models({"model": "a", "tools_model": "t"}, ("graph_executor", "tools"), {})
    assert started == {"graph_executor": "a", "tools": "t"}
    assert run_models({}, ("graph_executor",), {"graph_executor": "env"}) == {"graph_executor": "env"}
    assert model_changes(started, {"graph_executor": "openai:a", "tools": "t"}) == {}
    assert model_changes(started, {"graph_executor": "b", "tools": "t"}) == {"graph_executor": ("a", "b")}
    assert model_changes({"graph_executor": None}, {"graph_executor": "b"}) == {}  # nothing known: any
    assert model_changes({"graph_executor": "a"}, {"graph_executor": None}) == {}  # none configured: said later
    assert address_change({"base_url": "http://a/v1"}, {"base_url": "http://b/v1"}) == {
        "base_url": ("http://a/v1", "http://b/v1")}
    assert address_change({"base_url": "http://a/v1", "model": "x"}, {"base_url": "http://a/v1"}) == {}


def test_a_results_folder_moves_to_another_address_but_not_to_another_model() -> None:
    old = {"graph_executor": "m", "tools": "m", "base_url": "http://127.0.0.1:1/v1"}
    assert same_but_address(old, {**old, "base_url": "http://127.0.0.1:2/v1"}, models=True)
    assert same_but_address(old, {**old, "graph_executor": "openai:m"}, models=True)
    assert not same_but_address(old, {**old, "tools": "other"}, models=True)
    context = {"model": "m", "c_max": 3, "base_url": "http://127.0.0.1:1/v1"}
    assert same_but_address(context, {"model": "openai:m", "c_max": 3})
    assert not same_but_address(context, {**context, "c_max": 4})
    assert not same_but_address({"backend": "m"}, {"backend": "openai:m"})  # not a model: compared as it is
    message = model_change_refusal("t", "kgot", {"graph_executor": ("a", "b"), "tools": ("a", "b")}, given=True)
    assert "graph_executor, tools: a -> b" in message and "change what the run means" in message
    assert "kgagents ask QUESTION --workflow kgot --model b" in message


def ask(runs: Path, thread: str, base_url: str, *args: str) -> int:
    return main(["--runs-dir", str(runs), "ask", QUESTION, "--model", MODEL, "--base-url", base_url, "--thread",
                 thread, "--max-iterations", "1", "--quiet", *FAST, *args])


@pytest.mark.slow
def test_a_run_stopped_at_a_wrong_base_url_resumes_at_the_corrected_one(fault_server: FakeOpenAIServer,
                                                                        tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    fault_server.answer_with(FaultPolicy(script_responder(STEPS), rate=0.0))
    runs, wrong = tmp_path / "runs", f"http://127.0.0.1:{closed_port()}/v1"
    assert ask(runs, "moved", wrong) == 1
    err = capsys.readouterr().err
    assert f"at {wrong}) cannot be used" in err and "kgagents resume moved" in err and "--base-url URL" in err

    # another model is another run: refused, nothing sent, the run unchanged
    assert main(["--runs-dir", str(runs), "resume", "moved", "--model", "openai:gpt-4o",
                 "--base-url", fault_server.base_url]) == 2
    err = capsys.readouterr().err
    assert "would change what the run means" in err and f"{MODEL} -> openai:gpt-4o" in err
    assert "Start a new run with that model (kgagents ask QUESTION --workflow kgot --model openai:gpt-4o)" in err
    assert not fault_server.chat_requests and RunRegistry(runs).get("moved").changes == []

    # a flag resume does not take says what it does take (not another workflow's settings)
    assert main(["--runs-dir", str(runs), "resume", "moved", "--c-max", "3"]) == 2
    assert "resume takes --base-url URL and --model" in capsys.readouterr().err

    # the same model (spelt bare, as an OpenAI-compatible server's) at the right address: the run finishes
    assert main(["--runs-dir", str(runs), "resume", "moved", "--base-url", fault_server.base_url,
                 "--model", "gpt-4o-mini", "--quiet"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == "65"
    assert f"resume: base_url {wrong} -> {fault_server.base_url}" in out.err and "recorded in the run" in out.err
    record = RunRegistry(runs).get("moved")
    assert record.status == "done" and record.own
    assert record.context["base_url"] == fault_server.base_url and record.context["model"] == "gpt-4o-mini"
    assert [change["base_url"] for change in record.changes] == [[wrong, fault_server.base_url]]
    assert record.models["graph_executor"] == MODEL  # what the run started with

    assert main(["--runs-dir", str(runs), "show", "moved"]) == 0
    shown = capsys.readouterr().out
    assert "Changed on resume:" in shown and f"base_url {wrong} -> {fault_server.base_url}" in shown
    assert f"model {MODEL} -> gpt-4o-mini" in shown


@pytest.mark.slow
def test_an_evaluation_stopped_at_a_wrong_base_url_retries_at_the_corrected_one(
        fault_server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fault_server.answer_with(FaultPolicy(script_responder([
        S.step(GRADER, times=0, content="A"), S.step("general AI assistant", times=0, content="FINAL ANSWER: Paris"),
    ]), rate=0.0))
    data, out = simpleqa_csv(tmp_path / "simpleqa.csv"), tmp_path / "zs"
    wrong = f"http://127.0.0.1:{closed_port()}/v1"

    def evaluate(*args: str) -> int:
        return main(["eval", "zeroshot", "--dataset", "simpleqa", "--data", str(data), "--out", str(out),
                     "--no-progress", "--no-report", *FAST, *args])

    assert evaluate("--model", MODEL, "--base-url", wrong) == 1
    err = capsys.readouterr().err
    assert "cannot be used" in err and "--retry-failed (and --base-url URL" in err
    assert all(r["error"] for r in map(json.loads, (out / "results.jsonl").read_text().splitlines()))

    # another model is another evaluation: refused before anything runs
    assert evaluate("--model", "openai:gpt-4o", "--base-url", fault_server.base_url, "--retry-failed") == 2
    err = capsys.readouterr().err
    assert "another model makes it another evaluation" in err and not fault_server.chat_requests

    assert evaluate("--model", MODEL, "--base-url", fault_server.base_url, "--retry-failed") == 0
    err = capsys.readouterr().err
    assert f"goes on with its model at another address: base_url {wrong} -> {fault_server.base_url}" in err
    latest = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert len(latest) == 3 and not any(r["error"] for r in latest.values())
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["models"]["base_url"] == fault_server.base_url
    assert [change["base_url"] for change in manifest["changes"]] == [[wrong, fault_server.base_url]]


@pytest.mark.slow
def test_a_run_whose_configuration_names_another_model_now_is_not_resumed_with_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    isolate_model_env(monkeypatch, tmp_path)
    runs = tmp_path / "runs"
    monkeypatch.setenv("KGAGENTS_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    monkeypatch.setenv("KGAGENTS_MODEL", "first-model")
    assert main(["--runs-dir", str(runs), "ask", "q", "--workflow", "zeroshot", "--thread", "env", "--quiet",
                 *FAST]) == 1
    monkeypatch.setenv("KGAGENTS_MODEL", "second-model")
    assert main(["--runs-dir", str(runs), "resume", "env", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "was started with first-model, and your configuration now names second-model" in err
    assert "kgagents resume env --model first-model" in err
    # naming its own model resumes it (at the same wrong address: it stops again, resumable)
    assert main(["--runs-dir", str(runs), "resume", "env", "--model", "first-model", "--quiet"]) == 1
    assert "first-model at http://127.0.0.1:" in capsys.readouterr().err
