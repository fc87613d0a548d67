"""Reports: tables per level, cost per solved task, runtime by node, the Pareto plot, several directories."""

from __future__ import annotations

import pytest

from kgagents.core.scripted import ScriptedChatModel
from kgagents.core.usage import register_price
from kgagents.evals.datasets import Dataset, Item
from kgagents.evals.report import build_report, load_runset, pareto_front
from kgagents.evals.runner import EvalOptions, evaluate
from kgagents.graphs.baselines import zeroshot  # noqa: F401  (the workflow is registered by name)
from kgagents.nodes.baselines import BaselineContext
from kgagents.nodes.fusion import FusionContext
from kgagents.nodes.kgot import KGoTContext
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
                               context=KGoTContext(model=kgot_model, **FAST), concurrency=4), tiny_gaia(4))
    zs_steps = [S.step("Q0:", content="FINAL ANSWER: 0"), S.step("Q1:", content="FINAL ANSWER: 3"),
                S.step("Q2:", content="FINAL ANSWER: 4"), S.step("Q3:", **{"raise": "boom", "status": 401})]
    zs_model = ScriptedChatModel(steps=zs_steps, model_name="scripted-zs")
    await evaluate(EvalOptions(workflow="zeroshot", out_dir=tmp_path / "zs", progress=False,
                               context=BaselineContext(model=zs_model, max_api_retries=0), concurrency=2),
                   tiny_gaia(4))


@pytest.mark.slow
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
                               context=KGoTContext(model=model, **FAST)), tiny_gaia(2))
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


@pytest.mark.slow
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


@pytest.mark.slow
async def test_ideal_fusion_of_separate_runs(tmp_path):
    """The paper simulates fusion from single runs: `kgagents report A B --ideal-fusion`."""
    await two_evaluations(tmp_path)
    text = build_report([tmp_path / "kgot", tmp_path / "zs"], tmp_path / "report", labels=["KGoT", "Zero-shot"],
                        plots=False, ideal_fusion=True).read_text()
    kgot, zs = load_runset(tmp_path / "kgot"), load_runset(tmp_path / "zs")
    assert f"| KGoT + Zero-shot | 4 | 4 | 100.0% | ${kgot.cost + zs.cost:.4f} |" in text


@pytest.mark.slow
async def test_a_fuzzed_evaluation_reports_its_degraded_items(tmp_path):
    """Through the real OpenAI client against a server that answers 30 % of the calls with faults: the items
    whose calls failed for good carry their failures in results.jsonl, and the report counts them beside the
    errors, by kind — never as clean wrong answers."""
    from kgagents.evals.runner import read_results
    from tests.fakes.faults import fault_settings
    from tests.fakes.openai_server import FakeOpenAIServer, FaultPolicy, script_responder

    answers = {f"Q{i}": str(2 * i) for i in range(8)}
    with FakeOpenAIServer() as server:
        server.answer_with(FaultPolicy(script_responder(kgot_direct_steps(answers)), rate=0.3, seed=5,
                                       kinds=("500", "429", "truncated", "not_json", "schema")))
        values = {**fault_settings(server, tools=True), **FAST, "num_next_steps_decision": 3}
        result = await evaluate(EvalOptions(workflow="kgot", out_dir=tmp_path / "fuzzed", progress=False,
                                            context_values=values, concurrency=4), tiny_gaia(8))
    records = read_results(tmp_path / "fuzzed")
    assert all(set(r["failures"]) == {"count", "kinds"} for r in records)
    degraded = [r for r in records if not r["error"] and r["failures"]["count"]]
    assert degraded and result.metrics["degraded"] == len(degraded)
    kinds: dict[str, int] = {}
    for r in degraded:
        assert sum(r["failures"]["kinds"].values()) == r["failures"]["count"]
        for kind, n in r["failures"]["kinds"].items():
            kinds[kind] = kinds.get(kind, 0) + n
    failed_for_good = [r for r in records if r["error"] and "every model call failed" in r["error"]]
    assert all(r["correct"] is False and r["answer"] is None for r in failed_for_good)

    text = build_report([tmp_path / "fuzzed"], plots=False).read_text()
    row = next(line for line in text.splitlines() if line.startswith("| kgot"))
    cells = [c.strip() for c in row.split("|")]
    expected = f"{len(degraded)} ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})"
    assert cells[12] == expected and cells[11] == str(sum(1 for r in records if r["error"]))
    assert "a degraded item finished with model calls that failed for good" in text


