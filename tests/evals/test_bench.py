"""The benchmark still runs (smoke runs at tiny sizes; the numbers are not checked), and its loopback
OpenAI-compatible server answers as OpenAI does."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from kgagents.evals.bench_batch import main, markdown, run_benchmark, script
from kgagents.evals.latency_server import LatencyServer, Responder
from kgagents.tools.manager import registered_names


async def test_benchmark_smoke():
    result = await run_benchmark(0.0, [2], "enhance", "lean", sequential_items=1, waves=1, repeats=1)
    assert result["calls_per_item"] == 19 and result["batch"][0]["items"] == 2
    assert result["single_task"]["sequential_s"] > 0 and result["single_task"]["samples_in_one_request"]
    assert "| 2 | 2 |" in markdown(result)
    assert "simulated_lookup" not in registered_names()


@pytest.mark.slow
async def test_benchmark_smoke_through_the_openai_client_over_http():
    """The default path: langchain-openai's client, built from a model string, against the latency server."""
    result = await run_benchmark(0.0, [2], "enhance", "http", sequential_items=1, waves=1, repeats=1, profile_c=2)
    row = result["batch"][0]
    shares = result["profile"]["shares"]
    assert abs(sum(shares.values()) - 1) < 1e-6 and shares["openai SDK (request building, response models)"] > 0
    assert all(share >= 0 for share in shares.values()) and "Where the CPU goes at C = 2" in markdown(result)
    # the 5 votes of each of the two decisions and the 3 parses are one request each: 19 samples, 9 requests
    assert result["model_path"] == "http" and result["calls_per_item"] == 9 and row["items"] == 2
    assert row["server_cpu_s"] is not None and result["single_task"]["concurrent_s"] > 0
    assert "model path `http`" in markdown(result) and "simulated_lookup" not in registered_names()


@pytest.mark.slow
async def test_benchmark_smoke_with_worker_processes():
    result = await run_benchmark(0.0, [2], "direct", "lean", sequential_items=1, waves=1, repeats=1, processes=2)
    row = result["batch"][0]
    assert row["processes"] == 2 and row["items"] == 2 and row["loop_cpu_s"] is None
    assert result["calls_per_item"] == 10 and "| 2 | 2 |" in markdown(result) and "2 process(es)" in markdown(result)


@pytest.mark.slow
async def test_benchmark_smoke_over_http_with_automatic_processes():
    result = await run_benchmark(0.0, [2], "direct", "http", sequential_items=1, waves=1, repeats=1,
                                 processes="auto")
    assert result["calls_per_item"] == 4 and result["batch"][0]["items"] == 2


@pytest.mark.slow
async def test_benchmark_smoke_over_http_with_one_request_per_sample():
    result = await run_benchmark(0.0, [2], "direct", "http", sequential_items=1, waves=1, repeats=1,
                                 samples="separate")
    assert result["calls_per_item"] == 10 and "samples separate" in markdown(result)


async def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="unknown model path 'grpc'"):
        await run_benchmark(0.0, [2], "direct", "grpc", sequential_items=1, waves=1, repeats=1)
    with pytest.raises(ValueError, match="unknown samples setting 'some'"):
        await run_benchmark(0.0, [2], "direct", "lean", sequential_items=1, waves=1, repeats=1, samples="some")
    with pytest.raises(SystemExit):
        main(["--processes", "0"])
    with pytest.raises(ValueError, match="latency"):
        LatencyServer(script("direct"), -1.0)
    with pytest.raises(ValueError, match="exactly one of"):
        LatencyServer([{"when": "x"}], 0.0)


