"""Agent-G on the command line: ``ask`` with web pages from files, ``show`` with every iteration, clear errors,
and the offline demo (a CRAG sample question through the real retriever bank and the mock KG API)."""

from __future__ import annotations

import json

import pytest

from kgagents.cli import main
from kgagents.cli.agent_g import pages_from_files
from tests.agent_g.conftest import comment, decide, step, validate


def test_pages_from_files(tmp_path):
    (tmp_path / "a.html").write_text("<html><head><title> Maroon  5 </title></head><body>A band.</body></html>")
    (tmp_path / "b.txt").write_text("Adam Levine sings.")
    a, b = pages_from_files([str(tmp_path / "a.html"), str(tmp_path / "b.txt")])
    assert a["name"] == "Maroon 5" and "html" in a and a["url"].startswith("file://")
    assert b == {"name": "b.txt", "url": (tmp_path / "b.txt").as_uri(), "text": "Adam Levine sings."}
    with pytest.raises(ValueError, match="page not found"):
        pages_from_files([str(tmp_path / "missing.html")])


@pytest.mark.slow
def test_ask_with_pages_then_show(tmp_path, capsys):
    (tmp_path / "band.html").write_text("<html><head><title>Maroon 5</title></head><body><p>Maroon 5 members: "
                                        "Adam Levine, PJ Morton.</p></body></html>")
    (tmp_path / "weather.txt").write_text("It rains in spring.")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [
        decide(1, source="text documents", domain="music"),
        step(r"\[stage: generator, iteration 1\].*PJ Morton.*<query_time>03/01/2024",
             content="Final answer: Adam Levine"),
        validate(1, "no"), comment(1, "incorrect question type"),
        decide(2, source="text documents", domain="music", question_type="set",
               context=".*predicted question type is wrong"),
        step(r"\[stage: generator, iteration 2\]", content="Final answer: PJ Morton"), validate(2, "yes")]}))
    runs = str(tmp_path / "runs")
    code = main(["--runs-dir", runs, "ask", "who plays keyboards in maroon 5?", "--workflow", "agent-g",
                 "--page", str(tmp_path / "band.html"), "--page", str(tmp_path / "weather.txt"),
                 "--query-time", "03/01/2024, 10:00:00 PT", "--model", f"scripted:{script}", "--thread", "p1",
                 "--quiet"])
    out = capsys.readouterr()
    assert code == 0 and out.out.strip() == "PJ Morton", out.err[-2000:]
    assert main(["--runs-dir", runs, "show", "p1"]) == 0
    shown = capsys.readouterr().out
    assert "Exit: accepted at iteration 2" in shown and "Iteration 1:" in shown and "Iteration 2:" in shown
    assert "validator: rejected" in shown and "feedback [incorrect question type]" in shown
    assert "[page " in shown and "Maroon 5" in shown and "answer: PJ Morton" in shown
    page = tmp_path / "retrieval.html"
    assert main(["--runs-dir", runs, "show", "p1", "--kg", "--out", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    retrieved = json.loads(text.split('id="kg-data">')[1].split("</script>")[0])[0]["kg"]
    assert "answer: PJ Morton" in text
    pages = [n for n in retrieved["nodes"] if n["labels"] == ["page"]]
    assert pages and all(any(r["source"] == "question" and r["target"] == n["id"] for r in retrieved["relationships"])
                         for n in pages)


@pytest.mark.parametrize("argv, message", [
    (["ask", "Q?", "--page", "x.html"], "--page and --query-time are for the workflows that read web pages: agent-g,"),
    (["ask", "Q?", "--workflow", "agent-g", "--page", "no-such.html"], "page not found: no-such.html"),
])
def test_clear_errors(argv, message, tmp_path, capsys):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": []}))
    assert main(["--runs-dir", str(tmp_path), *argv, "--model", f"scripted:{script}"]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_demo(capsys):
    assert main(["demo", "--workflow", "agent-g"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == "universal pictures", out.err[-3000:]
    assert "Scripted demo" in out.err and "gold answer: universal pictures" in out.err
    assert "retrieval (graph): 0 reference(s)" in out.err and "retrieval (text): 5 reference(s)" in out.err
    assert "feedback [incorrect retrieval module]" in out.err and "Exit: accepted at iteration 2" in out.err
