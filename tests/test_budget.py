"""Budgets (``budget_tokens`` / ``budget_usd``): each workflow, driven by a scripted model, ends at its budget
the way its paper ends a run at its limits and says so in its state and output; an evaluation stops starting
items."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.cli import main
from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.runner import EvalOptions, evaluate
from kgagents.graphs import agent_g, ark, grounded, kgot
from kgagents.nodes.agent_g import AgentGContext
from kgagents.nodes.ark import ArkContext
from kgagents.nodes.budget import BudgetError, budget_reached, check_budget
from kgagents.nodes.grounded import GroundedContext
from kgagents.nodes.kgot import KGoTContext
from tests import kgot_script as KS
from tests.agent_g.conftest import QUESTION as AGENT_G_QUESTION
from tests.agent_g.conftest import comment, decide, prime, validate  # noqa: F401  (prime: a fixture)
from tests.ark import script as AS
from tests.evals.helpers import FAST, kgot_direct_steps, tiny_gaia
from tests.grounded.conftest import academic, action, step, thought  # noqa: F401  (academic: a fixture)
from tests.test_kgot_graph import ARRAY_WRITE, QUESTION, SORT_CALL

TOKEN_BUDGET = "token budget reached"


async def run(module, task: dict, context, thread: str = "t") -> tuple[dict, dict]:
    """The run's output (what ``invoke`` returns) and its whole final state."""
    graph = module.compile_graph(InMemorySaver())
    config = {"configurable": {"thread_id": thread}, "recursion_limit": context.recursion_limit}
    output = await graph.ainvoke(task, config, context=context)
    return output, dict((await graph.aget_state(config)).values)


def kgot_steps() -> list[dict]:
    """Every vote INSERT (the run would go on to its iteration limit), then the forced solution."""
    return [*KS.votes("INSERT", 0), *KS.merge(times=0), *KS.tool_calls(SORT_CALL, times=0),
            *KS.write(ARRAY_WRITE, times=0), *KS.forced("sorted [2, 15, 23, 37, 42, 88]; third + fifth = 65"),
            *KS.need_math(False), *KS.parse("65", "65", "65")]


async def test_kgot_at_its_budget_generates_the_forced_solution(tmp_path):
    model = ScriptedChatModel(steps=kgot_steps())
    ctx = KGoTContext(model=model, work_dir=str(tmp_path), solve_mode="direct", budget_tokens=1,
                      api_backoff_base_s=0.001, tool_backoff_base_s=0.001)
    output, state = await run(kgot, {"question": QUESTION}, ctx)
    assert state["iteration"] == 1 and state["decision"] == "FORCED_SOLVE"  # one iteration of the default 7
    assert [op["kind"] for op in state["solve_operations"]] == ["forced_solution"]
    assert output["final_answer"] == state["final_answer"] == "65"
    assert output["budget_stop"] == state["budget_stop"] and state["budget_stop"].startswith(TOKEN_BUDGET)


async def test_kgot_within_its_budget_is_not_stopped(tmp_path):
    model = ScriptedChatModel(steps=kgot_steps())
    ctx = KGoTContext(model=model, work_dir=str(tmp_path), solve_mode="direct", max_iterations=2,
                      budget_tokens=10_000_000, api_backoff_base_s=0.001, tool_backoff_base_s=0.001)
    output, state = await run(kgot, {"question": QUESTION}, ctx)
    assert state["iteration"] == 2 and "budget_stop" not in state and "budget_stop" not in output


async def test_ark_at_its_budget_goes_to_the_final_answer_which_may_abstain():
    data = resources.files("kgagents") / "data" / "ark" / "example_data.json"
    example = json.loads(data.read_text("utf-8"))
    model = ScriptedChatModel(steps=[*AS.anchor("Yui Yuigahama"), *AS.final(None)])
    output, state = await run(ark, {"question": example["question"], "kg": example["graph"]},
                              ArkContext(model=model, budget_tokens=1, api_backoff_base_s=0.001))
    assert len(model.calls) == 2 and not state.get("steps")  # the anchor, then straight to step 11
    assert state["final_answer"] == output["final_answer"] == "None"  # the model abstained
    assert state["exit_reason"] == output["exit_reason"] == state["budget_stop"]
    assert state["budget_stop"].startswith(TOKEN_BUDGET)


async def test_grounded_at_its_budget_answers_from_the_best_state(academic):  # noqa: F811
    steps = [thought(1, "I need the paper node first."),
             action(1, ("RetrieveNode", {"keyword": "Deep Graphs"})),
             step(r"\[stage: final answer\]", structured={"answer": "Ann Lee"})]
    model = ScriptedChatModel(steps=steps)
    output, state = await run(grounded, {"question": "Who wrote Deep Graphs?", "graph": academic},
                              GroundedContext(model=model, budget_tokens=1, api_backoff_base_s=0.001))
    # the thought reached the budget, so the step's action never started: the answer comes from the question
    assert state["depth"] == 1 and state["best"] == "t0" and not state.get("failures")
    assert output["final_answer"] == "Ann Lee" and output["exit_reason"].startswith(TOKEN_BUDGET)
    assert len(model.calls) == 2 and "[stage: final answer]" in model.calls[-1]


