"""What ``kgagents eval`` says about its outcome: a non-zero exit when every item failed, and a bundle that
carries the data's fingerprint."""

from __future__ import annotations

import json
import zipfile

from kgagents.cli import main
from tests.evals.test_cli_eval import simpleqa_csv

FAILING = {"name": "failing", "steps": [{"when": "", "times": 0, "raise": "the model is down", "status": 400}]}


def test_an_evaluation_whose_every_item_failed_exits_non_zero_and_its_bundle_has_the_data_fingerprint(
        tmp_path, capsys):
    data = simpleqa_csv(tmp_path / "simpleqa.csv")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(FAILING), encoding="utf-8")
    out, bundle = tmp_path / "run", tmp_path / "run.zip"
    code = main(["eval", "zeroshot", "--dataset", "simpleqa", "--data", str(data), "--model", f"scripted:{script}",
                 "--grader-model", f"scripted:{script}", "--set", "max_api_retries=0", "--out", str(out),
                 "--no-progress", "--no-report", "--bundle", str(bundle)])
    err = capsys.readouterr().err
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(r["error"] for r in records)
    assert code == 1, err[-2000:]
    assert "every item of the evaluation" in err and "failed (3 of 3" in err and "--retry-failed" in err

    manifest = json.loads((out / "manifest.json").read_text())
    with zipfile.ZipFile(bundle) as archive:
        info = json.loads(archive.read("bundle.json"))
    assert info["data_fingerprint"] is not None and info["data_fingerprint"] == manifest["data"]
    assert len(info["data_fingerprint"]) == 16
