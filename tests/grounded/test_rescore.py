"""Re-scoring an evaluation's stored answers (``eval --rescore DIR``): the new judge is called on every answer and
its verdicts go to a new folder; an exact scoring costs nothing; the source folder is left as it was; scoring
into the source folder with another grader is refused with the way to re-score."""

from __future__ import annotations

import json

from kgagents.cli import main


def script(path, steps):
    path.write_text(json.dumps({"name": path.stem, "steps": steps}), encoding="utf-8")
    return f"scripted:{path}"


def records(folder):
    return {r["id"]: r for r in map(json.loads, (folder / "results.jsonl").read_text().splitlines())}


def test_rescoring_with_another_judge_calls_it_into_a_new_folder(tmp_path, capsys):
    run = script(tmp_path / "run.json", [
        {"when": r"Please help me judge", "times": 0, "content": "Yes"},
        {"when": r"Blackberry Playbook", "times": 0, "raise": "the model is down", "status": 400},
        {"when": r"Dolica DC-BP511", "times": 0, "content": "Dolica"},
        {"when": r"Samsung Galaxy S3", "times": 0, "content": "Samsung"}])
    strict = script(tmp_path / "strict.json", [{"when": r"Please help me judge", "times": 0, "content": "No"}])
    common = ["--dataset", "grbench-fixture", "--domain", "amazon", "--ids", "amazon-0", "amazon-1", "amazon-2",
              "--no-progress", "--no-report"]
    source = tmp_path / "source"
    assert main(["eval", "base", *common, "--model", run, "--grader-model", run, "--set", "max_api_retries=0",
                 "--out", str(source)]) == 0
    before = {name: (source / name).read_bytes() for name in ("results.jsonl", "manifest.json", "summary.json")}
    assert json.loads(before["summary.json"])["gpt4score"] == 100 * (2 / 3)  # yes, yes (the generous judge), failed

    # the same folder with another judge: refused, and told how to re-score
    assert main(["eval", "base", *common, "--model", run, "--grader-model", strict, "--set", "max_api_retries=0",
                 "--out", str(source)]) == 2
    assert f"--rescore {source}" in capsys.readouterr().err

    strict_out = tmp_path / "strict"
    assert main(["eval", "base", *common, "--rescore", str(source), "--grader-model", strict, "--out",
                 str(strict_out)]) == 0
    capsys.readouterr()
    new = records(strict_out)
    assert {i: r["details"]["gpt4score"] for i, r in new.items()} == {"amazon-0": 0, "amazon-1": 0, "amazon-2": 0}
    assert new["amazon-0"]["grader_usage"]["scripted"]["calls"] == 1  # the new judge was asked
    assert new["amazon-0"]["answer"] == "Dolica" and new["amazon-2"]["error"]  # the stored answers, the failure
    assert new["amazon-0"]["details"]["judge"] == strict and new["amazon-0"]["usage"] == \
        records(source)["amazon-0"]["usage"]
    summary = json.loads((strict_out / "summary.json").read_text())
    assert summary["gpt4score"] == 0.0 and summary["rouge_l"] == json.loads(before["summary.json"])["rouge_l"]
    manifest = json.loads((strict_out / "manifest.json").read_text())
    assert manifest["grader_model"] == strict and manifest["rescored_from"]["folder"] == str(source)
    assert {name: (source / name).read_bytes() for name in before} == before  # the source is as it was

    # without a judge: Rouge-L only, at no cost
    plain = tmp_path / "plain"
    assert main(["eval", "base", *common, "--rescore", str(source), "--grader-model", "none", "--out",
                 str(plain)]) == 0
    capsys.readouterr()
    assert all(r["grader_cost_usd"] == 0 and r["grader_usage"] == {} for r in records(plain).values())
    assert json.loads((plain / "summary.json").read_text())["gpt4score"] is None

    # into its own folder: refused
    assert main(["eval", "base", *common, "--rescore", str(source), "--grader-model", strict, "--out",
                 str(source)]) == 2
    assert "a folder of its own" in capsys.readouterr().err
