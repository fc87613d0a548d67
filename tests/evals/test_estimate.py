"""``kgagents eval ... --estimate``: the expected calls, tokens and cost of what an evaluation has still to do, from
recorded runs of the workflow where there are some, else from its call structure."""

from __future__ import annotations

import json

import pytest

from kgagents.cli import main
from kgagents.core.scripted import ScriptedChatModel
from kgagents.core.usage import cost_of
from kgagents.evals import call_structures
from kgagents.evals.datasets import load_dataset
from kgagents.evals.estimate import _model_of_usage, estimate, format_estimate
from kgagents.evals.runner import EvalOptions, evaluate
from kgagents.graphs import registry
from kgagents.nodes.kgot import KGoTContext
from kgagents.prompts import ark as ARK_PROMPTS
from tests.evals.helpers import FAST, kgot_direct_steps, tiny_gaia

MINI = "openai:gpt-4o-mini"


def options(out, workflow="kgot", **values):
    return EvalOptions(workflow=workflow, out_dir=out, progress=False, concurrency=1, context_values=values)


async def recorded_evaluation(out, n=4, ids=None):
    answers = {f"Q{i}": str(2 * i) for i in range(n)}
    dataset = tiny_gaia(n)
    if ids is not None:
        dataset.items = [item for item in dataset.items if item.id in ids]
    run = EvalOptions(workflow="kgot", out_dir=out, progress=False, concurrency=1,
                      context=KGoTContext(model=ScriptedChatModel(steps=kgot_direct_steps(answers)), **FAST))
    return await evaluate(run, dataset)


def mean(records, key):
    return sum(entry[key] for r in records for entry in r["usage"].values()) / len(records)


async def test_recorded_runs_give_the_mean_per_item_priced_at_this_evaluations_model(tmp_path):
    result = await recorded_evaluation(tmp_path / "scripted")
    records = result.records
    assert len(records) == 4 and all(r["usage"] for r in records)
    est = estimate(options(tmp_path / "mini", model=MINI, **FAST), tiny_gaia(6))
    assert est.source == "recorded" and est.todo == 6 and est.done == 0
    assert "4 recorded item run(s) of kgot (same dataset)" in est.basis and "scripted" in est.basis
    calls, inp, out = mean(records, "calls"), mean(records, "input_tokens"), mean(records, "output_tokens")
    assert (est.per_item.calls, est.per_item.input_tokens, est.per_item.output_tokens) == (calls, inp, out)
    assert est.expected.calls == pytest.approx(6 * calls) and est.expected.input_tokens == pytest.approx(6 * inp)
    # the scripted model's tokens, repriced at the model this evaluation would use
    assert est.per_item.cost_usd == pytest.approx(cost_of("gpt-4o-mini", round(inp), round(out)))
    assert est.expected.cost_usd == pytest.approx(6 * est.per_item.cost_usd)
    text = format_estimate(est)
    assert "6 item run(s) to do" in text and f"${est.expected.cost_usd:,.4f}" in text and "assumed" not in text


async def test_a_resumed_evaluation_is_estimated_for_the_items_it_has_left(tmp_path):
    out = tmp_path / "kgot-tiny"
    await recorded_evaluation(out, ids={"t0", "t1"})
    est = estimate(options(out), tiny_gaia(4))
    assert (est.todo, est.done) == (2, 2) and est.source == "recorded"
    assert "(2 finished, skipped)" in format_estimate(est)


async def test_runs_of_another_workflow_are_not_used(tmp_path):
    await recorded_evaluation(tmp_path / "kgot-runs")
    est = estimate(options(tmp_path / "ark-new", workflow="ark", model=MINI), tiny_gaia(2))
    assert est.source == "structure" and "no recorded runs of it" in est.basis


def test_the_structure_estimate_follows_the_prompts_the_limits_and_the_price(tmp_path, monkeypatch):
    dataset = load_dataset("cr-lt", None, limit=3)
    est = estimate(options(tmp_path / "a", workflow="ark", model=MINI), dataset, grader=MINI)
    structure = call_structures.structure_of("ark", registry.get("ark").make_context({}))
    assert est.source == "structure" and est.todo == 3
    assert est.per_item.calls == sum(c.expected for c in structure.calls)
    assert est.at_most.calls == 3 * sum(c.at_most for c in structure.calls) > est.expected.calls
    assert est.expected.cost_usd == pytest.approx(cost_of("gpt-4o-mini", round(est.expected.input_tokens),
                                                          round(est.expected.output_tokens)), rel=1e-3)
    assert est.grader.calls == 3 and est.grader.cost_usd > 0
    assert any("k_max = 8" in line for line in est.assumptions)

    more_steps = estimate(options(tmp_path / "b", workflow="ark", model=MINI, k_max=16), dataset)
    assert more_steps.at_most.calls > est.at_most.calls and more_steps.expected.calls == est.expected.calls

    longer = ARK_PROMPTS.SELECT_ANCHOR + "x" * 4000  # a longer prompt is a larger estimate
    monkeypatch.setattr(ARK_PROMPTS, "SELECT_ANCHOR", longer)
    grown = estimate(options(tmp_path / "c", workflow="ark", model=MINI), dataset)
    assert grown.expected.input_tokens >= est.expected.input_tokens + 3 * 1000 * 3


