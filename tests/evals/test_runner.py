"""The batch runner: concurrency, resume after an interruption, failing items, cost accounting."""

from __future__ import annotations

import asyncio
import json

import pytest

from kgagents.core.runs import sqlite_checkpointer
from kgagents.core.scripted import ScriptedChatModel
from kgagents.core.usage import register_price
from kgagents.evals.runner import (
    RESULTS_FILE,
    Adapter,
    EvalOptions,
    evaluate,
    read_results,
    register_adapter,
    thread_id_for,
)
from kgagents.nodes.kgot import KGoTContext
from tests import kgot_script as S
from tests.evals.helpers import FAST, GatedChatModel, both, kgot_direct_steps, tiny_gaia

ANSWERS = {f"Q{i}": str(2 * i) for i in range(4)}


def options(tmp_path, model, context=None, **kw):
    return EvalOptions(workflow="kgot", out_dir=tmp_path / "out", progress=False,
                       context=context or KGoTContext(model=model, **FAST), **kw)


async def test_every_item_gets_a_line_with_answer_score_usage_and_timing(tmp_path):
    answers = {**ANSWERS, "Q3": "7"}  # one wrong answer
    model = ScriptedChatModel(steps=kgot_direct_steps(answers))
    result = await evaluate(options(tmp_path, model, concurrency=3), tiny_gaia(4))
    assert result.ran == 4 and result.skipped == 0 and result.failed == 0
    by_id = {r["id"]: r for r in result.records}
    assert [by_id[f"t{i}"]["correct"] for i in range(4)] == [True, True, True, False]
    r0 = by_id["t0"]
    assert r0["thread_id"] == "tiny-t0-run0" and r0["answer"] == "0" and r0["gold"] == "0"
    assert r0["usage"]["scripted"]["calls"] == 5  # 2 votes, solve, need-for-math, 1 parse
    assert r0["tokens"]["input_tokens"] > 0 and r0["error"] is None
    assert {"decide_next_step", "solve_directly", "parse_solution"} <= set(r0["node_s"])
    assert r0["wall_s"] > 0 and r0["iterations"] == 0 and r0["tool_calls"] == 0
    assert result.metrics["accuracy"] == 0.75
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["workflow"] == "kgot"
    assert sum(r["usage"]["scripted"]["calls"] for r in result.records) == len(model.calls)


