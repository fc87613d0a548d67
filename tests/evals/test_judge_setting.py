"""The LLM grader is one setting (:mod:`kgagents.evals.judges`): the start line names it with its server, the start
refuses one that cannot judge, ``--estimate`` prices it, and its requests go to the server configured for it —
never to the run's ``KGAGENTS_BASE_URL`` under another model's name. Judged on the fake OpenAI server."""

from __future__ import annotations

import json

import pytest

from kgagents.cli import main
from kgagents.evals.judges import Judge, judge_endpoint, judge_of, judge_problem
from tests.fakes.openai_server import FakeOpenAIServer

RUN = {"name": "run", "steps": [{"when": r"Dolica DC-BP511", "times": 0, "content": "Dolica"}]}


def eval_args(tmp_path, *extra):
    script = tmp_path / "run.json"
    script.write_text(json.dumps(RUN), encoding="utf-8")
    return ["eval", "base", "--dataset", "grbench-fixture", "--domain", "amazon", "--ids", "amazon-0", "--model",
            f"scripted:{script}", "--set", "max_api_retries=0", "--out", str(tmp_path / "out"), "--no-progress",
            "--no-report", *extra]


@pytest.fixture
def no_keys(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "KGAGENTS_BASE_URL", "KGAGENTS_API_KEY",
                 "KGAGENTS_GRADER_BASE_URL", "KGAGENTS_GRADER_API_KEY", "KGAGENTS_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_gpt4score_s_judge_goes_to_its_own_server_with_its_own_key_never_to_the_run_s(tmp_path, capsys, no_keys):
    with FakeOpenAIServer(api_key="local-key") as local, FakeOpenAIServer(api_key="judge-key") as judge:
        judge.reply("Yes")
        judge_url = judge.base_url
        no_keys.setenv("KGAGENTS_BASE_URL", local.base_url)
        no_keys.setenv("KGAGENTS_API_KEY", "local-key")
        no_keys.setenv("KGAGENTS_GRADER_BASE_URL", judge.base_url)
        no_keys.setenv("KGAGENTS_GRADER_API_KEY", "judge-key")
        code = main(eval_args(tmp_path))
        err = capsys.readouterr().err
        assert code == 0, err[-2000:]
        assert f"grader openai:gpt-4o at {judge.base_url}" in err
        assert local.requests == []  # the run's server never sees the judge
        [request] = judge.chat_requests
        assert request.body["model"] == "gpt-4o" and request.headers.get("authorization") == "Bearer judge-key"
    [record] = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert record["details"]["gpt4score"] == 1 and record["grade"] == "YES"
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["judge"] == f"openai:gpt-4o at {judge_url}"


def test_a_judge_without_its_key_is_refused_at_the_start_not_left_not_judged(tmp_path, capsys, no_keys):
    with FakeOpenAIServer() as local:
        no_keys.setenv("KGAGENTS_BASE_URL", local.base_url)
        code = main(eval_args(tmp_path))
        err = capsys.readouterr().err
        assert code != 0 and "the grader openai:gpt-4o at https://api.openai.com/v1 needs OPENAI_API_KEY" in err, \
            err[-2000:]
        assert local.requests == [] and not (tmp_path / "out" / "results.jsonl").exists()


def test_the_estimate_prices_the_judge_not_the_run_s_model(tmp_path, capsys, no_keys):
    assert main(eval_args(tmp_path, "--estimate")) == 0
    out = capsys.readouterr().out
    assert "grader (openai:gpt-4o):" in out, out


def test_where_a_judge_sends():
    env = {"KGAGENTS_BASE_URL": "http://127.0.0.1:8000/v1"}
    # a provider's model goes to its provider's API, not to the run's local server
    assert judge_of("grbench", None, "local-model", env=env) == Judge("openai:gpt-4o", "https://api.openai.com/v1")
    assert judge_of("grbench", None, "m", env={**env, "OPENAI_BASE_URL": "http://proxy/v1"}).base_url == \
        "http://proxy/v1"
    # the run's own model goes where the run's goes; a bare name to the OpenAI-compatible server
    assert judge_of("simpleqa", None, "openai:gpt-4o-mini", env=env) == Judge("openai:gpt-4o-mini",
                                                                            "http://127.0.0.1:8000/v1")
    assert judge_of("simpleqa", None, "openai:gpt-4o-mini", run_base_url="http://h:1/v1", env=env).base_url == \
        "http://h:1/v1"
    assert judge_of("crag", "qwen2.5:7b", "m", env=env).base_url == "http://127.0.0.1:8000/v1"
    # the grader's own server wins; Anthropic, Ollama and scripted models go where their settings say
    assert judge_of("grbench", None, "m", grader_base_url="http://j/v1", env=env).base_url == "http://j/v1"
    assert judge_of("grbench", None, "m", env={**env, "KGAGENTS_GRADER_BASE_URL": "http://g/v1"}).base_url == \
        "http://g/v1"
    assert judge_of("grbench", "anthropic:claude-3-sonnet", "m", env=env).base_url is None
    assert judge_of("grbench", "none", "m", env=env) == Judge(None, None)
    assert judge_of("gaia", "openai:gpt-4o", "m", env=env) is None
    assert judge_endpoint(object(), is_run_model=False, run_base_url=None, grader_base_url="http://j/v1",
                          env=env) is None


def test_a_judge_on_openai_s_api_needs_a_key_bound_there():
    judge = Judge("openai:gpt-4o", "https://api.openai.com/v1")
    assert "needs OPENAI_API_KEY" in judge_problem(judge, {})
    assert "needs OPENAI_API_KEY" in judge_problem(judge, {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://p/v1"})
    assert judge_problem(judge, {"OPENAI_API_KEY": "k"}) is None
    assert judge_problem(Judge("openai:gpt-4o", "http://127.0.0.1:9/v1"), {}) is None  # a local server may need none
    assert judge_problem(Judge(None), {}) is None