def test_every_structure_is_a_registered_workflow_and_bounds_its_expected_path():
    assert set(call_structures.STRUCTURES) <= set(registry.names())
    for name in call_structures.STRUCTURES:
        structure = call_structures.structure_of(name, registry.get(name).make_context({}))
        assert structure.calls and any(c.expected > 0 for c in structure.calls), name
        for call in structure.calls:
            assert call.at_most is None or call.expected <= call.at_most, (name, call.stage)
            assert call.input_tokens(100) > 0 and call.output_tokens > 0


def test_tree_search_costs_more_than_a_chain_and_a_workflow_without_a_structure_says_so(tmp_path):
    dataset = tiny_gaia(2)
    chain = estimate(options(tmp_path / "cot", workflow="grounded", model=MINI), dataset)
    tree = estimate(options(tmp_path / "tot", workflow="grounded", model=MINI, strategy="tot"), dataset)
    graph = estimate(options(tmp_path / "got", workflow="grounded", model=MINI, strategy="got"), dataset)
    assert chain.expected.calls < tree.expected.calls < graph.expected.calls
    explore = estimate(options(tmp_path / "x", workflow="grounded", model=MINI, interaction="explore"), dataset)
    assert explore.unbounded and "not counting prune relations" in format_estimate(explore)
    none = estimate(options(tmp_path / "s", workflow="surfer"), dataset)
    assert none.source == "none" and "--limit 3" in format_estimate(none)


def test_the_cli_estimates_without_a_key_and_runs_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "never"
    assert main(["eval", "agent-g", "--dataset", "cr-lt", "--limit", "2", "--model", MINI, "--out", str(out),
                 "--estimate"]) == 0
    printed = capsys.readouterr().out
    assert "estimate for agent-g on cr-lt: 2 item run(s) to do" in printed
    assert "from agent-g's call structure" in printed and "expected:" in printed and "$" in printed
    assert not out.exists()
    assert main(["eval", "ark", "--dataset", "cr-lt", "--limit", "1", "--protocol", "paper", "--model", MINI,
                 "--out", str(out), "--estimate"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("estimate for ark") == 2 and "30 item run(s)" in printed and "1 item run(s)" in printed
    assert "unpriced" not in printed
    assert main(["eval", "ark", "--dataset", "cr-lt", "--limit", "1", "--model", "ollama:llama3", "--out",
                 str(out), "--estimate"]) == 0
    printed = capsys.readouterr().out
    assert "cost unknown" in printed and "unpriced: ollama:llama3" in printed


def test_the_workflow_may_come_after_the_options_and_its_flags_still_apply(capsys):
    assert main(["eval", "--dataset", "cr-lt", "ark", "--limit", "1", "--c-max", "2", "--model", MINI,
                 "--estimate"]) == 0
    assert "at most c_max = 2 attempts" in capsys.readouterr().out


def test_a_dated_release_in_the_recorded_usage_is_repriced_as_its_role():
    recorded = {"tools": "openai:gpt-4o", "graph_executor": "openai:gpt-4o-mini"}
    current = {"graph_executor": "openai:gpt-4.1-nano", "tools": "openai:gpt-4.1"}
    assert _model_of_usage("gpt-4o-mini-2024-07-18", recorded, current) == "openai:gpt-4.1-nano"
    assert _model_of_usage("gpt-4o-2024-08-06", recorded, current) == "openai:gpt-4.1"
    assert _model_of_usage("claude-haiku-4-5", recorded, current) == "claude-haiku-4-5"  # no role used it


async def test_recorded_grader_calls_are_repriced_at_this_evaluations_grader(tmp_path):
    await recorded_evaluation(tmp_path / "graded")
    manifest = tmp_path / "graded" / "manifest.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "grader_model": "openai:gpt-4o"}))
    lines = (tmp_path / "graded" / "results.jsonl").read_text().splitlines()
    grader_usage = {"gpt-4o-2024-08-06": {"calls": 1, "input_tokens": 1000, "output_tokens": 10, "cost_usd": 0.1}}
    (tmp_path / "graded" / "results.jsonl").write_text(
        "".join(json.dumps({**json.loads(line), "grader_usage": grader_usage}) + "\n" for line in lines))
    est = estimate(options(tmp_path / "new", model=MINI, **FAST), tiny_gaia(4), grader=MINI)
    assert est.grader.calls == 4 and est.grader.input_tokens == 4000
    assert est.grader.cost_usd == pytest.approx(4 * cost_of("gpt-4o-mini", 1000, 10))  # not gpt-4o's price