async def test_cost_accounting_per_model(tmp_path):
    register_price("scripted-priced", 1.0, 2.0)  # USD per million tokens
    model = ScriptedChatModel(steps=kgot_direct_steps(ANSWERS), model_name="scripted-priced")
    result = await evaluate(options(tmp_path, model, concurrency=4), tiny_gaia(4))
    for r in result.records:
        u = r["usage"]["scripted-priced"]
        expected = (u["input_tokens"] * 1.0 + u["output_tokens"] * 2.0) / 1e6
        assert r["cost_usd"] == pytest.approx(expected) and expected > 0
    assert result.metrics["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in result.records))


@pytest.mark.slow
async def test_failing_item_never_stops_the_batch_and_can_be_retried_from_its_checkpoint(tmp_path):
    model = ScriptedChatModel(steps=kgot_direct_steps(ANSWERS, fail={"Q2": "the provider is down"}))
    first = await evaluate(options(tmp_path, model, concurrency=2), tiny_gaia(4))
    assert first.ran == 4 and first.failed == 1
    [bad] = [r for r in first.records if r["error"]]
    assert bad["id"] == "t2" and "the provider is down" in bad["error"] and bad["correct"] is False
    assert bad["usage"]["scripted"]["calls"] >= 2  # the votes made before the failure are accounted
    calls_before = len(model.calls)

    # The same command again skips every item with a line, the failed one included ...
    again = await evaluate(options(tmp_path, model, concurrency=2), tiny_gaia(4))
    assert again.ran == 0 and again.skipped == 4 and len(model.calls) == calls_before

    # ... and --retry-failed resumes it from its checkpoint: the votes are not asked again.
    retry = await evaluate(options(tmp_path, model, concurrency=2, retry_failed=True), tiny_gaia(4))
    assert retry.ran == 1 and retry.resumed == 1 and retry.failed == 0
    new_prompts = model.calls[calls_before:]
    assert not any(S.VOTE in p for p in new_prompts)
    assert sum(S.DIRECT in p for p in new_prompts) == 1
    fixed = {r["id"]: r for r in read_results(tmp_path / "out")}["t2"]
    assert fixed["correct"] is True and fixed["error"] is None and fixed["resumed"] is True
    assert fixed["usage"]["scripted"]["calls"] == 5  # the whole run's calls, each counted once
    lines = (tmp_path / "out" / RESULTS_FILE).read_text().splitlines()
    assert len(lines) == 5  # the failed line stays as history; the last line per item wins


@pytest.mark.slow
async def test_resume_after_interruption_pays_nothing_twice(tmp_path):
    """Cancel a real evaluation while one item waits inside its solve step, then run the same evaluation."""
    dataset = tiny_gaia(4)
    reference = ScriptedChatModel(steps=kgot_direct_steps(ANSWERS))
    await evaluate(EvalOptions(workflow="kgot", out_dir=tmp_path / "ref", progress=False,
                               context=KGoTContext(model=reference, **FAST)), dataset)

    gated = GatedChatModel(steps=kgot_direct_steps(ANSWERS), block=both(S.DIRECT, "Q1:"))
    task = asyncio.create_task(evaluate(options(tmp_path, gated, concurrency=2), dataset))
    for _ in range(500):
        await asyncio.sleep(0.02)
        if gated.blocked and len(read_results(tmp_path / "out")) == 3:
            break
    else:
        pytest.fail("the evaluation did not reach the interruption point")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert {r["id"] for r in read_results(tmp_path / "out")} == {"t0", "t2", "t3"}
    async with sqlite_checkpointer(tmp_path / "out" / "checkpoints.sqlite") as saver:
        from kgagents.graphs.kgot import compile_graph

        snap = await compile_graph(saver).aget_state({"configurable": {"thread_id": thread_id_for("tiny", "t1", 0)}})
        assert snap.next == ("solve_directly",)

    fresh = ScriptedChatModel(steps=kgot_direct_steps(ANSWERS))
    resumed = await evaluate(options(tmp_path, fresh, concurrency=2), dataset)
    assert resumed.skipped == 3 and resumed.ran == 1 and resumed.resumed == 1
    assert all("Q1:" in p for p in fresh.calls)  # only the interrupted item ran
    assert not any(S.VOTE in p for p in fresh.calls)  # its votes had finished: not asked again
    assert len(gated.calls) + len(fresh.calls) == len(reference.calls)
    records = {r["id"]: r for r in resumed.records}
    assert all(r["correct"] for r in records.values())
    assert records["t1"]["usage"]["scripted"]["calls"] == 5


async def test_several_runs_are_separate_threads(tmp_path):
    model = ScriptedChatModel(steps=kgot_direct_steps(ANSWERS))
    result = await evaluate(options(tmp_path, model, concurrency=4, runs=2), tiny_gaia(2))
    assert sorted((r["id"], r["run"]) for r in result.records) == [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)]
    assert {r["thread_id"] for r in result.records} == {"tiny-t0-run0", "tiny-t0-run1", "tiny-t1-run0",
                                                        "tiny-t1-run1"}


async def test_a_directory_holds_one_evaluation(tmp_path):
    model = ScriptedChatModel(steps=kgot_direct_steps(ANSWERS))
    await evaluate(options(tmp_path, model), tiny_gaia(1))
    other = tiny_gaia(1)
    other.name = "other"
    with pytest.raises(ValueError, match="holds another evaluation \\(dataset: 'tiny' there, 'other' now\\)"):
        await evaluate(options(tmp_path, model), other)


