"""What a new user meets in the first hour: demos kept where ``runs`` / ``show`` find them, the real thread id
in the interrupt message, ``show THREAD --kg FILE``, evaluation items opened with ``show``, CSV triples,
aligned ``runs`` columns, and a hint at the demos when no model is configured."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from kgagents.cli import format_runs, main
from kgagents.core.runs import RunRecord
from tests import kgot_script as S
from tests.evals.test_cli_eval import GRADER, simpleqa_csv


def test_a_demo_is_kept_where_runs_and_show_find_it_and_prints_its_question(capsys):
    assert main(["demo", "--workflow", "ark", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "False"
    assert "question: Is Yui Yuigahama's pet a corgi?" in err
    thread = re.search(r"kept as thread (\S+)", err).group(1)
    assert main(["runs"]) == 0
    listed = capsys.readouterr().out
    assert thread in listed and "Is Yui Yuigahama's pet a corgi? -> False" in listed  # ARK-V1's question
    assert main(["show", thread]) == 0
    assert "Is Yui Yuigahama's pet a corgi?" in capsys.readouterr().out


def test_runs_columns_stay_aligned_for_every_workflow_name():
    now = time.time()
    records = [RunRecord("t-1", "ark", "Is it?", {}, now, "done", "True"),
               RunRecord("t-22", "agent-g-corrective-rag", "Who\nplays?", {}, now, "interrupted", None),
               RunRecord("t-333", "kgot", "", {}, now, "failed", None)]
    lines = format_runs(records)
    starts = {name: {line.index(f" {name} ") for line in lines if f" {name} " in line}
              for name in ("ark", "agent-g-corrective-rag", "kgot")}
    assert len({min(v) for v in starts.values()}) == 1  # the workflow column starts at one place
    status_at = {line.index(status) for line, status in zip(lines, ("done", "interrupted", "failed"), strict=True)}
    assert len(status_at) == 1
    assert "Who plays?" in lines[1] and "(no question recorded)" in lines[2]


def test_an_interrupted_run_names_its_real_thread(monkeypatch, tmp_path, capsys):
    from kgagents.graphs import workflows

    async def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(workflows, "run_thread", interrupted)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "none", "steps": []}))
    assert main(["ask", "q", "--model", f"scripted:{script}", "--thread", "my-thread-7", "--quiet"]) == 130
    err = capsys.readouterr().err
    assert "continue with `kgagents resume my-thread-7`" in err and "THREAD" not in err


def test_show_kg_takes_the_file_as_a_user_types_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--workflow", "grounded", "--quiet"]) == 0
    thread = re.search(r"kept as thread (\S+)", capsys.readouterr().err).group(1)
    assert main(["show", thread, "--kg", "thoughts.html"]) == 0
    assert capsys.readouterr().out.strip() == "thoughts.html"
    assert "<html" in (tmp_path / "thoughts.html").read_text(encoding="utf-8").lower()
    assert main(["show", thread, "--kg"]) == 0  # the default name still works
    assert (tmp_path / f"thoughts-{thread}.html").is_file()


def test_an_evaluation_item_opens_with_show(tmp_path, capsys):
    data = simpleqa_csv(tmp_path / "simpleqa.csv")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "eval", "steps": [
        S.step(GRADER, times=0, content="A"),
        S.step("general AI assistant", times=0, content="FINAL ANSWER: Paris")]}))
    out = tmp_path / "zs"
    assert main(["eval", "zeroshot", "--dataset", "simpleqa", "--data", str(data), "--model",
                 f"scripted:{script}", "--out", str(out), "--no-progress", "--limit", "1"]) == 0
    capsys.readouterr()
    record = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert main(["show", record["thread_id"]]) == 2  # not a run of `ask`: the error says how to open it
    assert "--eval RESULTS_DIR" in capsys.readouterr().err
    for name in (record["thread_id"], record["id"]):  # by thread, or by item id
        assert main(["show", name, "--eval", str(out)]) == 0
        shown = capsys.readouterr().out
        assert f"Thread {record['thread_id']} (zeroshot)" in shown and "capital of France" in shown
    assert main(["show", "nope", "--eval", str(out)]) == 2
    assert "no item or thread 'nope'" in capsys.readouterr().err


def test_graph_import_reads_csv_triples_and_names_the_formats(tmp_path, capsys):
    from kgagents.tools.pgraph import open_graph

    source = tmp_path / "people.csv"
    source.write_text('head,relation,tail,qualifiers\nAlice,knows,Bob,"{""since"": 2020}"\n'
                      '"Smith, Bob",likes,Tea,\n', encoding="utf-8")
    assert main(["graph", "import", str(source), "--name", "people"]) == 0
    assert capsys.readouterr().out.strip() == "people"
    graph = open_graph("people")
    assert graph.stats().edges == 2 and graph.nodes_named("Smith, Bob")
    bad = tmp_path / "notes.dat"
    bad.write_text("just some words\n", encoding="utf-8")
    assert main(["graph", "import", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "triples (.tsv, .csv or JSON lines" in err and "grbench (" in err and "crag (" in err
    short = tmp_path / "short.csv"
    short.write_text("Alice,knows\n", encoding="utf-8")
    assert main(["graph", "import", str(short)]) == 2
    assert "short.csv, line 1: expected head,relation,tail" in capsys.readouterr().err


def test_no_model_points_at_the_demos(tmp_path, capsys):
    assert main(["ask", "what?", "--quiet"]) == 2
    assert "make demo" in capsys.readouterr().err


def test_make_ask_without_a_question_mentions_the_demo():
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text(encoding="utf-8")
    usage = next(line for line in makefile.splitlines() if "usage: make ask" in line)
    assert "make demo" in usage