def body(prompt: str, **extra: object) -> dict:
    return {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": [{"type": "text", "text": prompt}]}], **extra}


def test_the_responder_answers_as_openai_does():
    responder = Responder([{"when": "vote", "times": 0, "structured": {"query_type": "SOLVE"}},
                           {"when": "tools", "tool_calls": [{"name": "search", "args": {"q": "x"}}]},
                           {"when": "fail", "raise": "overloaded", "status": 503},
                           {"when": "text", "content": "plain"}])
    forced = {"tools": [{"type": "function", "function": {"name": "Other"}},
                        {"type": "function", "function": {"name": "Vote"}}],
              "tool_choice": {"type": "function", "function": {"name": "Vote"}}}
    status, reply = responder.answer(body("please vote", **forced))
    call = reply["choices"][0]["message"]["tool_calls"][0]
    assert status == 200 and reply["choices"][0]["finish_reason"] == "tool_calls"
    assert call["function"] == {"name": "Vote", "arguments": json.dumps({"query_type": "SOLVE"})}
    assert reply["usage"]["prompt_tokens"] > 1 and reply["model"] == "m"
    status, reply = responder.answer(body("vote again", response_format={"type": "json_schema"}))
    assert json.loads(reply["choices"][0]["message"]["content"]) == {"query_type": "SOLVE"}
    status, reply = responder.answer(body("define tools"))
    assert reply["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "search"
    assert responder.answer(body("define tools"))[0] == 400  # used up (times: 1)
    assert responder.answer(body("fail"))[0] == 503
    assert responder.answer(body("text"))[1]["choices"][0]["message"]["content"] == "plain"
    assert responder.answer({"messages": "no"})[0] == 400
    assert responder.answer(body("text", stream=True))[0] == 400
    assert responder.script.calls == []  # a server keeps no prompts


def test_the_responder_answers_n_choices():
    responder = Responder([{"when": "vote", "times": 0, "structured": {"query_type": "SOLVE"}}])
    status, reply = responder.answer(body("vote", n=3, tools=[{"type": "function", "function": {"name": "V"}}]))
    assert status == 200 and [c["index"] for c in reply["choices"]] == [0, 1, 2]
    ids = {c["message"]["tool_calls"][0]["id"] for c in reply["choices"]}
    assert len(ids) == 3  # every choice's call is a call of its own
    single = responder.answer(body("vote", tools=[{"type": "function", "function": {"name": "V"}}]))[1]
    assert reply["usage"]["completion_tokens"] > 2 * single["usage"]["completion_tokens"]
    for bad in (0, "2", 1000, True):
        assert responder.answer(body("vote", n=bad))[0] == 400


@pytest.mark.slow
def test_the_latency_server_runs_in_its_own_process_and_answers_after_its_latency():
    import os
    import time

    with LatencyServer([{"times": 0, "content": "hello"}], 0.3) as server:
        assert server._proc is not None and server._proc.pid != os.getpid()
        request = urllib.request.Request(f"{server.base_url}/chat/completions", json.dumps(body("hi")).encode(),
                                         {"Content-Type": "application/json"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(request, timeout=10) as response:
            reply = json.loads(response.read())
        assert time.perf_counter() - t0 >= 0.3
        assert reply["choices"][0]["message"]["content"] == "hello"
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(urllib.request.Request(f"{server.base_url}/chat/completions", b"{",
                                                          {"Content-Type": "application/json"}), timeout=10)
        assert info.value.code == 400
        proc = server._proc
    assert proc.poll() is not None and server.base_url  # stopped with the block


@pytest.mark.slow
async def test_paths_side_by_side():
    """Several model paths in one run: each its own baseline, the paths taking turns at each C."""
    from kgagents.evals.bench_batch import compare_paths, compared_markdown

    result = await compare_paths(0.0, [2], "direct", ["lean", "langchain"], sequential_items=1, waves=1,
                                 repeats=2)
    assert result["model_paths"] == ["lean", "langchain"]
    assert set(result["per_item_s"]) == {"lean", "langchain"}
    for path in ("lean", "langchain"):
        row = result["batch"][path][0]
        assert row["items"] == 2 and len(row["efficiency_all"]) == len(row["wall_s_all"]) == 2
    table = compared_markdown(result)
    assert "| 2 | `lean` |" in table and "| 2 | `langchain` |" in table and "2 repetitions per C" in table
    assert "simulated_lookup" not in registered_names()
    with pytest.raises(ValueError, match="unknown model path 'grpc'"):
        await compare_paths(0.0, [2], "direct", ["lean", "grpc"], sequential_items=1, waves=1, repeats=1)