async def test_agent_g_at_its_budget_finishes_with_the_generators_answer(prime):  # noqa: F811
    steps = [decide("\\d", entities=[("CYP3A4", "gene/protein")], relations=["enzyme"], times=0),
             validate("\\d", "No.", times=0), comment("\\d", "incorrect entity/relation", times=0)]
    model = ScriptedChatModel(steps=steps)
    ctx = AgentGContext(model=model, task="retrieval", max_iterations=3, budget_tokens=1,
                        api_backoff_base_s=0.001)
    output, state = await run(agent_g, {"question": AGENT_G_QUESTION, "graph": prime}, ctx)
    assert len(state["iterations"]) == 1 and "feedback" not in state["iterations"][0]  # no commentor
    assert sorted(state["ranked_ids"]) == ["0", "6"] and output["evidence"]["ranked_ids"]
    assert state["exit_reason"].startswith(TOKEN_BUDGET) and output["budget_stop"] == state["budget_stop"]


async def test_a_cost_budget_counts_dollars_and_needs_the_prices(tmp_path, monkeypatch):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"scripted": {"input": 1e6, "output": 1e6}}), encoding="utf-8")
    monkeypatch.setenv("KGAGENTS_PRICES_FILE", str(prices))
    model = ScriptedChatModel(steps=kgot_steps())
    ctx = KGoTContext(model=model, work_dir=str(tmp_path / "w"), solve_mode="direct", budget_usd=0.5,
                      api_backoff_base_s=0.001, tool_backoff_base_s=0.001)
    output, state = await run(kgot, {"question": QUESTION}, ctx)
    assert state["iteration"] == 1 and output["budget_stop"].startswith("cost budget reached: $")
    assert output["cost_usd"] > 0.5
    monkeypatch.delenv("KGAGENTS_PRICES_FILE")
    unpriced = {"scripted": {"calls": 1, "input_tokens": 5, "output_tokens": 5, "cost_usd": None}}
    with pytest.raises(BudgetError, match="scripted has none"):
        budget_reached(unpriced, KGoTContext(budget_usd=1.0))
    with pytest.raises(BudgetError, match="positive"):
        check_budget(0.0, None)


async def test_an_evaluation_stops_starting_items_at_its_budget_and_says_how_many_it_skipped(tmp_path):
    answers = {f"Q{i}": str(2 * i) for i in range(4)}
    model = ScriptedChatModel(steps=kgot_direct_steps(answers))
    options = EvalOptions(workflow="kgot", out_dir=tmp_path / "out", progress=False, concurrency=1,
                          context=KGoTContext(model=model, **FAST), budget_tokens=1)
    result = await evaluate(options, tiny_gaia(4))
    assert result.ran == 1 and result.budget_skipped == 3 and result.budget_stop.startswith(TOKEN_BUDGET)
    assert [r["id"] for r in result.records] == ["t0"] and result.records[0]["correct"] is True
    options = EvalOptions(workflow="kgot", out_dir=tmp_path / "out", progress=False, concurrency=1,
                          context=KGoTContext(model=model, **FAST))
    again = await evaluate(options, tiny_gaia(4))
    assert again.ran == 3 and again.budget_stop is None and again.budget_skipped == 0  # the rest, later
    with pytest.raises(ValueError, match="one process"):
        EvalOptions(workflow="kgot", out_dir=tmp_path, processes=2, budget_usd=1.0)


def test_the_cli_takes_a_run_budget_and_an_evaluation_budget(tmp_path, capsys):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "budget", "steps": kgot_steps()}), encoding="utf-8")
    runs = ["--runs-dir", str(tmp_path / "runs")]
    assert main([*runs, "ask", QUESTION, "--model", f"scripted:{script}", "--thread", "b1",
                 "--budget-tokens", "1", "--set", "solve_mode=direct", "--quiet"]) == 0
    printed = capsys.readouterr()
    assert printed.out.strip() == "65" and "the run ended at its budget (token budget reached" in printed.err
    assert main([*runs, "show", "b1"]) == 0
    assert "Ended at its budget: token budget reached" in capsys.readouterr().out

    data = tmp_path / "simpleqa.csv"
    data.write_text("metadata,problem,answer\n" + "".join(f"{{}},Question Q{i}: what is {i} + {i}?,{2 * i}\n"
                                                          for i in range(3)), encoding="utf-8")
    grader = KS.step("Your job is to look at a question", times=0, content="A")
    answers = {f"Q{i}": str(2 * i) for i in range(3)}
    script.write_text(json.dumps({"steps": [grader, *kgot_direct_steps(answers)]}), encoding="utf-8")
    out = tmp_path / "eval"
    assert main(["eval", "kgot", "--dataset", "simpleqa", "--data", str(data), "--model",
                 f"scripted:{script}", "--out", str(out), "--concurrency", "1", "--no-progress", "--no-report",
                 "--budget-tokens", "1", "--set", "solve_mode=direct", "--set", "num_next_steps_decision=2"]) == 0
    printed = capsys.readouterr()
    assert "token budget reached" in printed.err and "2 item run(s) not started" in printed.err
    assert len((out / "results.jsonl").read_text().splitlines()) == 1
