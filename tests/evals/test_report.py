"""Reports: tables per level, cost per solved task, runtime by node, the Pareto plot, several directories."""

from __future__ import annotations

import pytest

from evals.datasets import Dataset, Item
from evals.report import build_report, load_runset, pareto_front
from evals.runner import EvalOptions, evaluate
from graphs.baselines import zeroshot  # noqa: F401  (the workflow is registered by name)
from kgagents.scripted import ScriptedChatModel
from kgagents.usage import register_price
from nodes.baselines import BaselineContext
from nodes.context import Context
from nodes.fusion import FusionContext
from tests import kgot_script as S
from tests.evals.helpers import FAST, both, kgot_direct_steps, tiny_gaia

PNG = b"\x89PNG\r\n\x1a\n"


def test_pareto_front():
    points = [(1.0, 5), (2.0, 5), (0.5, 3), (3.0, 8), (0.5, 2)]
    assert pareto_front(points) == [2, 0, 3]


async def two_evaluations(tmp_path):
    register_price("scripted-kgot", 1.0, 4.0)
    register_price("scripted-zs", 0.1, 0.4)
    kgot_model = ScriptedChatModel(steps=kgot_direct_steps({f"Q{i}": str(2 * i) for i in range(4)}),
                                   model_name="scripted-kgot")
    await evaluate(EvalOptions(workflow="kgot", out_dir=tmp_path / "kgot", progress=False,
                               context=Context(model=kgot_model, **FAST), concurrency=4), tiny_gaia(4))
    zs_steps = [S.step("Q0:", content="FINAL ANSWER: 0"), S.step("Q1:", content="FINAL ANSWER: 3"),
                S.step("Q2:", content="FINAL ANSWER: 4"), S.step("Q3:", **{"raise": "boom", "status": 401})]
    zs_model = ScriptedChatModel(steps=zs_steps, model_name="scripted-zs")
    await evaluate(EvalOptions(workflow="zeroshot", out_dir=tmp_path / "zs", progress=False,
                               context=BaselineContext(model=zs_model, max_api_retries=0), concurrency=2),
                   tiny_gaia(4))


async def test_report_compares_directories(tmp_path):
    await two_evaluations(tmp_path)
    path = build_report([tmp_path / "kgot", tmp_path / "zs"], tmp_path / "report",
                        labels=["KGoT", "Zero-shot"])
    text = path.read_text()
    kgot, zs = load_runset(tmp_path / "kgot"), load_runset(tmp_path / "zs")
    assert kgot.solved == 4 and zs.solved == 2 and kgot.cost > zs.cost > 0
    assert "| KGoT | tiny | 4 | 4 | 100.0% |" in text
    assert "| Zero-shot | tiny | 4 | 2 | 50.0% |" in text
    assert f"${kgot.cost / 4:.4f}" in text  # cost per solved task
    assert "## Accuracy and cost per level" in text
    assert "| Level 1 | 2/2 (100.0%)" in text and "| Level 2 | 2/2 (100.0%)" in text
    assert "| Level 2 | 2/2 (100.0%), $0.0048 | 0/2 (0.0%)" in text  # zero-shot: one wrong, one failed
    assert "## Runtime by node" in text and "| decide_next_step |" in text and "| answer_zero_shot |" in text
    zs_row = next(line for line in text.splitlines() if line.startswith("| Zero-shot | tiny"))
    assert zs_row.split("|")[11].strip() == "1"  # errors column
    for png in ("pareto.png", "runtime_by_node.png"):
        assert (tmp_path / "report" / png).read_bytes()[:8] == PNG


async def test_report_of_one_directory_and_repetitions(tmp_path):
    model = ScriptedChatModel(steps=kgot_direct_steps({"Q0": "0", "Q1": "2"}))
    await evaluate(EvalOptions(workflow="kgot", out_dir=tmp_path / "r", progress=False, runs=2,
                               context=Context(model=model, **FAST)), tiny_gaia(2))
    text = build_report([tmp_path / "r"], plots=False).read_text()
    assert "## Repetitions" in text and "100.0%, 100.0%" in text
    assert not (tmp_path / "r" / "pareto.png").exists()