def write_dir(path, records, model):
    """A results directory as the runner writes it (manifest and results.jsonl)."""
    import json

    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({"workflow": "kgot", "dataset": "tiny", "scorer": "gaia",
                                                    "context": {"model": model}}))
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_the_ideal_fusion_of_directories_counts_an_item_solved_by_any_of_them(tmp_path):
    """KGoT §5: an item counts as solved by a fusion when any fused run solved it — each combination's count
    is checked, so that solving by all of them, or by none, cannot pass; a cost that is unknown for one item
    is never priced at $0."""
    solved_by = {"A": {"a", "b", "c"}, "B": {"c", "f"}, "C": {"d", "e"}}
    for name, solved in solved_by.items():
        write_dir(tmp_path / name, [{"id": i, "run": 0, "correct": i in solved,
                                     "cost_usd": None if (name, i) == ("B", "a") else {"A": 0.01, "B": 0.02,
                                                                                         "C": 0.04}[name]}
                                    for i in "abcdef"], f"model-{name}")
    text = build_report([tmp_path / n for n in "ABC"], tmp_path / "report", labels=list("ABC"), plots=False,
                        ideal_fusion=True).read_text()
    section = text.split("## Ideal fusion of the directories")[1].split("\n## ")[0]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in section.splitlines()[3:] if line.startswith("| ")}
    assert set(rows) == {"A + B + C", "A + B", "A + C", "B + C"}  # fusions of two or more
    assert rows["A + B + C"][:3] == ["6", "6", "100.0%"]
    assert rows["A + B"][:3] == ["6", "4", "66.7%"]
    assert rows["A + C"][:3] == ["6", "5", "83.3%"]
    assert rows["B + C"][:3] == ["6", "4", "66.7%"]
    assert rows["A + C"][3:] == ["$0.3000", "$0.0600"]  # 6 × (0.01 + 0.04), per solved item
    assert rows["A + B"][3:] == ["$0.1600 + unknown (1 item without a price)", "unknown"]
    assert rows["A + B + C"][3] == "$0.4000 + unknown (1 item without a price)"


def test_the_ideal_fusion_of_a_runs_variants_counts_a_task_solved_by_any_variant():
    from kgagents.evals.scorers import fusion_metrics, ideal_correct

    record = {"correct": False, "variants": {"nx:query": {"correct": False}, "nx:direct": {"correct": True},
                                             "sparql:query": {"correct": None}}}
    assert ideal_correct(record) is True
    assert ideal_correct(record, ["nx:query", "sparql:query"]) is False
    assert ideal_correct(record, ["nx:direct"]) is True and ideal_correct(record, ["unknown"]) is False
    assert ideal_correct({"correct": True}) is False  # a run without variant scores (it failed)
    unsolved = {"variants": {"nx:query": {"correct": False}, "nx:direct": {"correct": False}}}
    metrics = fusion_metrics([record, unsolved, record])
    assert metrics["ideal_fusion_correct"] == 2 and metrics["ideal_fusion_accuracy"] == pytest.approx(2 / 3)
    assert metrics["variants"]["nx:direct"] == {"correct": 2, "accuracy": pytest.approx(2 / 3)}
    assert metrics["variants"]["nx:query"]["correct"] == 0 and fusion_metrics([{"correct": True}]) == {}


