"""ARK-V1 from the command line: the scripted demo, ask + show on a graph file, and the CR-LT evaluation."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from kgagents.cli import main
from kgagents.cli.ark import add_eval_arguments, run_eval
from kgagents.evals.datasets import DatasetError
from tests.ark import script as S

#: Answers any CR-LT question: an anchor that is never valid, then "true" at the final answer (C_max exit).
ANY_QUESTION = [*S.anchor("no such entity", times=0), *S.final(True, times=0)]


@pytest.fixture()
def any_question_script(tmp_path):
    path = tmp_path / "any.json"
    path.write_text(json.dumps({"name": "any", "steps": ANY_QUESTION}), encoding="utf-8")
    return path


def test_demo_prints_false(capsys, embedder):
    assert main(["demo", "--workflow", "ark"]) == 0
    out, err = capsys.readouterr()
    assert out.strip().splitlines()[-1] == "False"
    assert "Scripted demo" in err and "no LLM is called" in err
    assert "[1] anchor \"Yui Yuigahama\" -> relation \"has pet\"" in err
    assert "k=1 anchor #1: 'Yui' -> not a head entity; nearest: Yui Yuigahama, Sablé" in err


def test_ask_with_an_attached_graph_then_show(tmp_path, capsys, example):
    graph = tmp_path / "example.json"
    graph.write_text(json.dumps(example), encoding="utf-8")
    steps = S.yui_run(example["graph"])
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    runs = str(tmp_path / "runs")
    assert main(["--runs-dir", runs, "ask", "--workflow", "ark", example["question"], "--attach", str(graph),
                 "--model", f"scripted:{script}", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "False"
    thread = re.search(r"thread: (\S+)", err).group(1)
    assert main(["--runs-dir", runs, "show", thread]) == 0
    shown = capsys.readouterr().out
    assert f"Thread {thread} (ark), finished" in shown and "Answer: False" in shown
    assert "Knowledge graph: 32 edges, 30 entities, 2 head entities, 22 relations" in shown
    assert "(Sablé, animal breed, dachshund)" in shown and "Exit: the model stopped exploring" in shown
    assert "scripted: 7 calls" in shown
    page = tmp_path / "explored.html"
    assert main(["--runs-dir", runs, "show", thread, "--kg", "--out", str(page)]) == 0
    data = json.loads(page.read_text(encoding="utf-8").split('id="kg-data">')[1].split("</script>")[0])
    explored = data[0]["kg"]
    anchors = {n["id"] for n in explored["nodes"] if "anchor" in n["labels"]}
    used = {(r["source"], r["type"], r["target"]) for r in explored["relationships"] if r["properties"]["used"]}
    assert anchors == {"Yui Yuigahama", "Sablé"}
    assert used == {("Yui Yuigahama", "has pet", "Sablé"), ("Sablé", "animal breed", "dachshund")}


@pytest.mark.slow
def test_the_evaluation_function(tmp_path, any_question_script, capsys, embedder):
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    out = tmp_path / "eval"
    args = parser.parse_args(["--dataset", "cr-lt", "--runs", "2", "--temperature", "0.7", "--ids", "S1,S2,S3",
                              "--model", f"scripted:{any_question_script}", "--set", "c_max=2", "--out", str(out),
                              "--quiet"])
    assert run_eval(args) == 0
    text = capsys.readouterr().out
    # always "true": S1 and S3 are true, S2 is false
    assert "questions: 3, runs: 2" in text and "answer rate %:          100.00 ± 0.00" in text
    assert "conditional accuracy %: 66.67 ± 0.00" in text and "reliability:            1.00" in text
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 6 and {r["answer"] for r in records} == {True}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["workflow"] == "ark" and manifest["context"]["temperature"] == 0.7
    assert manifest["context"]["c_max"] == 2
    # running it again resumes: nothing is run twice
    args.json = True
    assert run_eval(args) == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 6
    report = json.loads(capsys.readouterr().out)
    assert report["answers"] == {"S1": [True, True], "S2": [True, True], "S3": [True, True]}


def test_the_evaluation_needs_a_model(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    args = parser.parse_args(["--limit", "1", "--out", str(tmp_path / "e")])
    from kgagents.core.config import ConfigurationError

    with pytest.raises(ConfigurationError, match="KGAGENTS_MODEL"):
        run_eval(args)


@pytest.mark.slow
def test_the_general_eval_command_runs_ark_on_cr_lt(tmp_path, any_question_script, capsys, embedder):
    from kgagents.evals.colota import DATA_DIR

    out = tmp_path / "general"
    code = main(["eval", "ark", "--dataset", "cr-lt", "--data", str(DATA_DIR), "--limit", "2", "--runs", "1",
                 "--model", f"scripted:{any_question_script}", "--set", "c_max=2", "--out", str(out),
                 "--no-progress", "--no-report", "--concurrency", "1"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "answer_rate 1.0" in printed and "reliability 1.0" in printed
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in records) == ["S1", "S2"] and all(r["iterations"] == 1 for r in records)


@pytest.mark.parametrize("split", ["qa", "cv"])
def test_a_dataset_without_graphs_is_refused_before_anything_runs(tmp_path, any_question_script, capsys, split):
    """CoLoTa's question files hold no graphs: every run would fail, so the evaluation is refused with a reason."""
    out = tmp_path / "colota"
    code = main(["eval", "ark", "--dataset", "colota", "--split", split, "--limit", "2",
                 "--model", f"scripted:{any_question_script}", "--out", str(out), "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert f"ARK-V1 needs each question's knowledge graph, and 2 of the 2 questions of 'colota' ({split})" in err
    assert ("Use --dataset cr-lt" in err) == (split == "qa")
    assert not out.exists()


def test_the_papers_protocol_is_table_iii():
    from kgagents.evals.datasets import dataset_protocol

    protocol = dataset_protocol("cr-lt", "paper")
    assert [(leg.temperature, leg.runs) for leg in protocol.legs] == [(0.7, 30), (0.0, 1)]
    with pytest.raises(DatasetError, match="no protocol 'paper'"):
        dataset_protocol("colota", "paper")


@pytest.mark.slow
def test_the_protocol_runs_each_leg_seeded_and_prints_table_iii(tmp_path, any_question_script, capsys, embedder,
                                                                monkeypatch):
    """The paper's protocol, with 2 runs instead of 30 in its first leg: each leg in its own folder at its
    temperature, run r seeded with seed + r, then the table in the paper's layout."""
    import dataclasses

    from kgagents.evals.colota import DATA_DIR
    from kgagents.evals.datasets import DATASETS, ProtocolLeg, dataset_protocol

    small = dataclasses.replace(dataset_protocol("cr-lt", "paper"), legs=(ProtocolLeg(0.7, 2), ProtocolLeg(0.0, 1)))
    monkeypatch.setitem(DATASETS["cr-lt"].protocols, "paper", small)
    out = tmp_path / "protocol"
    common = ["eval", "ark", "--dataset", "cr-lt", "--data", str(DATA_DIR), "--limit", "2",
              "--model", f"scripted:{any_question_script}", "--set", "c_max=2", "--out", str(out),
              "--no-progress", "--no-report", "--concurrency", "2"]
    assert main([*common, "--protocol", "paper", "--runs", "3"]) == 2
    assert "sets the runs and temperatures itself" in capsys.readouterr().err and not out.exists()
    assert main([*common, "--protocol", "paper"]) == 0
    printed = capsys.readouterr().out
    for leg, temperature, runs in (("T0.7-R2", 0.7, 2), ("T0-R1", 0.0, 1)):
        manifest = json.loads((out / leg / "manifest.json").read_text())
        assert manifest["seed"] == 42 and manifest["runs"] == runs
        assert manifest["context"]["temperature"] == temperature
        records = [json.loads(line) for line in (out / leg / "results.jsonl").read_text().splitlines()]
        assert sorted((r["id"], r["run"]) for r in records) == sorted(
            (q, r) for q in ("S1", "S2") for r in range(runs))
    table = (out / "table.md").read_text()
    assert "| Model | T = 0.7; 2 runs: answer rate % | T = 0.7; 2 runs: conditional accuracy % |" in table
    assert "T = 0.7; 2 runs: reliability | T = 0; single run: answer rate % |" in table
    assert "T = 0; single run: reliability" not in table
    assert "100.00 ± 0.00" in table and table.split("\n", 2)[2] in printed


@pytest.mark.slow
def test_a_final_answer_that_failed_for_good_is_a_failed_run_not_an_abstention(tmp_path, capsys, embedder):
    """The docs promise it: a run without the agent's answer is left out of the answer rate and reliability. A
    final-answer call that kept failing used to be counted as an abstention (answer rate 0, reliability 1)."""
    from kgagents.evals.colota import DATA_DIR

    failing = [*S.anchor("no such entity", times=0),
               S.step(S.FINAL, times=0, **{"raise": "the provider is overloaded", "status": 503})]
    path = tmp_path / "failing.json"
    path.write_text(json.dumps({"name": "failing", "steps": failing}), encoding="utf-8")
    out = tmp_path / "failed"
    code = main(["eval", "ark", "--dataset", "cr-lt", "--data", str(DATA_DIR), "--limit", "2", "--runs", "1",
                 "--model", f"scripted:{path}", "--set", "c_max=1", "--set", "max_api_retries=0",
                 "--out", str(out), "--no-progress", "--no-report", "--concurrency", "1"])
    assert code == 1  # every item failed: the evaluation says so and exits 1
    printed = capsys.readouterr().out
    assert "failed_runs 2" in printed and "answer_rate n/a" in printed and "reliability n/a" in printed
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all("the final answer failed for good" in r["error"] and "not an abstention" in r["error"]
               for r in records)
