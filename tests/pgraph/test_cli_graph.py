"""``kgagents graph``: import (compact store, ARK-V1 files merged or by record), list, info, show (text, JSON
lines, HTML), export, and clear errors."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from kgagents.cli import main
from kgagents.tools.kg.base import snapshot_from_jsonl

CR_LT = resources.files("evals") / "data" / "colota" / "customized_dataset.jsonl"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_import_info_show_export(capsys, tmp_path):
    code, out, err = run(capsys, "graph", "import", str(CR_LT), "--merge", "--name", "crlt")
    assert code == 0 and out.strip() == "crlt" and "fingerprint" in err
    code, out, _ = run(capsys, "graph", "list")
    assert code == 0 and out.split()[:5] == ["crlt", "compact", "12253", "nodes", "15807"]
    code, out, _ = run(capsys, "graph", "info", "crlt", "--json")
    info = json.loads(out)
    assert (info["nodes"], info["edges"], info["format"]) == (12253, 15807, "ark")
    assert info["relations"]["has pet"] >= 1 and info["open_seconds"] >= 0
    code, out, _ = run(capsys, "graph", "info", "crlt")
    assert "12253 nodes, 15807 edges" in out and "embedding indexes: none yet" in out
    code, out, _ = run(capsys, "graph", "show", "crlt", "Sablé", "--html", str(tmp_path / "s.html"))
    assert code == 0 and "→ animal breed (1): dachshund" in out and "← has pet (1): Yui Yuigahama" in out
    page = (tmp_path / "s.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "dachshund" in page
    code, out, _ = run(capsys, "graph", "show", "crlt", "Sablé", "--json")
    snapshot = snapshot_from_jsonl(out)
    assert {"Sablé", "dachshund", "Yui Yuigahama"} <= {n["id"] for n in snapshot["nodes"]}
    code, out, err = run(capsys, "graph", "export", "crlt", "--out", str(tmp_path / "all.jsonl"))
    exported = snapshot_from_jsonl((tmp_path / "all.jsonl").read_text(encoding="utf-8"))
    assert len(exported["nodes"]) == 12253 and len(exported["relationships"]) == 15807


def test_a_record_of_a_file_of_many_graphs(capsys, tmp_path):
    code, out, _ = run(capsys, "graph", "import", str(CR_LT), "--record", "S2", "--to", str(tmp_path / "s2"))
    assert code == 0 and out.strip() == str(tmp_path / "s2")
    code, out, _ = run(capsys, "graph", "info", str(tmp_path / "s2"), "--json")
    assert json.loads(out)["edges"] == 32


@pytest.mark.slow
def test_clear_errors(capsys, tmp_path):
    code, _, err = run(capsys, "graph", "info", "nothing-here")
    assert code == 2 and "no graph named or at 'nothing-here'" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"graph": [["a", "b"]]}', encoding="utf-8")
    code, _, err = run(capsys, "graph", "import", str(bad))
    assert code == 2 and "edge 0: expected [head, tail" in err
    code, _, err = run(capsys, "graph", "import", str(CR_LT))
    assert code == 2 and "holds 200 graphs" in err
    run(capsys, "graph", "import", str(CR_LT), "--record", "S2", "--name", "s2")
    code, _, err = run(capsys, "graph", "show", "s2", "Sable")
    assert code == 2 and "no node with id or name 'Sable'" in err and "Sablé" in err


@pytest.mark.parametrize("argv", [["graph"], ["graph", "import"]])
def test_usage_errors(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)


@pytest.mark.slow
def test_ask_explores_an_imported_graph_by_name(capsys, tmp_path, ark_example):
    from kgagents.tools.pgraph import open_graph
    from tests.ark import script as S

    source = tmp_path / "yui.json"
    source.write_text(json.dumps(ark_example), encoding="utf-8")
    run(capsys, "graph", "import", str(source), "--name", "yui")
    g = open_graph("yui")
    steps = [*S.anchor("Yui Yuigahama"), *S.relation("has pet"),
             *S.reasoning([g.triples("Yui Yuigahama", "has pet")[0].key], "Her pet is Sablé.", True),
             *S.anchor("Sablé"), *S.relation("animal breed"),
             *S.reasoning([g.triples("Sablé", "animal breed")[0].key], "A dachshund.", False), *S.final(False)]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "ark", "steps": steps}), encoding="utf-8")
    code, out, _ = run(capsys, "ask", "--workflow", "ark", "--graph", "yui", "--model", f"scripted:{script}",
                       "--quiet", ark_example["question"])
    assert code == 0 and out.strip() == "False"
    code, _, err = run(capsys, "ask", "--graph", "yui", "--model", f"scripted:{script}", "question?")
    assert code == 2 and "does not read a static knowledge graph" in err
