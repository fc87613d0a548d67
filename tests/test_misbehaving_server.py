"""A model server that misbehaves on every request stops a run (or an evaluation) after a few requests, with one
message naming the failure's kind, the model and its URL, and exit 1 — for every workflow, through the CLI and
the real OpenAI client, against a loopback server that answers 500, an HTML page, a broken or empty body, or
nothing at all.

No test asserts a time: the number of requests the server received bounds what the run spent (each costs one
backoff of milliseconds here, or one probe's wait for the silent server)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from kgagents.cli import main
from kgagents.core.failures import NEVER_ANSWERED_ATTEMPTS, FailureKind
from kgagents.core.retry import BREAKER_CALLS, ModelUnavailableError, failure_kind
from kgagents.evals.grbench import fixture_graph
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.llm import LLMCaller, LLMError
from kgagents.nodes.models import build_chat_model
from tests.fakes import isolate_model_env
from tests.fakes.openai_server import FakeOpenAIServer

#: What the message names, per misbehaviour.
KINDS = {"500": "server error", "html": "malformed response", "broken_json": "malformed response",
         "empty": "malformed response", "silent": "timeout", "407": "rejected key", "402": "quota exhausted",
         "error_object": "server error", "400": "bad request"}
#: Backoff of milliseconds, so that the requests (not the waits) are what the test measures; the retries stay
#: the defaults' (6), which the misbehaving model must not get to use up.
FAST_BACKOFF = ["--set", "api_backoff_base_s=0.001", "--set", "api_backoff_max_s=0.01"]
#: The silent server: the probe after half a second, given half a second (the defaults: 15 s and 10 s).
FAST_PROBE = ["--set", "llm_probe_after_s=0.5", "--set", "llm_probe_timeout_s=0.5"]
#: A call in flight when the first one gives up may add its own request or two (a workflow that asks several
#: things at once), never a full round of retries.
SLACK = 3

@pytest.fixture(name="server")
def server_fixture(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeOpenAIServer]:
    isolate_model_env(monkeypatch, tmp_path)
    with FakeOpenAIServer() as server:
        yield server


def _workflow_args(workflow: str, tmp_path: Path) -> list[str]:
    if workflow == "kgot":
        return ["What is 2 + 2?"]
    if workflow == "ark":
        graph = Path(__file__).parents[1] / "kgagents" / "data" / "ark" / "example_data.json"
        return ["Is Yui Yuigahama's pet a corgi?", "--workflow", "ark", "--attach", str(graph)]
    if workflow == "grounded":
        return ["Who wrote the paper?", "--workflow", "grounded", "--graph", str(fixture_graph("dblp"))]
    page = tmp_path / "band.html"
    page.write_text("<html><body><p>PJ Morton plays keyboards in Maroon 5.</p></body></html>", encoding="utf-8")
    return ["who plays keyboards in maroon 5?", "--workflow", "agent-g", "--page", str(page),
            "--query-time", "03/01/2024, 10:00:00 PT"]


def _misbehave(server: FakeOpenAIServer, misbehaviour: str) -> None:
    """Every chat request answered so; a silent server is silent on every route (its model list too, which the
    silence probe asks for: a server that lists its models is alive, only slow)."""
    if misbehaviour == "silent":
        server.always("silent")
    else:
        server.misbehave(misbehaviour)


def _ask(server: FakeOpenAIServer, workflow: str, tmp_path: Path, *extra: str) -> int:
    return main(["--runs-dir", str(tmp_path / "runs"), "ask", *_workflow_args(workflow, tmp_path),
                 "--model", "gpt-4o-mini", "--base-url", server.base_url, "--thread", "t1", "--quiet",
                 *FAST_BACKOFF, *extra])


@pytest.mark.slow
@pytest.mark.parametrize("workflow", ["kgot", "ark", "grounded", "agent-g"])
@pytest.mark.parametrize("misbehaviour", ["500", "html", "broken_json", "empty", "silent"])
def test_a_misbehaving_server_stops_the_run_after_a_few_requests(server: FakeOpenAIServer, tmp_path: Path, capsys,
                                                                 workflow: str, misbehaviour: str) -> None:
    _misbehave(server, misbehaviour)
    code = _ask(server, workflow, tmp_path, *(FAST_PROBE if misbehaviour == "silent" else ()))
    err = capsys.readouterr().err
    assert code == 1, err[-3000:]
    kind = KINDS[misbehaviour]
    assert re.search(rf"model \(gpt-4o-mini at {re.escape(server.base_url)}\) cannot be used: .*\(failure: {kind};",
                     err), err[-3000:]
    if misbehaviour == "silent":
        assert "accepts connections but never answers" in err
    assert "kgagents resume t1" in err  # the run is kept, to resume once the server is fixed
    # the first call's attempts (and, for the silent server, one probe), plus what was in flight
    bound = (2 if misbehaviour == "silent" else NEVER_ANSWERED_ATTEMPTS) + SLACK
    assert 1 <= len(server.chat_requests) <= bound, len(server.chat_requests)


@pytest.mark.slow
def test_the_silent_server_is_named_at_the_defaults(server: FakeOpenAIServer, tmp_path: Path, capsys) -> None:
    """No setting shrunk: the probe after 15 s ends the run (the call's own limit is 120 s, retried 6 times)."""
    _misbehave(server, "silent")
    code = main(["--runs-dir", str(tmp_path / "runs"), "ask", "What is 2 + 2?", "--model", "gpt-4o-mini",
                 "--base-url", server.base_url, "--thread", "t1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and "accepts connections but never answers" in err and "(failure: timeout;" in err
    assert len(server.chat_requests) == 1 and len(server.get_requests) == 1  # the call and its probe (a GET of
    # the model list), nothing retried


@pytest.mark.slow
@pytest.mark.parametrize("misbehaviour", ["500", "silent", "407", "402", "error_object"])
def test_an_evaluation_stops_after_its_first_item(server: FakeOpenAIServer, tmp_path: Path, capsys,
                                                  misbehaviour: str) -> None:
    data = tmp_path / "simpleqa.csv"
    data.write_text("metadata,problem,answer\n" + "".join(f"{{}},What is {i} + {i}?,{2 * i}\n" for i in range(5)),
                    encoding="utf-8")
    _misbehave(server, misbehaviour)
    out = tmp_path / "results"
    code = main(["eval", "kgot", "--dataset", "simpleqa", "--data", str(data), "--model", "gpt-4o-mini",
                 "--base-url", server.base_url, "--out", str(out), "--no-progress", "--no-report",
                 "--concurrency", "1", *FAST_BACKOFF, *(FAST_PROBE if misbehaviour == "silent" else ())])
    err = capsys.readouterr().err
    assert code == 1, err[-3000:]
    assert f"(failure: {KINDS[misbehaviour]};" in err
    results = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(results) == 1  # the first item, not all five
    assert len(server.chat_requests) <= (2 if misbehaviour == "silent" else NEVER_ANSWERED_ATTEMPTS) + SLACK


def _caller(server: FakeOpenAIServer, **settings: float) -> LLMCaller:
    model = build_chat_model("gpt-4o-mini", base_url=server.base_url, timeout_s=30.0, connect_timeout_s=5.0)
    settings = {"api_backoff_base_s": 0.001, "api_backoff_max_s": 0.01, **settings}
    return LLMCaller(KGoTContext(model=model, **settings),
                     "graph_executor")


async def test_a_slow_model_that_answers_the_probe_keeps_its_full_limit(server: FakeOpenAIServer,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """The call waits past the probe's moment and the notices' interval; the probe is answered, so the call is
    not cut short, and the waits are said on stderr."""
    server.slow_reply("a long answer", 2.0).reply("OK")  # the call; then the probe, answered at once
    llm = _caller(server, llm_timeout_s=20.0, llm_probe_after_s=0.3, llm_probe_timeout_s=1.0,
                  llm_wait_notice_s=0.5)
    with caplog.at_level(logging.WARNING, logger="kgagents.retry"):
        assert await llm.text("q") == "a long answer"
    assert len(server.chat_requests) == 1  # the probe is no completion
    (probe,) = server.get_requests
    assert probe.path == "/v1/models"
    notices = [r.getMessage() for r in caplog.records if "still waiting for" in r.getMessage()]
    assert notices and all(f"the graph_executor model (gpt-4o-mini at {server.base_url})" in n for n in notices)


async def test_a_model_that_answered_needs_no_probe(server: FakeOpenAIServer) -> None:
    server.reply("first").slow_reply("second", 1.0)
    assert await _caller(server).text("q") == "first"  # the defaults: no probe before 15 s
    llm = _caller(server, llm_timeout_s=20.0, llm_probe_after_s=0.2, llm_probe_timeout_s=0.5)
    assert await llm.text("q2") == "second"
    assert len(server.chat_requests) == 2


async def test_a_model_that_answered_and_then_fails_every_call_trips_the_breaker(server: FakeOpenAIServer) -> None:
    """Its failed calls degrade (an LLMError each) until the breaker's count, which stops the run."""
    server.reply("first")
    llm = _caller(server, max_api_retries=1)
    assert await llm.text("q") == "first"
    server.misbehave("500")
    for _ in range(BREAKER_CALLS - 1):
        with pytest.raises(LLMError, match=r"after 2 attempt\(s\): OpenAIAPIError: Error code: 500"):
            await llm.text("q")
    with pytest.raises(ModelUnavailableError, match=f"its last {BREAKER_CALLS} calls failed") as info:
        await llm.text("q")
    assert info.value.kind is FailureKind.SERVER
    assert len(server.chat_requests) == 1 + 2 * BREAKER_CALLS


async def test_a_refusal_is_not_retried_and_does_not_stop_the_run(server: FakeOpenAIServer) -> None:
    """Of a model that answered before: the step degrades, each time."""
    server.reply("first")
    for _ in range(NEVER_ANSWERED_ATTEMPTS + 1):
        server.error(400, "The response was filtered due to the prompt triggering content management policy.")
    llm = _caller(server)
    assert await llm.text("q") == "first"
    for _ in range(NEVER_ANSWERED_ATTEMPTS + 1):  # never an unusable model: the server answered each time
        with pytest.raises(LLMError, match="after 1 attempt") as info:
            await llm.text("q")
        assert not isinstance(info.value, ModelUnavailableError)
        assert failure_kind(info.value.__cause__) is FailureKind.REFUSAL
    assert len(server.chat_requests) == NEVER_ANSWERED_ATTEMPTS + 2


async def test_a_slow_model_on_a_one_slot_server_is_not_taken_for_silent() -> None:
    """Ollama and llama.cpp generate one request at a time: a probe that is a completion would queue behind the
    call and time out. The probe is a GET of the model list, which no generation holds up, and carries no key."""
    with FakeOpenAIServer(api_key="sk-probe-test") as server:
        server.one_slot = True
        server.slow_reply("a long answer", 1.5)
        model = ChatOpenAI(model="gpt-4o-mini", base_url=server.base_url, api_key=SecretStr("sk-probe-test"),
                           max_retries=0, timeout=30.0)
        llm = LLMCaller(KGoTContext(model=model, llm_timeout_s=20.0, llm_probe_after_s=0.2, llm_probe_timeout_s=0.5,
                                api_backoff_base_s=0.001, api_backoff_max_s=0.01), "graph_executor")
        assert await llm.text("q") == "a long answer"
        assert len(server.chat_requests) == 1
        (probe,) = server.get_requests
        assert probe.path == "/v1/models"
        assert "authorization" not in probe.headers  # answered 401, which proves the server there
        assert probe.body is None and b"q" not in probe.raw


async def test_concurrent_calls_of_one_server_share_one_probe(server: FakeOpenAIServer) -> None:
    for i in range(10):
        server.slow_reply(f"answer {i}", 1.0)
    llm = _caller(server, llm_timeout_s=20.0, llm_probe_after_s=0.2, llm_probe_timeout_s=2.0)
    answers = await asyncio.gather(*(llm.text(f"q{i}") for i in range(10)))
    assert sorted(answers) == sorted(f"answer {i}" for i in range(10))
    assert len(server.chat_requests) == 10
    assert len(server.get_requests) == 1


async def test_a_model_that_answered_and_then_goes_silent_stops_at_its_first_timeout(
        server: FakeOpenAIServer) -> None:
    """A timed-out attempt of a model that answered before is followed by a probe; no answer to that either: the
    server went silent, and the run stops instead of retrying full time limits for minutes."""
    server.reply("first")
    llm = _caller(server, llm_timeout_s=2.0, llm_probe_timeout_s=0.5)
    assert await llm.text("q") == "first"
    server.always("silent")  # the model list included
    with pytest.raises(ModelUnavailableError, match="it answered before, but now the server accepts connections "
                                                    "but never answers") as info:
        await llm.text("q2")
    assert info.value.kind is FailureKind.TIMEOUT
    assert len(server.chat_requests) == 2  # the answered call and one attempt: nothing retried
    assert len(server.get_requests) == 1


async def test_a_model_that_answered_and_is_slow_once_is_retried(server: FakeOpenAIServer) -> None:
    """A timed-out attempt whose server answers the probe is retried as before."""
    server.reply("first").hang(5.0).reply("second")
    llm = _caller(server, llm_timeout_s=1.5, llm_probe_timeout_s=1.0)
    assert await llm.text("q") == "first"
    assert await llm.text("q2") == "second"
    assert len(server.chat_requests) == 3 and len(server.get_requests) == 1


@pytest.mark.parametrize(("misbehaviour", "kind"), [
    ("407", FailureKind.AUTH), ("402", FailureKind.QUOTA), ("error_object", FailureKind.SERVER)])
async def test_a_status_that_fails_every_request_stops_a_model_that_never_answered(
        server: FakeOpenAIServer, misbehaviour: str, kind: FailureKind) -> None:
    server.misbehave(misbehaviour)
    llm = _caller(server)
    for _ in range(NEVER_ANSWERED_ATTEMPTS):
        try:
            await llm.text("q")
        except ModelUnavailableError as exc:
            assert exc.kind is kind
            assert f"(failure: {kind.value};" in str(exc)
            break
        except LLMError:  # a request refused for what it asked: tried again by the next call
            continue
    else:
        pytest.fail(f"{NEVER_ANSWERED_ATTEMPTS} calls of a model that never answered, and no stop")
    assert len(server.chat_requests) <= NEVER_ANSWERED_ATTEMPTS


async def test_refused_requests_never_stop_a_model_that_has_not_answered_yet(server: FakeOpenAIServer) -> None:
    """A content filter or a prompt too long refuses that request every time it is asked (its samples, its
    re-asks): however often, on a fresh model too, the step degrades and the run goes on (an evaluation's first
    item may be the one filtered prompt)."""
    server.misbehave("400")
    llm = _caller(server)
    for _ in range(2 * NEVER_ANSWERED_ATTEMPTS):
        with pytest.raises(LLMError) as info:
            await llm.text("q")
        assert not isinstance(info.value, ModelUnavailableError), info.value
    assert len(server.chat_requests) == 2 * NEVER_ANSWERED_ATTEMPTS  # none retried


async def test_a_long_backoff_wait_is_said_on_stderr(server: FakeOpenAIServer,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    server.rate_limit(0.3).reply("OK")
    llm = _caller(server, api_backoff_max_s=1.0, llm_wait_notice_s=0.2)
    with caplog.at_level(logging.WARNING, logger="kgagents.retry"):
        assert await llm.text("q") == "OK"
    notices = [r.getMessage() for r in caplog.records if "rate limited by" in r.getMessage()]
    assert notices == [f"kgagents: rate limited by the graph_executor model (gpt-4o-mini at {server.base_url}); "
                       "waiting 0.3 s as the server asks"]


async def test_a_server_that_asks_to_wait_a_day_stops_a_model_that_never_answered(
        server: FakeOpenAIServer) -> None:
    server.rate_limit(86400)
    with pytest.raises(ModelUnavailableError, match="the server asks to wait 86400 s") as info:
        await _caller(server).text("q")
    assert info.value.kind is FailureKind.RATE_LIMIT and "rate limits and quota" in str(info.value)
    assert len(server.chat_requests) == 1


async def test_a_model_always_rate_limited_stops_after_its_bounded_wait(server: FakeOpenAIServer) -> None:
    """Its waits (0.05 s each, as the server asks) are bounded by llm_rate_limit_wait_s across calls."""
    server.misbehave("429")
    llm = _caller(server, api_backoff_max_s=1.0, max_api_retries=2, llm_rate_limit_wait_s=0.4)
    with pytest.raises(ModelUnavailableError) as info:
        for _ in range(10):
            with contextlib.suppress(LLMError):
                await llm.text("q")
    assert info.value.kind is FailureKind.RATE_LIMIT
    # at most 8 waits of 0.05 s fit in 0.4 s: 8 retries, plus the first attempt of each of at most 5 calls
    assert len(server.chat_requests) <= 13


async def test_a_model_that_answered_is_not_bounded_by_the_rate_limit_wait(server: FakeOpenAIServer) -> None:
    server.reply("first").rate_limit(0.3).reply("second")
    llm = _caller(server, api_backoff_max_s=1.0, llm_rate_limit_wait_s=0.1)
    assert await llm.text("q") == "first"
    assert await llm.text("q") == "second"


async def test_the_timeout_stop_advises_only_what_resume_can_do(server: FakeOpenAIServer) -> None:
    """A resumed run keeps the limits it started with: the message says to start a new run for a longer limit, not
    to raise it and resume."""
    server.always("silent")
    with pytest.raises(ModelUnavailableError) as info:
        await _caller(server, llm_timeout_s=0.3, llm_probe_timeout_s=0.3).text("q")
    message = str(info.value)
    assert info.value.kind is FailureKind.TIMEOUT
    assert "raise llm_timeout_s" not in message
    assert "a new run with a longer limit (--set llm_timeout_s=SECONDS" in message


async def test_a_key_in_the_base_urls_query_is_not_in_the_stop_message(server: FakeOpenAIServer) -> None:
    server.misbehave("407")
    model = build_chat_model("gpt-4o-mini", base_url=f"{server.base_url}?api-key=SECRETTOKEN456", timeout_s=30.0,
                             connect_timeout_s=5.0)
    llm = LLMCaller(KGoTContext(model=model, api_backoff_base_s=0.001, api_backoff_max_s=0.01), "graph_executor")
    with pytest.raises(ModelUnavailableError) as info:
        await llm.text("q")
    assert "SECRETTOKEN456" not in str(info.value) and "api-key=" in str(info.value)