async def test_a_rerun_with_another_model_or_setting_is_refused_and_nothing_is_rewritten(tmp_path):
    """Rerunning into a directory with another model once skipped every item, reported the first model's
    results and rewrote the manifest to name the new model: now it is refused before anything runs."""
    first = ScriptedChatModel(steps=kgot_direct_steps(ANSWERS), model_name="model-a")
    await evaluate(options(tmp_path, first), tiny_gaia(2))
    manifest = (tmp_path / "out" / "manifest.json").read_text()
    assert json.loads(manifest)["models"] == {"graph_executor": "model-a", "tool_executor": "model-a",
                                              "tools": "model-a"}
    other = ScriptedChatModel(steps=kgot_direct_steps(ANSWERS), model_name="model-b")
    with pytest.raises(ValueError, match=r"graph_executor': 'model-a'.*'model-b'.*Use another --out"):
        await evaluate(options(tmp_path, other), tiny_gaia(2))
    with pytest.raises(ValueError, match=r"context: .*max_iterations"):
        other_limit = KGoTContext(model=first, **{**FAST, "max_iterations": 3})
        await evaluate(options(tmp_path, first, context=other_limit), tiny_gaia(2))
    with pytest.raises(ValueError, match="seed: None there, 7 now"):
        await evaluate(options(tmp_path, first, seed=7), tiny_gaia(2))
    assert (tmp_path / "out" / "manifest.json").read_text() == manifest and len(other.calls) == 0
    again = await evaluate(options(tmp_path, first), tiny_gaia(3))  # the same settings, one item more: fine
    assert again.skipped == 2 and again.ran == 1


@pytest.mark.slow
def test_the_cli_refuses_another_model_from_the_environment_too(tmp_path, monkeypatch, capsys):
    """The model may come from KGAGENTS_MODEL rather than --model: the manifest records the resolved one."""
    from kgagents.cli import main

    script = tmp_path / "s.json"
    steps = [{"when": "", "times": 0, "content": "FINAL ANSWER: 1"}]
    script.write_text(json.dumps({"name": "scripted", "steps": steps}))
    args = ["eval", "zeroshot", "--dataset", "cr-lt", "--limit", "1", "--out", str(tmp_path / "e"),
            "--no-progress", "--no-report"]
    monkeypatch.setenv("KGAGENTS_MODEL", f"scripted:{script}")
    assert main(args) == 0
    assert "models: scripted (every role)" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text(script.read_text())
    monkeypatch.setenv("KGAGENTS_MODEL", f"scripted:{other}")
    assert main(args) == 2
    assert "holds another evaluation (models:" in capsys.readouterr().err


async def test_items_whose_question_or_answer_changed_are_refused(tmp_path):
    model = ScriptedChatModel(steps=kgot_direct_steps(ANSWERS))
    await evaluate(options(tmp_path, model), tiny_gaia(2))
    changed = tiny_gaia(2)
    changed.items[1].gold = "something else"
    with pytest.raises(ValueError, match="results for other versions of 1 item\\(s\\) \\(t1\\)"):
        await evaluate(options(tmp_path, model), changed)


async def test_torn_last_line_is_run_again(tmp_path):
    model = ScriptedChatModel(steps=kgot_direct_steps(ANSWERS))
    await evaluate(options(tmp_path, model), tiny_gaia(2))
    path = tmp_path / "out" / RESULTS_FILE
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])  # killed while writing
    again = await evaluate(options(tmp_path, model), tiny_gaia(2))
    assert again.skipped == 1 and again.ran == 1 and again.resumed == 0  # finished thread: only re-scored


async def test_adapter_for_a_workflow_with_other_input_and_output(tmp_path):
    seen = []

    def to_input(item):
        seen.append(item.inputs["extra"])
        return {"question": f"{item.question} ({item.inputs['extra']})"}

    register_adapter("kgot", Adapter(to_input=to_input, to_answer=lambda s: f"{s['final_answer']}",
                                     stats=lambda s: {"iterations": 99}))
    try:
        ds = tiny_gaia(1)
        ds.items[0].inputs = {"extra": "ctx"}
        model = ScriptedChatModel(steps=kgot_direct_steps(ANSWERS))
        result = await evaluate(options(tmp_path, model), ds)
    finally:
        from kgagents.evals.runner import ADAPTERS
        ADAPTERS.pop("kgot", None)
    assert seen == ["ctx"] and any("(ctx)" in p for p in model.calls)
    assert result.records[0]["iterations"] == 99 and result.records[0]["correct"] is True