def test_ideal_fusion_pairs_the_same_item_and_run_and_a_fusion_that_solves_nothing(tmp_path):
    for name, solved in (("A", {("a", 1)}), ("B", {("a", 0)}), ("C", set())):
        write_dir(tmp_path / name, [{"id": i, "run": run, "correct": (i, run) in solved, "cost_usd": 0.01}
                                    for i in "ab" for run in (0, 1)], f"model-{name}")
    text = build_report([tmp_path / n for n in "ABC"], tmp_path / "report", labels=list("ABC"), plots=False,
                        ideal_fusion=True).read_text()
    section = text.split("## Ideal fusion of the directories")[1].split("\n## ")[0]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in section.splitlines()[3:] if line.startswith("| ")}
    assert rows["A + B"][:3] == ["4", "2", "50.0%"]  # item a's run 0 (B) and run 1 (A): two items, not one
    assert rows["A + C"][:3] == ["4", "1", "25.0%"]
    assert rows["B + C"][:3] == ["4", "1", "25.0%"]
    for name in "DE":
        write_dir(tmp_path / name, [{"id": i, "run": 0, "correct": False, "cost_usd": 0.01} for i in "ab"],
                  f"model-{name}")
    text = build_report([tmp_path / "D", tmp_path / "E"], tmp_path / "report2", labels=["D", "E"],
                        plots=False, ideal_fusion=True).read_text()
    assert "| D + E | 2 | 0 | 0.0% | $0.0400 | – |" in text


def test_degraded_items_and_not_graded_leave_errors_aside(tmp_path):
    from kgagents.evals.report import degraded, graded

    records = [{"id": "a", "correct": True, "failures": {"count": 3, "kinds": {"api": 2, "parse": 1}}},
               {"id": "b", "correct": False, "failures": {"count": 1, "kinds": {"api": 1}}},
               {"id": "c", "correct": False, "error": "every model call failed for good (4 api)",
                "failures": {"count": 4, "kinds": {"api": 4}}},
               {"id": "d", "correct": True, "failures": {"count": 0, "kinds": {}}}]
    assert degraded(records) == "2 (api 3, parse 1)"  # the errored item is an error, not a degraded one
    assert degraded(records[2:]) == "0" and degraded([]) == "0"
    ungraded = [{"id": "a", "correct": None}, {"id": "b", "correct": False, "error": "boom"}]
    assert not graded(ungraded) and graded([{"id": "a", "correct": False}])
    write_dir(tmp_path / "U", ungraded, "model-U")
    row = next(line for line in build_report([tmp_path / "U"], plots=False).read_text().splitlines()
               if line.startswith("| kgot"))
    assert [c.strip() for c in row.split("|")][3:6] == ["2", "–", "not graded"]


def _runset(tmp_path, label, dataset, costs, correct):
    from kgagents.evals.report import RunSet

    records = [{"id": f"i{n}", "cost_usd": c, "correct": ok}
               for n, (c, ok) in enumerate(zip(costs, correct, strict=True))]
    return RunSet(tmp_path / label, label, {"dataset": dataset}, records)


def test_an_unpriced_run_is_plotted_as_cost_unknown_never_at_zero(tmp_path):
    from kgagents.evals.report import pareto_points

    priced = _runset(tmp_path, "priced", "d", [0.5, 0.5], [True, False])
    unpriced = _runset(tmp_path, "unpriced", "d", [None, None], [True, True])
    partly = _runset(tmp_path, "partly", "d", [0.2, None], [True, True])
    free = _runset(tmp_path, "free", "d", [0.0, 0.0], [True, False])
    points = {p.label.split(" ")[0]: p for p in pareto_points([priced, unpriced, partly, free])}
    assert points["unpriced"].cost is None and points["unpriced"].solved == 2
    assert points["partly"].cost == 0.2 and points["partly"].partial and "partly unknown" in points["partly"].label
    assert points["priced"].cost == 1.0 and not points["priced"].partial
    assert points["free"].cost == 0.0  # a priced model that cost nothing (a local server) is at $0


def test_one_pareto_plot_per_dataset(tmp_path):
    pytest.importorskip("matplotlib")
    from kgagents.evals.report import pareto_plots

    runsets = [_runset(tmp_path, "a", "gaia", [0.5], [True]), _runset(tmp_path, "b", "simpleqa/full", [None], [True]),
               _runset(tmp_path, "c", "gaia", [0.2], [False])]
    plots = pareto_plots(runsets, tmp_path)
    assert [p.name for p in plots] == ["pareto-gaia.png", "pareto-simpleqa_full.png"]
    assert all(p.read_bytes()[:8] == PNG for p in plots)
    assert [p.name for p in pareto_plots(runsets[:1], tmp_path)] == ["pareto.png"]
