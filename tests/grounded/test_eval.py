"""``kgagents eval`` on GRBench: the fixture dataset through the grounded workflow (a preset) and the baselines,
Rouge-L and GPT4Score, the error taxonomy from the trace, the user-folder loader, and the Table 1 report."""

from __future__ import annotations

import json

import pytest

from kgagents.cli import main
from kgagents.cli.grounded import gold_path_steps
from kgagents.evals.datasets import load_dataset
from kgagents.evals.grbench import (
    GRBenchScorer,
    answer_in_trace,
    difficulty,
    error_type,
    gpt4score_prompt,
    load_grbench,
    parse_judgement,
    read_questions,
    trace_values,
)
from kgagents.evals.scorers import rouge_l
from kgagents.tools.pgraph import open_graph

IDS = ["dblp-0", "dblp-10", "dblp-20", "dblp-1"]


def script_for(tmp_path, extra=()) -> str:
    dataset = load_dataset("grbench-fixture", None, split="dblp", ids=IDS)
    graph = open_graph(dataset.items[0].inputs["graph"])
    rows = [{"question": i.question, "answer": i.gold, "start": i.meta["start"], "hop": i.meta["hop"],
             "entity": graph.node(i.meta["start"]).name} for i in dataset.items]
    steps = [*extra, *gold_path_steps(rows, graph)]
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"name": "eval", "steps": steps}), encoding="utf-8")
    return str(path)


