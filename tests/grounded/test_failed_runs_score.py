"""A failed run counts in GPT4Score as in Rouge-L: Graph-CoT's code scores its empty answer, judged "No"."""

from __future__ import annotations

import json

from kgagents.cli import main
from kgagents.evals.grbench import GRBenchScorer


def test_a_failed_run_counts_zero_in_gpt4score_as_in_rouge_l(tmp_path, capsys):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "failed", "steps": [
        {"when": r"Please help me judge", "times": 0, "content": "Yes"},
        {"when": r"Blackberry Playbook", "times": 0, "raise": "the model is down", "status": 400},
        {"when": r"Dolica DC-BP511", "times": 0, "content": "Dolica"}]}), encoding="utf-8")
    out = tmp_path / "base"
    code = main(["eval", "base", "--dataset", "grbench-fixture", "--domain", "amazon", "--ids", "amazon-0", "amazon-2",
                 "--model", f"scripted:{script}", "--grader-model", f"scripted:{script}", "--set",
                 "max_api_retries=0", "--out", str(out), "--no-progress", "--no-report"])
    capsys.readouterr()
    assert code == 0
    records = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert records["amazon-2"]["error"] and records["amazon-0"]["error"] is None
    assert records["amazon-2"]["details"]["gpt4score"] == 0 and records["amazon-2"]["details"]["rouge_l"] == 0.0
    assert records["amazon-2"]["details"]["difficulty"] == records["amazon-0"]["details"]["difficulty"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rouge_l"] == 50.0 and summary["gpt4score"] == 50.0, summary
    assert summary["failed runs"] == 1 and summary["not judged"] == 0


def test_records_written_before_failed_runs_carried_a_verdict_count_them_zero_too():
    judged = {"details": {"rouge_l": 1.0, "gpt4score": 1, "judge": "openai:gpt-4o"}}
    failed = {"error": "every model call failed for good (1 api)", "details": {}}
    assert GRBenchScorer("openai:gpt-4o").metrics([judged, failed])["gpt4score"] == 50.0
    # without a judge there is no GPT4Score at all, failed runs or not
    unjudged = {"details": {"rouge_l": 1.0, "gpt4score": None}}
    assert GRBenchScorer(None).metrics([unjudged, failed])["gpt4score"] is None
    assert GRBenchScorer(None).score_failed(type("I", (), {"meta": {}})()).details["gpt4score"] is None
