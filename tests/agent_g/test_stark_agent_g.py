"""Agent-G on STaRK's three datasets, end to end: ``kgagents eval`` over the released layout (official split,
the SKB imported as STaRK builds it) with a scripted model that follows each question's gold path; both
retrieval modules rank only the dataset's candidates, and the scorer scores over them."""

from __future__ import annotations

import json

import pytest

from kgagents.cli import main
from kgagents.evals.stark_fixture import MAG_QUERY, NOTEBOOK_AMAZON_QUERY, NOTEBOOK_PRIME_QUERY
from tests.agent_g.conftest import decide, validate

GOLD_PATHS = {  # test split: the action that follows each question's gold path
    "mag": [decide(1, entities=[("Netaji Subhash Engineering College", "institution")],
                   relations=["author___affiliated_with___institution", "author___writes___paper"],
                   context=".*Netaji Subhash Engineering College on optical TALU"),
            decide(1, entities=[("Maria Ortiz", "author")], relations=["author___writes___paper"],
                   context=".*Which papers by Maria Ortiz")],
    "amazon": [decide(1, entities=[("Anglers Accessories Gehrke's Gink", "product")], relations=["also_buy"],
                      context=".*fly fishing knot guide")],
    "prime": [decide(1, entities=[("CYP3A4", "gene/protein"), ("strongyloidiasis", "disease")],
                     relations=["enzyme", "indication"], context=".*CYP3A4 enzyme")],
}
QUERIES = {"mag": MAG_QUERY, "amazon": NOTEBOOK_AMAZON_QUERY, "prime": NOTEBOOK_PRIME_QUERY}


def records(folder):
    return {r["id"]: r for r in map(json.loads, (folder / "results.jsonl").read_text().splitlines())}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mag", "amazon", "prime"])
def test_agent_g_follows_gold_paths_on_each_dataset(stark_root, tmp_path, capsys, name):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [*GOLD_PATHS[name], validate(1, "yes", times=0)]}))
    out = tmp_path / "run"
    code = main(["eval", "agent-g", "--dataset", f"stark-{name}", "--data", str(stark_root), "--model",
                 f"scripted:{script}", "--out", str(out), "--no-progress", "--no-report"])
    assert code == 0, capsys.readouterr().err[-3000:]
    got = records(out)
    assert set(got) == {"mag": {"0", "1"}, "amazon": {"1"}, "prime": {"1"}}[name]  # the test split only
    for record in got.values():
        assert record["details"]["hit@1"] == 1.0 and record["details"]["mrr"] == 1.0, record
    if name == "mag":  # the institution's ego-graph reaches authors and another institution: only papers rank
        assert json.loads(got["0"]["answer"]) == ["9", "11"]
        assert json.loads(got["1"]["answer"]) == ["12", "10"]
    if name == "amazon":  # Gehrke's Gink → also_buy → the knot tool → also_buy → the other two answers
        assert sorted(json.loads(got["1"]["answer"])) == ["0", "1", "2"] and got["1"]["details"]["recall@20"] == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["hit@1"] == 1.0 and summary["n"] == len(got)


@pytest.mark.slow
def test_the_text_module_and_the_baseline_rank_only_candidates(stark_root, tmp_path, capsys):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [decide(1, source="text documents", times=0),
                                            validate(1, "yes", times=0)]}))
    for workflow in ("agent-g", "agent-g-text-rag"):
        out = tmp_path / workflow
        code = main(["eval", workflow, "--dataset", "stark-mag", "--data", str(stark_root), "--model",
                     f"scripted:{script}", "--out", str(out), "--no-progress", "--no-report"])
        assert code == 0, capsys.readouterr().err[-3000:]
        for record in records(out).values():
            assert sorted(json.loads(record["answer"])) == ["10", "11", "12", "13", "9"]  # the five papers


async def test_scoring_drops_what_is_not_a_candidate(stark_root):
    from kgagents.evals.datasets import load_dataset
    from kgagents.evals.stark import StarkScorer

    item = load_dataset("stark-mag", stark_root).items[0]  # gold: paper 9
    scorer = StarkScorer()
    score = await scorer.score_run(item, None, {"ranked_ids": ["0", "4", "9", "11"]})  # an author, an institution
    assert score.details["hit@1"] == 1.0 and score.details["mrr"] == 1.0 and score.correct
    assert len(scorer.candidates_of(item)) == 5  # MAG's five papers


@pytest.mark.slow
async def test_without_a_dataset_the_graph_says_what_its_candidates_are(stark_root):
    """``kgagents ask --graph skb/mag --set task=retrieval``: no dataset sets ``candidate_types``; the
    imported SKB records MAG's (papers), and both modules keep to them."""
    from tests.agent_g.test_graph import run

    steps = [decide(1, source="text documents"), validate(1, "no"),
             {"when": r"\[stage: commentor, iteration 1\]", "structured": {"error_type": "incorrect document"}},
             decide(2, entities=[("Sourav Roy", "author")], relations=["author___writes___paper"]),
             validate(2, "yes")]
    state, _, _ = await run({"question": MAG_QUERY, "graph": str(stark_root / "skb" / "mag")}, steps,
                            task="retrieval")
    text, graph = state["iterations"]
    assert sorted(text["ranked_ids"]) == ["10", "11", "12", "13", "9"]
    assert sorted(graph["ranked_ids"]) == ["11", "9"]  # not the author's co-author or institution