@pytest.mark.slow
def test_eval_grounded_and_baselines_with_the_table1_report(tmp_path, capsys):
    script = script_for(tmp_path, extra=[
        {"when": r"\[stage: rag answer\].*Patient-Specific", "times": 0, "content": "Yang Yang"},
        {"when": r"Model prediction: Yang Yang \n", "times": 0, "content": "No"},
        {"when": r"\[stage: rag answer\]", "times": 0, "content": "I do not know"},
        {"when": r"Model prediction: I do not know", "times": 0, "content": "No."},
    ])
    out = {}
    for workflow, extra in (("grounded", ["--preset", "tot-agent-select"]), ("graph-rag", []), ("text-rag", [])):
        out[workflow] = tmp_path / workflow
        code = main(["eval", workflow, "--dataset", "grbench-fixture", "--domain", "dblp", "--ids", *IDS,
                     "--model", f"scripted:{script}", "--grader-model", f"scripted:{script}", "--out",
                     str(out[workflow]), "--no-progress", *extra])
        assert code == 0
    capsys.readouterr()
    records = [json.loads(line) for line in (out["grounded"] / "results.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["correct"] is True for r in records)
    assert [(r["details"]["rouge_l"], r["details"]["gpt4score"]) for r in records] == [(1.0, 1)] * 4, records
    summary = json.loads((out["grounded"] / "summary.json").read_text())
    assert summary["rouge_l"] == 100.0 and summary["gpt4score"] == 100.0
    rag = [json.loads(line) for line in (out["graph-rag"] / "results.jsonl").read_text().splitlines()]
    first = next(r for r in rag if r["id"] == "dblp-0")
    assert first["correct"] is False and 0 < first["details"]["rouge_l"] < 1
    assert first["details"]["error_type"] == "answer found but not returned"  # the authors were in the context
    code = main(["report", str(out["grounded"]), str(out["graph-rag"]), str(out["text-rag"]), "--no-plots"])
    report = (out["grounded"] / "report.md").read_text()
    assert "as the paper's Table 1" in report
    table = report.split("as the paper's Table 1")[1]
    assert ("| Graph-ToT agent (select), scripted" in table.replace(f":{script}", "")
            or "Graph-ToT agent (select)" in table)
    assert "| method | dblp | cost / question | mean runtime (s) |" in table
    assert "100.00 (100.00)" in table and "Graph-RAG" in table and "Text-RAG" in table
    # the paper's Figure 14: DBLP templates 0-2 are easy (one hop), template 1 too
    assert {r["details"]["difficulty"] for r in records} == {"easy"}
    figure = report.split("as the paper's Figure 14")[1]
    assert "| method | easy | medium | hard |" in figure and "100.00 (100.00) [n=4] | – | – |" in figure


@pytest.mark.slow
def test_gpt4score_s_judge_is_the_paper_s_unless_named_and_a_failed_judgement_is_not_judged(tmp_path, capsys):
    from kgagents.evals.datasets import load_dataset as load
    from kgagents.evals.grbench import PAPER_JUDGE
    from kgagents.evals.runner import EvalOptions, build_scorer

    dataset = load("grbench-fixture", None, split="dblp", ids=IDS[:1])
    default = EvalOptions(workflow="grounded", out_dir=tmp_path, context_values={"model": "x:y"})
    assert build_scorer(default, dataset).model == PAPER_JUDGE  # not the run's model
    named = EvalOptions(workflow="grounded", out_dir=tmp_path, grader_model="a:b")
    assert build_scorer(named, dataset).model == "a:b"
    script = script_for(tmp_path, extra=[
        {"when": r"Please help me judge", "times": 0, "raise": "judge overloaded", "status": 400}])
    out = tmp_path / "judged"
    assert main(["eval", "grounded", "--dataset", "grbench-fixture", "--domain", "dblp", "--ids", *IDS[:2],
                 "--model", f"scripted:{script}", "--grader-model", f"scripted:{script}", "--set",
                 "max_api_retries=0", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    for r in records:
        assert r["correct"] is None and r["grade"] == "NOT_JUDGED" and r["details"]["gpt4score"] is None
        assert "judge overloaded" in r["details"]["judge_error"] and r["details"]["rouge_l"] == 1.0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["gpt4score"] is None and summary["not judged"] == 2 and summary["rouge_l"] == 100.0


@pytest.mark.parametrize("gold, trace, values, found", [
    ("14", "The cited_by neighbor node degree of p_14 is: 14.", ["14"], True),
    ("14", "The ID of this retrieval target node is p_14. Observation 14", [], False),  # digits in ids: not it
    ("54.99", "", ["54.990"], True), ("2020", "", ["2,020"], True), ("3", "", ["13", "0.3"], False),
    ("true", "The is_ebook feature of book-1 is: true.", ["true"], True),
    ("False", "it is false that ...", [], False), ("No", "", ["no"], True), ("Yes", "", ["false"], False),
    ("Ann Lee, Bo Chen", "names: Ann Lee; Bo Chen", [], True), ("Ann Lee, Bo Chen", "Ann Lee", [], False),
])
def test_the_answer_found_in_the_trace(gold, trace, values, found):
    assert answer_in_trace(gold, trace, values) is found


def test_the_values_a_run_saw():
    state = {"thoughts": {"t0.1": {"actions": [
        {"observation": "The cited_by neighbor node degree of p1 is: 14."},
        {"observation": 'The author neighbors of p1 are: ["a1", "a2"].'},
        {"observation": "The is_ebook feature of b1 is: true."}],
        "attributes": ["Deep Graphs — year: 2020"], "triples": [["Deep Graphs", "venue", "KDD"]]}},
        "context": "KDD: a venue\n  → paper: Deep Graphs; Shallow Nets"}
    values = trace_values(state)
    assert {"14", "true", "2020", "Deep Graphs", "Shallow Nets", "KDD"} <= set(values)
    assert error_type(False, "14", state) == "answer found but not returned"
    assert error_type(False, "2", {**state, "exit_reason": "finished"}) == "wrong reasoning step"
    assert error_type(False, "true", state) == "answer found but not returned"
    assert error_type(False, "false", {**state, "exit_reason": "reached the step limit"}) == "reached the step limit"


def test_grbench_difficulty_per_template(tmp_path):
    assert difficulty("dblp", "0") == "easy" and difficulty("dblp", "35") == "medium"
    assert difficulty("maple_Physics", "131") == "hard" and difficulty("maple/Physics", "95") == "medium"
    assert difficulty("goodreads", "230") == "hard" and difficulty("biomedical", "150") == "easy"
    assert difficulty("nowhere", "1") is None and difficulty("dblp", "x") is None
    (tmp_path / "dblp").mkdir()
    (tmp_path / "dblp" / "graph.json").write_text("{}")
    items = load_grbench(tmp_path / "dblp", "auto")
    levels = {i.meta["difficulty"] for i in items}
    assert levels == {"easy", "medium"} and len(items) == 150
    assert sum(i.meta["difficulty"] == "easy" for i in items) == 70  # templates 0-2 and 8-11


def test_the_scorer_without_a_judge_and_the_taxonomy():
    scorer = GRBenchScorer("none")
    assert scorer.model is None
    state = {"exit_reason": "reached the step limit", "thoughts": {"t0.1": {"actions": [
        {"observation": "The name feature of a1 is: Ann Lee."}]}}}
    assert answer_in_trace("Ann Lee", "x The name feature of a1 is: Ann Lee.") and not answer_in_trace("Bo", "Ann")
    assert error_type(False, "Ann Lee", state) == "answer found but not returned"
    assert error_type(False, "Bo Chen", state) == "reached the step limit"
    assert error_type(False, "Bo Chen", {"exit_reason": "finished"}) == "wrong reasoning step"
    assert error_type(True, "Ann Lee", state) is None
    m = scorer.metrics([{"details": {"rouge_l": 0.5, "gpt4score": None, "error_type": "wrong reasoning step"}},
                        {"details": {"rouge_l": 1.0, "gpt4score": None}, "error": "x"}])
    assert m["rouge_l"] == 75.0 and m["gpt4score"] is None and m["wrong reasoning step"] == 1 and m["failed runs"] == 1


def test_gpt4score_prompt_and_parsing():
    prompt = gpt4score_prompt("Who?", "Ann", "Ann Lee")
    assert prompt.startswith("Question:Who? \nModel prediction: Ann \nGround truth: Ann Lee. \n")
    assert prompt.endswith("Please use one word (Yes or No) to answer. Do not explain.")
    assert parse_judgement(" Yes.") and parse_judgement("yes") and not parse_judgement("No") \
        and not parse_judgement("Yes, because")


def test_a_user_grbench_folder(tmp_path):
    folder = tmp_path / "dblp"
    folder.mkdir()
    (folder / "graph.json").write_text(json.dumps({"paper_nodes": {"p1": {"features": {"title": "T"},
                                                                          "neighbors": {}}}}))
    items = load_grbench(folder, "auto")
    assert items[0].id == "dblp-0" and items[0].inputs == {"graph": str(folder / "graph.json")}
    assert items[0].group == "template 0" and len(items) == 150  # the packaged DBLP questions
    (folder / "data.json").write_text('{"qid": "7", "question": "Q?", "answer": "A"}\n')
    assert [i.id for i in load_grbench(folder, "auto")] == ["dblp-7"]
    elsewhere = tmp_path / "my-graph"
    elsewhere.mkdir()
    (elsewhere / "graph.json").write_text("{}")
    with pytest.raises(ValueError, match="cannot tell the GRBench domain"):
        load_grbench(elsewhere, "auto")
    assert load_grbench(elsewhere, "goodreads")[0].id == "goodreads-0"
    with pytest.raises(ValueError, match=r"no graph.json"):
        load_grbench(tmp_path / "empty", "dblp")
    (folder / "data.json").write_text("{not json\n")
    with pytest.raises(ValueError, match="line 1: not valid JSON"):
        read_questions(folder / "data.json")
    assert rouge_l("Ann Lee", "Ann Lee")["fmeasure"] == 1.0


@pytest.mark.slow
def test_ask_show_and_the_thought_graph_page(tmp_path, capsys):
    from kgagents.evals.grbench import fixture_graph, fixture_questions

    row = next(r for r in fixture_questions("goodreads") if r["qid"] == "10")
    source = str(fixture_graph("goodreads"))
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": gold_path_steps(row, open_graph(source))}), encoding="utf-8")
    code = main(["ask", "--workflow", "grounded", "--graph", source, "--preset", "got-agent-select", "--model",
                 f"scripted:{script}", "--quiet", "--thread", "g1", row["question"]])
    assert code == 0 and capsys.readouterr().out.strip() == row["answer"]
    main(["show", "g1"])
    shown = capsys.readouterr().out
    assert "Thought graph:" in shown and "(merge of t0.1 + t0.2)" in shown and "★ t0.1.1.1" in shown
    assert "depth 1 (select): kept t0.1, t0.2, t0.3 of 4" in shown
    main(["show", "g1", "--kg", "--out", str(tmp_path / "t.html")])
    page = (tmp_path / "t.html").read_text(encoding="utf-8")
    assert "Thought graph of thread g1" in page and "merged into" in page
    code = main(["ask", "--workflow", "grounded", "--graph", source, "--preset", "nope", "q?"])
    assert code == 2 and "no preset 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_an_evaluation_without_a_grader_says_so_at_its_start_and_reports_not_graded(tmp_path, capsys):
    """With ``--grader-model none`` GPT4Score is not asked: the start says what is off, and the report shows
    "not graded" where the accuracy would be — never 0 %."""
    out = tmp_path / "ungraded"
    code = main(["eval", "grounded", "--dataset", "grbench-fixture", "--domain", "dblp", "--ids", *IDS[:2],
                 "--preset", "tot-agent-select", "--model", f"scripted:{script_for(tmp_path)}",
                 "--grader-model", "none", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0 and "; grader none" in err
    assert "kgagents: no grader model: the answers get Rouge-L only; GPT4Score and accuracy are reported " \
           "as not graded" in err
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(r["correct"] is None and r["details"]["rouge_l"] == 1.0 for r in records)
    report = (out / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| grounded"))
    assert [c.strip() for c in row.split("|")][4:6] == ["–", "not graded"] and "0.0%" not in row
