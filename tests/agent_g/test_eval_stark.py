"""``kgagents eval`` on a STaRK-style knowledge base: Agent-G and its text-RAG baseline rank the documents, the
runner scores them with STaRK's metrics (Hit@1, Hit@5, Recall@20, MRR) and writes the report."""

from __future__ import annotations

import json

import pytest

from kgagents.cli import main
from tests.agent_g.conftest import QUESTION, decide, validate

NODES = [("0", "drug", "Ivermectin", "a broad-spectrum anti-parasite medication."),
         ("6", "drug", "Rifampin", "an antibiotic that induces CYP3A4."),
         ("8", "drug", "Albendazole", "an anthelmintic for roundworm infections."),
         ("9", "drug", "Aspirin", "a pain reliever."),
         ("1", "gene/protein", "CYP3A4", "a liver enzyme that metabolises drugs."),
         ("5", "disease", "strongyloidiasis", "a roundworm infection."),
         ("7", "disease", "tuberculosis", "a bacterial infection of the lungs.")]
EDGES = [("0", "enzyme", "1"), ("6", "enzyme", "1"), ("0", "indication", "5"), ("8", "indication", "5"),
         ("6", "indication", "7")]
SECOND = "Which drugs are indicated for strongyloidiasis?"


def stark_folder(tmp_path):
    skb = tmp_path / "prime" / "skb"
    skb.mkdir(parents=True)
    (skb / "nodes.jsonl").write_text("\n".join(json.dumps(
        {"id": i, "type": t, "name": n, "text": f"- name: {n}\n- type: {t}\n- details: {d}"})
        for i, t, n, d in NODES) + "\n")
    edges = [(h, r, t) for h, r, t in EDGES] + [(t, r, h) for h, r, t in EDGES]  # PrimeKG lists both directions
    (skb / "edges.jsonl").write_text("\n".join(json.dumps({"src": h, "relation": r, "dst": t})
                                               for h, r, t in edges) + "\n")
    (tmp_path / "prime" / "qa.jsonl").write_text(
        json.dumps({"id": 1, "query": QUESTION, "answer_ids": [0]}) + "\n"
        + json.dumps({"id": 2, "query": SECOND, "answer_ids": "[0, 8]"}) + "\n")
    return tmp_path / "prime"


@pytest.mark.slow
def test_eval_agent_g_and_text_rag_on_stark(tmp_path, capsys):
    data = stark_folder(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [
        decide(1, entities=[("CYP3A4", "gene/protein"), ("strongyloidiasis", "disease")],
               relations=["enzyme", "indication"], context=".*CYP3A4 enzyme"),
        decide(1, entities=[("strongyloidiasis", "disease")], relations=["indication"], context=".*indicated for"),
        validate(1, "yes", times=0)]}))
    runs = {}
    for workflow in ("agent-g", "agent-g-text-rag"):
        runs[workflow] = tmp_path / workflow
        code = main(["eval", workflow, "--dataset", "stark", "--data", str(data), "--model", f"scripted:{script}",
                     "--out", str(runs[workflow]), "--no-progress", "--split", "all"])
        assert code == 0, capsys.readouterr().err[-3000:]
    printed = capsys.readouterr().out
    records = {r["id"]: r for r in map(json.loads, (runs["agent-g"] / "results.jsonl").read_text().splitlines())}
    assert records["1"]["details"] == {"hit@1": 1.0, "hit@5": 1.0, "recall@20": 1.0, "mrr": 1.0}
    assert set(json.loads(records["2"]["answer"])) == {"0", "8"}  # the disease's ego-graph along `indication`
    assert records["2"]["details"]["recall@20"] == 1.0 and records["2"]["details"]["hit@1"] == 1.0
    assert "hit@1 1.0000" in printed and "mrr 1.0000" in printed
    baseline = [json.loads(line) for line in (runs["agent-g-text-rag"] / "results.jsonl").read_text().splitlines()]
    assert all(len(json.loads(r["answer"])) == len(NODES) for r in baseline)  # every document, ranked by VSS
    summary = json.loads((runs["agent-g"] / "summary.json").read_text())
    assert summary["hit@1"] == 1.0 and summary["n"] == 2
    assert main(["report", str(runs["agent-g"]), str(runs["agent-g-text-rag"]), "--out", str(tmp_path / "rep"),
                 "--no-plots"]) == 0
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "hit@1" in report and "agent-g-text-rag" in report


def test_ranked_of():
    from kgagents.evals.stark import ranked_of

    assert ranked_of('["3", 4]', {}) == ["3", "4"] and ranked_of("7", {}) == ["7"]
    assert ranked_of(["3", 4], {}) == ["3", "4"]
    assert ranked_of("ignored", {"ranked_ids": [1, 2]}) == ["1", "2"]
    assert ranked_of("[not json", {}) == [] and ranked_of("", {}) == []
