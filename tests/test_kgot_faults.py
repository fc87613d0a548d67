"""KGoT under a flaky API, through the real langchain-openai client and a loopback OpenAI-compatible server.

30 % of the calls meet a fault (HTTP 500 / 429, a stall, a cut or non-JSON body, a reply that breaks the schema):
every run ends with an answer or "No solution found", in bounded time, its usage and failures in the state. A
model that always fails still ends the run (every step degrades, as the paper's appendix B.4 says), and
``kgagents show`` lists what failed. A rejected key, which leaves no way forward, stops the run with a clear
message; once the key is fixed, ``kgagents resume`` finishes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graphs import kgot
from kgagents.cli import main
from nodes.context import Context
from nodes.kgot import NO_SOLUTION
from tests import kgot_script as S
from tests.fakes.faults import assert_clean_ends, fault_server_fixture, fault_settings, runs_under_faults  # noqa: F401
from tests.fakes.openai_server import FakeOpenAIServer, FaultPolicy, script_responder

QUESTION = "The array [42, 23, 2, 88, 37, 15] is in a script. Sort it and add the third and fifth values."
ARRAY_WRITE = ("G.add_node('array', label='Array', values=[42, 23, 2, 88, 37, 15])\n"
               "G.add_node('sorted', label='SortedArray', values=[2, 15, 23, 37, 42, 88])\n"
               "G.add_edge('array', 'sorted', relationship='SORTED_AS')")
READ_SORTED = ("values = next(a['values'] for n, a in G.nodes(data=True) if a['label'] == 'SortedArray')\n"
               "result = {'third': values[2], 'fifth': values[4]}")

#: Any prompt of the workflow gets its reply, however often it comes (a failed step is asked again later).
STEPS = [
    *S.votes("INSERT", 0, unless="SortedArray"), *S.votes("RETRIEVE", 0, when_extra="SortedArray"),
    *S.merge(times=0),
    *S.tool_calls(("run_python_code", {"code": "print(sorted([42, 23, 2, 88, 37, 15]))"}),
                  ("llm_query", {"query": "What is 23 + 42?"}), times=0),
    S.step("self-contained questions", times=0, content="65"),
    *S.write(ARRAY_WRITE, times=0), *S.fix(ARRAY_WRITE, times=0),
    S.step(S.RETRIEVE, times=0, structured={"code": READ_SORTED}), *S.regenerate(READ_SORTED, times=0),
    S.step(S.FORCED, times=0, structured={"solution": "third 23, fifth 42"}),
    *S.need_math(True, times=0),
    S.step(S.MATH, times=0, tool_calls=[{"name": "run_python_code", "args": {"code": "print(23 + 42)"}}]),
    S.step(S.PARSE, times=0, structured={"final_answer": "65"}),
    S.step(S.CHOOSE, times=0, structured={"index": 0}),
]


async def test_kgot_runs_end_cleanly_under_faults(fault_server: FakeOpenAIServer, tmp_path: Path) -> None:
    context = Context(**fault_settings(fault_server), work_dir=str(tmp_path / "work"), max_iterations=3,
                      num_next_steps_decision=3)
    runs = await runs_under_faults(fault_server, kgot, STEPS, {"question": QUESTION}, context)

    assert_clean_ends(runs)
    for run in runs:
        assert run.state["final_answer"] in ("65", NO_SOLUTION)
    assert any(run.state["final_answer"] == "65" for run in runs)
    tool_llm = [r for r in fault_server.chat_requests if "self-contained questions" in r.prompt]
    assert tool_llm  # the tools' own model went through the same flaky server


def cli(tmp_path: Path, server: FakeOpenAIServer, *args: str) -> int:
    settings = fault_settings(server)
    values = [f"--set={k}={v}" for k, v in settings.items() if k not in ("model", "base_url")]
    return main(["--runs-dir", str(tmp_path / "runs"), "ask", QUESTION, "--model", settings["model"],
                 "--base-url", settings["base_url"], "--quiet", *values, *args])


def test_a_model_that_always_fails_still_ends_the_run(fault_server: FakeOpenAIServer, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Every call meets a 500: each step degrades (invalid votes, no tool calls, a forced solve without a
    solution) and the run ends with "No solution found"; ``kgagents show`` lists the failures."""
    fault_server.answer_with(FaultPolicy(script_responder(STEPS), rate=1.0, kinds=("500",)))

    assert cli(tmp_path, fault_server, "--thread", "always-500", "--max-iterations", "1") == 0
    assert capsys.readouterr().out.strip() == NO_SOLUTION

    assert main(["--runs-dir", str(tmp_path / "runs"), "show", "always-500"]) == 0
    shown = capsys.readouterr().out
    assert f"Answer: {NO_SOLUTION}" in shown
    assert "model call(s) failed for good; the run went on" in shown
    for node, outcome in (("decide_next_step", "counts as INVALID"), ("define_tool_calls", "no tool calls"),
                          ("solve_forced", "no partial solution")):
        assert f"[{node}] " in shown and outcome in shown
    assert "Error code: 500 - injected fault" in shown


def test_a_rejected_key_stops_the_run_and_it_resumes_once_fixed(fault_server: FakeOpenAIServer, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fault_server.api_key = "the-right-key"
    fault_server.answer_with(FaultPolicy(script_responder(STEPS), rate=0.0))
    monkeypatch.setenv("KGAGENTS_API_KEY", "a-wrong-key")

    assert cli(tmp_path, fault_server, "--thread", "bad-key", "--max-iterations", "1") == 1
    err = capsys.readouterr().err
    assert "graph_executor model (gpt-4o-mini) cannot be used" in err and "Incorrect API key" in err
    assert "kgagents resume bad-key" in err
    assert len(fault_server.chat_requests) <= 5  # the first votes only: not retried, nothing degraded around it

    monkeypatch.setenv("KGAGENTS_API_KEY", "the-right-key")
    assert main(["--runs-dir", str(tmp_path / "runs"), "resume", "bad-key", "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == "65"
    assert main(["--runs-dir", str(tmp_path / "runs"), "runs"]) == 0
    assert "done" in capsys.readouterr().out
