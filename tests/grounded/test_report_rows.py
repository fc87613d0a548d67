"""GRBench's Table 1 and Figure 14 in ``kgagents report``: a row is one evaluation's settings (two evaluations
that differ in any setting are two rows, named by what differs), its domains are its columns, and ``--label``
names rows."""

from __future__ import annotations

import json

from kgagents.cli import main

PRESET = {"strategy": "cot", "interaction": "agent", "max_depth": 10, "model": "openai:gpt-4o-mini"}


def results_dir(path, *, split, context, rouge, gpt4score, preset="paper-graph-cot"):
    """A GRBench results folder as ``kgagents eval`` writes it: its manifest and two judged records."""
    path.mkdir(parents=True)
    manifest = {"workflow": "grounded", "dataset": "grbench", "split": split, "runs": 1, "seed": None, "items": 2,
                "scorer": "grbench", "group_label": "Template", "preset": preset, "context": context,
                "models": {"reasoner": context["model"]}, "grader_model": None, "data": "0123456789abcdef"}
    (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    records = [{"id": f"{split}-{i}", "run": 0, "question": "q", "gold": "g", "answer": "a", "group": "template 0",
                "correct": bool(gpt4score), "cost_usd": 0.0, "wall_s": 1.0, "error": None,
                "details": {"rouge_l": rouge, "gpt4score": gpt4score, "judge": "openai:gpt-4o",
                            "difficulty": "easy"}} for i in range(2)]
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def tables(report):
    table = report.split("as the paper's Table 1")[1].split("##")[0]
    figure = report.split("as the paper's Figure 14")[1].split("##")[0]
    return ([line for line in table.splitlines() if line.startswith("| Graph") or line.startswith("| mine")],
            [line for line in figure.splitlines() if line.startswith("| Graph") or line.startswith("| mine")])


def test_a_preset_and_the_same_preset_with_another_setting_are_two_rows(tmp_path, capsys):
    paper = results_dir(tmp_path / "paper", split="dblp", context=PRESET, rouge=1.0, gpt4score=1)
    paper_amazon = results_dir(tmp_path / "paper-amazon", split="amazon", context=PRESET, rouge=0.5, gpt4score=1)
    shallow = results_dir(tmp_path / "shallow", split="dblp", context={**PRESET, "max_depth": 1}, rouge=0.0,
                          gpt4score=0)
    out = tmp_path / "report"
    assert main(["report", str(paper), str(paper_amazon), str(shallow), "--out", str(out), "--no-plots"]) == 0
    capsys.readouterr()
    rows, figure = tables((out / "report.md").read_text())
    assert rows == [
        "| Graph-CoT agent, openai:gpt-4o-mini [max_depth=10] | 50.00 (100.00) | 100.00 (100.00) | $0.0000 | 1.0 |",
        "| Graph-CoT agent, openai:gpt-4o-mini [max_depth=1] | – | 0.00 (0.00) | $0.0000 | 1.0 |"], rows
    assert figure == ["| Graph-CoT agent, openai:gpt-4o-mini [max_depth=10] | 75.00 (100.00) [n=4] | – | – |",
                      "| Graph-CoT agent, openai:gpt-4o-mini [max_depth=1] | 0.00 (0.00) [n=2] | – | – |"], figure

    # the user's labels name the rows
    assert main(["report", str(paper), str(shallow), "--out", str(out), "--no-plots", "--label", "mine (depth 10)",
                 "--label", "mine (depth 1)"]) == 0
    rows, figure = tables((out / "report.md").read_text())
    assert [row.split(" |")[0] for row in rows] == ["| mine (depth 10)", "| mine (depth 1)"], rows
    assert [row.split(" |")[0] for row in figure] == ["| mine (depth 10)", "| mine (depth 1)"], figure


def test_the_same_settings_twice_on_one_domain_are_two_rows_never_one_overwritten(tmp_path, capsys):
    first = results_dir(tmp_path / "first", split="dblp", context=PRESET, rouge=1.0, gpt4score=1)
    again = results_dir(tmp_path / "again", split="dblp", context=PRESET, rouge=0.0, gpt4score=0)
    out = tmp_path / "report"
    assert main(["report", str(first), str(again), "--out", str(out), "--no-plots"]) == 0
    capsys.readouterr()
    rows, _ = tables((out / "report.md").read_text())
    assert len(rows) == 2 and "[first]" in rows[0] and "100.00 (100.00)" in rows[0], rows
    assert "[again]" in rows[1] and "0.00 (0.00)" in rows[1], rows
