"""``kgagents eval`` and ``kgagents report`` end to end, offline, with a scripted model and grader."""

from __future__ import annotations

import csv
import json

import pytest

from kgagents.cli import main
from tests import kgot_script as S
from tests.evals.helpers import kgot_direct_steps

GRADER = "Your job is to look at a question, a gold target, and a predicted answer"


def simpleqa_csv(path):
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["metadata", "problem", "answer"])
        w.writerow(["{'topic': 'Geography'}", "Question Q0: capital of France?", "Paris"])
        w.writerow(["{'topic': 'Geography'}", "Question Q1: capital of Italy?", "Rome"])
        w.writerow(["{'topic': 'Art'}", "Question Q2: who painted the Mona Lisa?", "Leonardo da Vinci"])
    return path


@pytest.mark.slow
def test_eval_then_resume_then_report(tmp_path, capsys):
    data = simpleqa_csv(tmp_path / "simpleqa.csv")
    steps = kgot_direct_steps({"Q0": "Paris", "Q1": "Milan", "Q2": "I don't know"})
    steps = [S.step(GRADER + ".*Predicted answer: Paris", content="A"),
             S.step(GRADER + ".*Predicted answer: Milan", content="B"),
             S.step(GRADER, content="C"),
             S.step("general AI assistant", times=0, content="FINAL ANSWER: Paris"),
             *steps]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "cli", "steps": steps}))
    out = tmp_path / "kgot"
    args = ["eval", "kgot", "--dataset", "simpleqa", "--data", str(data), "--model", f"scripted:{script}",
            "--out", str(out), "--concurrency", "2", "--no-progress", "--set", "solve_mode=direct",
            "--set", "num_next_steps_decision=2", "--set", "max_final_solution_parsing=1"]
    assert main(args) == 0
    printed = capsys.readouterr()
    assert "correct 0.3333" in printed.out and "not_attempted 0.3333" in printed.out
    assert "f_score" in printed.out and "3 ran" in printed.err
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["grade"] for r in records) == ["CORRECT", "INCORRECT", "NOT_ATTEMPTED"]
    assert all(r["grader_usage"]["scripted"]["calls"] == 1 for r in records)
    report = (out / "report.md").read_text()
    assert "correct given attempted" in report and "| Geography |" in report and (out / "pareto.png").is_file()

    # the same command again: everything is finished, nothing runs
    assert main(args) == 0
    assert "0 ran" in capsys.readouterr().err

    # a zero-shot baseline on the same data, then a report comparing both
    zs = tmp_path / "zs"
    # (the script's grader steps are used up: both items fail their scoring, and the command says so)
    assert main(["eval", "zeroshot", "--dataset", "simpleqa", "--data", str(data), "--model",
                 f"scripted:{script}", "--out", str(zs), "--no-progress", "--limit", "2"]) == 1
    assert "every item of the evaluation" in capsys.readouterr().err
    assert main(["report", str(out), str(zs), "--out", str(tmp_path / "cmp")]) == 0
    text = (tmp_path / "cmp" / "report.md").read_text()
    assert "kgot (scripted:" in text and "zeroshot (scripted:" in text


def test_eval_errors_are_clear(tmp_path, capsys):
    assert main(["eval", "kgot", "--dataset", "gaia", "--model", "openai:gpt-4o-mini"]) == 2
    assert "needs --data PATH" in capsys.readouterr().err
    assert main(["eval", "nope", "--dataset", "gaia", "--data", str(tmp_path)]) == 2
    assert "unknown workflow 'nope'" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "not an evaluation directory" in capsys.readouterr().err


@pytest.mark.slow
def test_eval_ark_on_the_packaged_cr_lt_with_runs_and_temperature(tmp_path, capsys):
    """The issue's command: no --data (CR-LT ships with kgagents), --temperature, the paper's metrics printed."""
    from tests.ark import script as A

    script = tmp_path / "any.json"  # any question: an anchor that is never valid, then "true" (C_max exit)
    script.write_text(json.dumps({"name": "any", "steps": [*A.anchor("no such entity", times=0),
                                                            *A.final(True, times=0)]}))
    out = tmp_path / "ark"
    args = ["eval", "ark", "--dataset", "cr-lt", "--limit", "3", "--runs", "2", "--temperature", "0.5",
            "--model", f"scripted:{script}", "--set", "c_max=2", "--out", str(out), "--no-progress", "--no-report"]
    assert main(args) == 0
    printed = capsys.readouterr()
    # S1 and S3 are true, S2 is false; the model always says true
    assert "questions: 3, runs: 2" in printed.out
    assert "answer rate %:          100.00 ± 0.00" in printed.out
    assert "conditional accuracy %: 66.67 ± 0.00" in printed.out
    assert "overall accuracy %:     66.67 ± 0.00" in printed.out
    assert "reliability:            1.00" in printed.out
    assert "6 ran" in printed.err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["workflow"] == "ark" and manifest["context"]["temperature"] == 0.5
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["id"], r["run"]) for r in records) == [(f"S{i}", r) for i in (1, 2, 3) for r in (0, 1)]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["answer_rate"] == 1.0 and summary["overall_accuracy_std"] == 0.0 and summary["runs"] == 2

    # the same command again: finished (question, run) pairs are skipped, the metrics are printed again
    assert main(args) == 0
    printed = capsys.readouterr()
    assert "0 ran" in printed.err and "6 skipped" in printed.err and "questions: 3, runs: 2" in printed.out


def test_eval_options_are_checked(tmp_path, capsys):
    from kgagents.cli.eval import default_out_name

    assert default_out_name("ark", "cr-lt", "qa", None) == "ark-cr-lt-qa"
    assert default_out_name("ark", "cr-lt", "qa", 0.7) == "ark-cr-lt-qa-T0.7"
    base = ["eval", "ark", "--dataset", "cr-lt", "--limit", "1", "--model", "scripted:/nonexistent.json",
            "--out", str(tmp_path / "o")]
    assert main([*base, "--temperature", "-1"]) == 2
    assert "--temperature must be at least 0" in capsys.readouterr().err
    assert main([*base, "--processes", "2", "--dask"]) == 2
    assert "choose one" in capsys.readouterr().err
    assert main([*base, "--processes", "auto", "--dask"]) == 2
    assert "choose one" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--processes", "0"])
    assert "at least 1 process" in capsys.readouterr().err


def test_automatic_processes_follow_the_concurrency():
    import argparse

    from kgagents.cli.eval import _process_count

    assert _process_count(argparse.Namespace(processes="auto", concurrency=4)) == 1
    assert _process_count(argparse.Namespace(processes="auto", concurrency=64)) >= 1
    assert _process_count(argparse.Namespace(processes=3, concurrency=64)) == 3