def test_report_needs_an_evaluation_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="not an evaluation directory"):
        build_report([tmp_path])
    with pytest.raises(ValueError, match="at least one"):
        build_report([])


def fusion_steps() -> list[dict]:
    """Three variants that answer every item the same way: the two Python-written answers say 7, SPARQL says 2."""
    return [*S.votes("RETRIEVE", 0),
            S.step(r"knowledge graph \(Python \(NetworkX\)\)\. Write code that retrieves", times=0,
                   structured={"code": "result = 'ANS 7'"}),
            S.step(r"knowledge graph \(SPARQL 1\.1\)\. Write code that retrieves", times=0,
                   structured={"code": 'SELECT ?x WHERE { BIND("ANS 2" AS ?x) }'}),
            S.step(S.DIRECT, times=0, structured={"solution": "ANS 7"}), *S.need_math(False, times=0),
            S.step(both(S.PARSE, "ANS 7"), times=0, structured={"final_answer": "7"}),
            S.step(both(S.PARSE, "ANS 2"), times=0, structured={"final_answer": "2"})]


async def test_fusion_reports_the_ideal_fusion_beside_the_majority(tmp_path):
    """KGoT §5.1: the ideal fusion counts a task as solved when any variant solved it (Figure 13, Table 1)."""
    items = [Item(id="seven", question="Question A: which number?", gold="7", group="Level 1"),
             Item(id="two", question="Question B: which number?", gold="2", group="Level 2")]
    dataset = Dataset(name="tiny", split="validation", items=items, scorer="gaia", group_label="Level")
    variants = ["networkx:query", "sparql:query", "networkx:direct"]
    model = ScriptedChatModel(steps=fusion_steps())
    context = FusionContext(model=model, allow_weak_sandbox=True, num_next_steps_decision=1,
                            max_final_solution_parsing=1, variants=",".join(variants))
    result = await evaluate(EvalOptions(workflow="fusion", out_dir=tmp_path / "fusion", progress=False,
                                        context=context), dataset)
    by_id = {r["id"]: r for r in result.records}
    assert by_id["seven"]["answer"] == "7" and by_id["seven"]["correct"] is True
    assert by_id["two"]["answer"] == "7" and by_id["two"]["correct"] is False  # the majority is wrong here
    assert {v: g["answer"] for v, g in by_id["two"]["variants"].items()} == {
        "networkx:query": "7", "sparql:query": "2", "networkx:direct": "7"}
    assert [g["correct"] for g in by_id["two"]["variants"].values()] == [False, True, False]
    assert result.metrics["accuracy"] == 0.5 and result.metrics["ideal_fusion_accuracy"] == 1.0
    assert result.metrics["variants"]["sparql:query"] == {"correct": 1, "accuracy": 0.5}

    text = build_report([tmp_path / "fusion"], labels=["KGoT fusion"]).read_text()
    assert "## Fusion: the majority vote and the ideal fusion" in text
    assert "| majority vote (the run's answer) | 1/2 (50.0%) |" in text
    assert "| ideal fusion: networkx:query + sparql:query + networkx:direct | 2/2 (100.0%) |" in text
    assert "| ideal fusion: networkx:query + networkx:direct | 1/2 (50.0%) |" in text  # Figure 13's pairs
    assert "| ideal fusion: sparql:query + networkx:direct | 2/2 (100.0%) |" in text
    assert "| variant alone: sparql:query | 1/2 (50.0%) |" in text
    assert "| Level 2 | 0/1 (0.0%) | 1/1 (100.0%) |" in text  # Table 1's fusion row, per level


async def test_ideal_fusion_of_separate_runs(tmp_path):
    """The paper simulates fusion from single runs: `kgagents report A B --ideal-fusion`."""
    await two_evaluations(tmp_path)
    text = build_report([tmp_path / "kgot", tmp_path / "zs"], tmp_path / "report", labels=["KGoT", "Zero-shot"],
                        plots=False, ideal_fusion=True).read_text()
    kgot, zs = load_runset(tmp_path / "kgot"), load_runset(tmp_path / "zs")
    assert f"| KGoT + Zero-shot | 4 | 4 | 100.0% | ${kgot.cost + zs.cost:.4f} |" in text
