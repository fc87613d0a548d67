"""``kgagents eval --record`` then ``kgagents replay DIR``: the same answers and scores with no model."""

from __future__ import annotations

import json
import sqlite3

from kgagents.cli import main
from tests import kgot_script as S
from tests.evals.helpers import kgot_direct_steps
from tests.evals.test_cli_eval import GRADER, simpleqa_csv


def test_a_recorded_evaluation_replays_to_the_same_scores(tmp_path, capsys):
    data = simpleqa_csv(tmp_path / "simpleqa.csv")
    steps = [S.step(GRADER + ".*Predicted answer: Paris", content="A"),
             S.step(GRADER + ".*Predicted answer: Milan", content="B"), S.step(GRADER, content="C"),
             *kgot_direct_steps({"Q0": "Paris", "Q1": "Milan", "Q2": "I don't know"})]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "cli", "steps": steps}))
    out = tmp_path / "kgot"
    assert main(["eval", "kgot", "--dataset", "simpleqa", "--data", str(data), "--model", f"scripted:{script}",
                 "--out", str(out), "--concurrency", "2", "--no-progress", "--no-report", "--record",
                 "--set", "solve_mode=direct", "--set", "num_next_steps_decision=2",
                 "--set", "max_final_solution_parsing=1"]) == 0
    assert "recorded" in capsys.readouterr().err and (out / "recording.sqlite").is_file()
    script.write_text(json.dumps({"name": "cli", "steps": []}))  # no model any more

    # a recording chooses no path: the data and the (file-reading) scripted model come from the replay's flags
    assert main(["replay", str(out), "--data", str(data), "--model", f"scripted:{script}"]) == 0
    err = capsys.readouterr().err
    assert "identical" in err, err[-3000:]
    replayed = [json.loads(line) for line in (out / "replay" / "results.jsonl").read_text().splitlines()]
    recorded = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["grade"] for r in replayed) == sorted(r["grade"] for r in recorded) == [
        "CORRECT", "INCORRECT", "NOT_ATTEMPTED"]


def test_eval_record_needs_a_results_folder(tmp_path, capsys):
    data = simpleqa_csv(tmp_path / "simpleqa.csv")
    assert main(["eval", "kgot", "--dataset", "simpleqa", "--data", str(data), "--model", "scripted:x.json",
                 "--record"]) == 2
    assert "eval --record needs --out DIR" in capsys.readouterr().err


def test_a_bundle_reports_and_replays_on_another_machine(tmp_path, capsys):
    data = simpleqa_csv(tmp_path / "simpleqa.csv")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "cli", "steps": [
        S.step(GRADER + ".*Predicted answer: Paris", content="A"), S.step(GRADER, content="B", times=0),
        *kgot_direct_steps({"Q0": "Paris", "Q1": "Milan", "Q2": "Milan"})]}))
    out, bundle = tmp_path / "run", tmp_path / "share" / "run.zip"
    assert main(["eval", "kgot", "--dataset", "simpleqa", "--data", str(data), "--model", f"scripted:{script}",
                 "--out", str(out), "--no-progress", "--record", "--bundle", str(bundle),
                 "--set", "solve_mode=direct", "--set", "num_next_steps_decision=2",
                 "--set", "max_final_solution_parsing=1"]) == 0
    assert f"bundle: {bundle}" in capsys.readouterr().err

    # another machine: the bundle and its own copy of the data, no results folder, no model
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved_bundle, moved_data = elsewhere / "run.zip", elsewhere / "data.csv"
    bundle.rename(moved_bundle)
    data.rename(moved_data)
    import shutil

    shutil.rmtree(out)
    script.write_text(json.dumps({"name": "cli", "steps": []}))
    assert main(["report", str(moved_bundle), "--out", str(elsewhere / "report")]) == 0
    report = (elsewhere / "report" / "report.md").read_text()
    assert "| simpleqa | 3 | 1 | 33.3% |" in report, report[:600]
    assert main(["replay", str(moved_bundle), "--data", str(moved_data), "--model", f"scripted:{script}"]) == 0
    err = capsys.readouterr().err
    assert "identical" in err, err[-2000:]
    assert (elsewhere / "run" / "replay" / "results.jsonl").is_file()


def test_the_runs_of_an_item_are_recorded_apart(tmp_path, capsys):
    """``eval --runs 2 --record``: the two runs of an item make the same requests at the same places in their
    graphs; each run's calls are kept under its own keys (the item and run are part of a call's place), so that
    concurrent runs replay each to its own replies whatever order they were answered in. Here, no call made in a
    graph shares its key with another (only the grader's calls, made outside the graph, are kept by request)."""
    data = simpleqa_csv(tmp_path / "simpleqa.csv")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "cli", "steps": [
        S.step(GRADER, content="A", times=0), *kgot_direct_steps({"Q0": "Paris", "Q1": "Milan", "Q2": "Rome"})]}))
    out = tmp_path / "runs"
    assert main(["eval", "kgot", "--dataset", "simpleqa", "--data", str(data), "--model", f"scripted:{script}",
                 "--out", str(out), "--runs", "2", "--concurrency", "2", "--no-progress", "--no-report", "--record",
                 "--set", "solve_mode=direct", "--set", "num_next_steps_decision=2",
                 "--set", "max_final_solution_parsing=1"]) == 0
    capsys.readouterr()
    with sqlite3.connect(out / "recording.sqlite") as db:
        rows = db.execute("SELECT node, seq FROM exchanges").fetchall()
    in_graphs = [(node, seq) for node, seq in rows if not node.startswith("(outside")]
    assert in_graphs and all(seq == 0 for _, seq in in_graphs), sorted(in_graphs)
    assert main(["replay", str(out), "--data", str(data), "--model", f"scripted:{script}"]) == 0
    assert "identical" in capsys.readouterr().err
