"""KGoT under a flaky API, through the real langchain-openai client and a loopback OpenAI-compatible server.

30 % of the calls meet a fault (HTTP 500 / 429, a stall, a cut or non-JSON body, a reply that breaks the schema):
every run ends with an answer or "No solution found", in bounded time, its usage and failures in the state. A
model that always fails still ends the run (every step degrades, as the paper's appendix B.4 says), and
``kgagents show`` lists what failed. A rejected key, which leaves no way forward, stops the run with a clear
message; once the key is fixed, ``kgagents resume`` finishes it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.cli import main
from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs import kgot
from kgagents.graphs.io import final_state
from kgagents.nodes.kgot import NO_SOLUTION, KGoTContext
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
    S.step(S.FORCED_RETRIEVE, times=0, structured={"code": READ_SORTED}),
    S.step(S.FORCED, times=0, structured={"solution": "third 23, fifth 42"}),
    *S.need_math(True, times=0),
    S.step(S.MATH, times=0, tool_calls=[{"name": "run_python_code", "args": {"code": "print(23 + 42)"}}]),
    S.step(S.PARSE, times=0, structured={"final_answer": "65"}),
    S.step(S.CHOOSE, times=0, structured={"index": 0}),
]


@pytest.mark.slow
async def test_kgot_runs_end_cleanly_under_faults(fault_server: FakeOpenAIServer, tmp_path: Path) -> None:
    """With the samples of a decision in one request (the default on this client) and one request per sample: a
    fault on a request for several samples is met by every sample it stood for."""
    context = KGoTContext(**fault_settings(fault_server, tools=True),
                          work_dir=str(tmp_path / "work"), max_iterations=3,
                          num_next_steps_decision=3)
    runs = await runs_under_faults(fault_server, kgot, STEPS, {"question": QUESTION}, context)
    assert any(r.body.get("n") == 3 for r in fault_server.chat_requests)
    runs += await runs_under_faults(fault_server, kgot, STEPS, {"question": QUESTION},
                                    dataclasses.replace(context, samples_in_one_request=False), seeds=(4, 5))

    assert_clean_ends(runs)
    for run in runs:
        assert run.state["final_answer"] in ("65", NO_SOLUTION)
    assert any(run.state["final_answer"] == "65" for run in runs)
    tool_llm = [r for r in fault_server.chat_requests if "self-contained questions" in r.prompt]
    assert tool_llm  # the tools' own model went through the same flaky server


def cli(tmp_path: Path, server: FakeOpenAIServer, *args: str) -> int:
    settings = fault_settings(server, tools=True)
    values = [f"--set={k}={v}" for k, v in settings.items() if k not in ("model", "base_url")]
    return main(["--runs-dir", str(tmp_path / "runs"), "ask", QUESTION, "--model", settings["model"],
                 "--base-url", settings["base_url"], "--quiet", *values, *args])


@pytest.mark.slow
def test_a_model_that_always_fails_still_ends_the_run(fault_server: FakeOpenAIServer, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Every call is rate-limited (a server that is there, so the model is not given up: a 500 to everything
    from a model that never answered stops the run instead, tests/test_misbehaving_server.py): each step
    degrades (invalid votes, no tool calls, no forced retrieve query, no forced solution) and the run ends with
    "No solution found" — a failed run, not a wrong answer: the command exits 1 and the run is listed as failed;
    ``kgagents show`` lists the failures."""
    fault_server.answer_with(FaultPolicy(script_responder(STEPS), rate=1.0, kinds=("429",)))

    assert cli(tmp_path, fault_server, "--thread", "always-500", "--max-iterations", "1") == 1
    out = capsys.readouterr()
    assert out.out.strip() == NO_SOLUTION
    assert "the run failed: every model call failed for good (" in out.err and "api)" in out.err
    assert main(["--runs-dir", str(tmp_path / "runs"), "runs"]) == 0
    assert re.search(r"always-500\s+kgot\s+failed", capsys.readouterr().out)

    assert main(["--runs-dir", str(tmp_path / "runs"), "show", "always-500"]) == 0
    shown = capsys.readouterr().out
    assert f"Answer: {NO_SOLUTION}" in shown
    assert "model call(s) failed for good; the run went on" in shown
    for node, outcome in (("decide_next_step", "counts as INVALID"), ("define_tool_calls", "no tool calls"),
                          ("solve_forced", "forced retrieve query 0 is not written"),
                          ("generate_forced_solution", "no partial solution")):
        assert f"[{node}] " in shown and outcome in shown
    assert "Error code: 429 - injected fault" in shown
    assert "Solve operations:" in shown and "forced_retrieve (votes 0" in shown and "forced_solution: ''" in shown


