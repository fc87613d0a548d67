"""Reports: tables per level, cost per solved task, runtime by node, the Pareto plot, several directories."""

from __future__ import annotations

import pytest

from evals.report import build_report, load_runset, pareto_front
from evals.runner import EvalOptions, evaluate
from graphs.baselines import zeroshot  # noqa: F401  (the workflow is registered by name)
from kgagents.scripted import ScriptedChatModel
from kgagents.usage import register_price
from nodes.baselines import BaselineContext
from nodes.context import Context
from tests import kgot_script as S
from tests.evals.helpers import FAST, kgot_direct_steps, tiny_gaia

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
    assert "| Level 2 | 2/2 (100.0%), $0.0044 | 0/2 (0.0%)" in text  # zero-shot: one wrong, one failed
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
