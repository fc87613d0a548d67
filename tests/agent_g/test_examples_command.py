"""``kgagents agent-g examples``: in-context examples collected from STaRK's training split and verified by
its gold, written where the example settings read them, and read back by a run."""

from __future__ import annotations

import json

import pytest

from kgagents.cli import main
from tests.agent_g.conftest import decide

STEPS = [  # STaRK-PrimeKG's training split: questions 3 and 4 (kgagents.evals.stark_fixture.PRIME_SPLITS)
    decide(1, entities=[("tuberculosis", "disease"), ("CYP3A4", "gene/protein")], relations=["indication", "enzyme"],
           context=".*Which antibiotic induces CYP3A4"),
    decide(1, entities=[("Ivermectin", "drug")], relations=["indication"], context=".*Which genes does Ivermectin"),
    decide(2, entities=[("Ivermectin", "drug")], relations=["target"],
           context=".*Which genes does Ivermectin.*The entity or relation is incorrect")]


@pytest.mark.slow
def test_examples_from_the_training_split(stark_root, tmp_path, capsys):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": STEPS}))
    out = tmp_path / "examples"
    code = main(["agent-g", "examples", "--dataset", "stark-prime", "--data", str(stark_root), "--n", "25",
                 "--model", f"scripted:{script}", "--out", str(out), "--no-progress"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "2 agent example(s)" in printed.out and "1 commentor example(s)" in printed.out
    agent = (out / "agent_examples.txt").read_text()
    assert ("Question: Which antibiotic induces CYP3A4 and treats tuberculosis?\nAction: entities: tuberculosis "
            "(disease), CYP3A4 (gene/protein); relations: indication, enzyme; source: knowledge graph") in agent
    assert "Action: entities: Ivermectin (drug); relations: target; source: knowledge graph" in agent
    assert "relations: indication; source" not in agent  # the rejected action is no agent example
    commentor = (out / "commentor_examples.txt").read_text()
    assert commentor.startswith("Question: Which genes does Ivermectin target?\nAction: entities: Ivermectin "
                                "(drug); relations: indication; source: knowledge graph\nRetrieval: module: graph")
    assert commentor.rstrip().endswith("Feedback: incorrect entity/relation")
    records = [json.loads(line) for line in (out / "examples.jsonl").read_text().splitlines()]
    assert [(r["id"], r["agent_examples"], r["commentor_examples"]) for r in records] == [("3", 1, 0), ("4", 1, 1)]
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["id"] for r in results} == {"3", "4"}  # the training split only

    # the files as the run's examples: the agent reads them instead of the built-in ones
    again = tmp_path / "again.json"
    again.write_text(json.dumps({"steps": [decide(1, entities=[("CYP3A4", "gene/protein")], relations=["enzyme"],
                                                  context=".*Which antibiotic induces CYP3A4 and treats tuberculosis"
                                                          r"\?\nAction: entities: tuberculosis", times=0),
                                           {"when": r"\[stage: validator", "content": "yes", "times": 0}]}))
    code = main(["eval", "agent-g", "--dataset", "stark-prime", "--data", str(stark_root), "--model",
                 f"scripted:{again}", "--out", str(tmp_path / "run"), "--no-progress", "--no-report",
                 "--set", f"agent_examples={out / 'agent_examples.txt'}",
                 "--set", f"commentor_examples={out / 'commentor_examples.txt'}"])
    assert code == 0, capsys.readouterr().err


def test_examples_need_a_sensible_n(stark_root, capsys):
    assert main(["agent-g", "examples", "--dataset", "stark-prime", "--data", str(stark_root), "--n", "0",
                 "--model", "scripted:x"]) == 2
    assert "--n must be at least 1" in capsys.readouterr().err