@pytest.mark.slow
def test_the_tool_executor_is_forced_to_call_a_tool(fault_server: FakeOpenAIServer, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Through langchain-openai, the tool executor's request says ``tool_choice: "required"`` (as the authors bind
    it); the other requests force their own schema's tool."""
    fault_server.answer_with(FaultPolicy(script_responder(STEPS), rate=0.0))
    assert cli(tmp_path, fault_server, "--thread", "required", "--max-iterations", "2") == 0
    assert capsys.readouterr().out.strip() == "65"
    bodies = [r.body for r in fault_server.chat_requests if S.DEFINE_TOOLS in r.prompt]
    assert bodies and all(b["tool_choice"] == "required" for b in bodies)
    assert {t["function"]["name"] for t in bodies[0]["tools"]} >= {"run_python_code", "llm_query"}


@pytest.mark.slow
def test_the_paper_preset_runs_the_controller_at_0_and_the_tools_at_0_5(fault_server: FakeOpenAIServer,
                                                                        tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    fault_server.answer_with(FaultPolicy(script_responder(STEPS), rate=0.0))
    assert cli(tmp_path, fault_server, "--thread", "paper", "--max-iterations", "2", "--preset", "paper") == 0
    assert capsys.readouterr().out.strip() == "65"
    tools = [r.body for r in fault_server.chat_requests if "self-contained questions" in r.prompt]
    controller = [r.body for r in fault_server.chat_requests if "self-contained questions" not in r.prompt]
    assert tools and {b.get("temperature") for b in tools} == {0.5}
    assert {b.get("temperature") for b in controller} == {0.0}
    # one request per sample, as the authors' code sends them: the prompt is paid once per sample
    assert all(b.get("n", 1) == 1 for b in controller)
    votes = [b for b in controller if S.VOTE in json.dumps(b)]
    assert len(votes) % 5 == 0 and votes  # num_next_steps_decision requests per decision


def test_the_kgot_papers_baselines_and_fusion_take_kgots_presets() -> None:
    from kgagents.graphs.workflows import preset

    paper = preset("kgot", "paper")
    assert paper == {"temperature": 0.0, "tools_temperature": 0.5, "samples_in_one_request": False}
    for workflow in ("fusion", "zeroshot", "rag", "kgot-graphrag", "kgot-nokg"):
        assert preset(workflow, "paper") == paper


@pytest.mark.slow
def test_a_rejected_key_stops_the_run_and_it_resumes_once_fixed(fault_server: FakeOpenAIServer, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fault_server.api_key = "the-right-key"
    fault_server.answer_with(FaultPolicy(script_responder(STEPS), rate=0.0))
    monkeypatch.setenv("KGAGENTS_API_KEY", "a-wrong-key")
    monkeypatch.setenv("KGAGENTS_BASE_URL", fault_server.base_url)  # the server the key belongs to

    assert cli(tmp_path, fault_server, "--thread", "bad-key", "--max-iterations", "1") == 1
    err = capsys.readouterr().err
    assert f"graph_executor model (gpt-4o-mini at {fault_server.base_url}) cannot be used" in err
    assert "Incorrect API key" in err
    assert "kgagents resume bad-key" in err
    assert len(fault_server.chat_requests) <= 5  # the first votes only: not retried, nothing degraded around it

    monkeypatch.setenv("KGAGENTS_API_KEY", "the-right-key")
    assert main(["--runs-dir", str(tmp_path / "runs"), "resume", "bad-key", "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == "65"
    assert main(["--runs-dir", str(tmp_path / "runs"), "runs"]) == 0
    assert "done" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------------------------
# Unparseable replies (appendix B.4.1): each is logged, its query bypassed, and the run goes on
# --------------------------------------------------------------------------------------------------------------
async def scripted_run(tmp_path: Path, steps: list[dict], **ctx: object) -> dict:
    model = ScriptedChatModel(steps=steps)
    context = KGoTContext(model=model, work_dir=str(tmp_path / "work"), api_backoff_base_s=0.001,
                          tool_backoff_base_s=0.001, max_parse_retries=0, **ctx)
    config = {"configurable": {"thread_id": "unparseable"}, "recursion_limit": 200}
    return await final_state(kgot.compile_graph(InMemorySaver()),
                             {"question": QUESTION}, config, context=context)


def failed(state: dict) -> list[tuple[str, str]]:
    """``(node, outcome)`` of each failure, every one of them a reply that never parsed."""
    assert all(f["kind"] == "parse" and "no valid" in f["error"] for f in state["failures"])
    return [(f["node"], f["outcome"]) for f in state["failures"]]


@pytest.mark.slow
async def test_unparseable_replies_in_query_mode_are_bypassed(tmp_path: Path) -> None:
    """The merge, the write's fix, the read query's fix and regeneration, a vote's missing read query written by
    the RETRIEVE prompt, and the need for math: each reply breaks its schema. Each failure is logged and bypassed,
    the forced solution answers, and the run ends with the answer."""
    failing = "result = G.nodes['missing']['values']"
    steps = [*S.votes("INSERT", 3, unless="iteration 0: run_python_code"),
             *S.votes("RETRIEVE", 2, when_extra="iteration 0: run_python_code", solve=failing),
             *S.votes("RETRIEVE", 1, when_extra="iteration 0: run_python_code"),
             *S.unparseable(S.MERGE), *S.tool_calls(("run_python_code", {"code": "print(sorted([42, 23]))"})),
             *S.write("G.add_node('x')  # no label"), *S.unparseable(S.FIX), *S.unparseable(S.REGENERATE),
             *S.unparseable(S.RETRIEVE), *S.forced("sorted [2, 15, 23, 37, 42, 88]: 23 + 42 = 65"),
             *S.unparseable(S.NEED_MATH), *S.parse("65", "65", "65")]
    state = await scripted_run(tmp_path, steps, num_next_steps_decision=3)

    assert state["final_answer"] == "65"
    assert failed(state) == [
        ("define_tool_calls", "the INSERT reasons are listed unmerged"),
        ("integrate_new_information", "the failing statement of the KG write is discarded; the others run"),
        ("solve_with_query", "the read query is not fixed further"),
        ("solve_with_query", "the read query is bypassed: its solve operation gives no partial solution"),
        ("solve_with_query", "a RETRIEVE vote without a read query is bypassed"),
        ("process_math", "no calculation: the partial solution is parsed as it is"),
    ]
    [write] = state["kg_writes"]
    assert write["status"] == "discarded"
    assert [(op["kind"], op["partial_solution"] is None) for op in state["solve_operations"]] == [
        ("vote", True), ("vote", True), ("forced_solution", False)]


@pytest.mark.slow
async def test_unparseable_replies_in_direct_mode_are_bypassed(tmp_path: Path) -> None:
    """Direct Retrieval's answer, the math code's fix and the tie judge break their schemas: the forced solution,
    the calculation's error as its output and the first tied candidate take their places."""
    steps = [*S.votes("RETRIEVE", 3), *S.unparseable(S.DIRECT), *S.forced("sorted [2, 15, 23, 37, 42, 88]"),
             *S.need_math(True), *S.math("print(undefined_name)"), *S.unparseable(S.FIX),
             *S.parse("65", "66"), *S.unparseable(S.CHOOSE)]
    state = await scripted_run(tmp_path, steps, num_next_steps_decision=3, solve_mode="direct",
                               max_final_solution_parsing=2)

    assert state["final_answer"] == "65"
    assert failed(state) == [
        ("solve_directly", "the RETRIEVE votes without an answer give no partial solution"),
        ("process_math", "the calculation's error is kept as its output"),
        ("parse_solution", "the first of the tied candidates is the answer"),
    ]
    assert "NameError" in state["math_output"]


async def test_unparseable_forced_replies_end_with_no_solution(tmp_path: Path) -> None:
    """At the limit every forced retrieve query and the forced solution break their schemas: nothing is left, so
    the run ends with "No solution found", each failure logged."""
    steps = [*S.unparseable(S.FORCED_RETRIEVE), *S.unparseable(S.FORCED)]
    state = await scripted_run(tmp_path, steps, max_iterations=0, num_next_steps_decision=2)

    assert state["final_answer"] == NO_SOLUTION
    failures = failed(state)
    assert sorted(failures[:2]) == [  # the forced queries are written concurrently: either may fail first
        ("solve_forced", "forced retrieve query 0 is not written"),
        ("solve_forced", "forced retrieve query 1 is not written"),
    ]
    assert failures[2:] == [("generate_forced_solution", f"no partial solution: the answer is {NO_SOLUTION!r}")]
