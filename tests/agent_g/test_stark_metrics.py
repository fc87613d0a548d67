"""STaRK's ranking metrics as its evaluator computes them: the cases of ``data/stark_metric_vectors.json``
were computed by STaRK's own ``Evaluator`` (stark_qa/evaluator.py) under torchmetrics 1.4.2, 1.7.3, 1.7.4 and
1.8.2 (``data/make_stark_metric_vectors.py``): short rankings, unranked answers among tied candidates, ties in
the run's scores, ids outside the candidate set, scores ≤ 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgagents.evals.stark import Candidates, rank_scores, ranking_metrics

VECTORS = json.loads((Path(__file__).parent / "data" / "stark_metric_vectors.json").read_text())
BEHAVIOUR = {"1.4.2": "<1.7.4", "1.7.3": "<1.7.4", "1.7.4": ">=1.7.4", "1.8.2": ">=1.7.4"}


def candidates_of(case):
    spec = case["candidates"]
    return list(range(*spec["range"])) if isinstance(spec, dict) else spec


@pytest.mark.parametrize("version", sorted(BEHAVIOUR))
@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_agrees_with_starks_evaluator(case, version):
    ranked = [str(i) for i, _ in case["pred"]]
    scores = [s for _, s in case["pred"]]
    got = ranking_metrics(ranked, [str(a) for a in case["answer_ids"]], [str(c) for c in candidates_of(case)],
                          scores=scores, torchmetrics=BEHAVIOUR[version])
    expected = case["expected"][version]
    assert got == pytest.approx({k: expected[k] for k in got}, abs=1e-6)


def test_the_cases_cover_what_differs():
    """The vectors include cases where the two torchmetrics behaviours differ, and where torch's argsort and
    topk break the same ties differently (an unranked answer within the first 20 for Recall, far down for
    MRR)."""
    differ = [c for c in VECTORS["cases"] if c["expected"]["1.4.2"] != c["expected"]["1.7.4"]]
    assert len(differ) >= 5
    split = [c for c in VECTORS["cases"] if c["expected"]["1.4.2"]["recall@20"] == 1.0
             and c["expected"]["1.4.2"]["mrr"] < 1 / 20]
    assert split


def test_a_ranking_stands_for_positive_decreasing_scores():
    assert rank_scores(["a", "b", "c"]) == [3.0, 2.0, 1.0]
    # the same as giving those scores: a ranking's metrics depend only on its order
    cands = [str(i) for i in range(40)]
    for ranked, gold in ((["7", "3"], ["5"]), (["1", "2", "3"], ["3", "39"]), (["9"], ["9"])):
        assert ranking_metrics(ranked, gold, cands) == ranking_metrics(ranked, gold, cands,
                                                                       scores=rank_scores(ranked))


def test_repeats_empty_rankings_and_default_candidates():
    assert ranking_metrics(["x", "a", "x"], ["a"], ["a", "x", "y"]) == ranking_metrics(["x", "a"], ["a"],
                                                                                       ["a", "x", "y"])
    assert ranking_metrics(["x", "a", "x"], ["a"], ["a", "x", "y"])["mrr"] == 0.5
    assert ranking_metrics(["x", "x", "z"], ["z"], ["a", "x", "y", "z"])["mrr"] == 0.5  # a repeat takes no place
    assert ranking_metrics([], ["a"], ["a", "b"]) == {"hit@1": 0.0, "hit@5": 0.0, "recall@20": 0.0, "mrr": 0.0}
    # without a candidate set: the ranked and gold ids (an unranked answer comes right after the ranking)
    assert ranking_metrics(["b", "c"], ["a"]) == {"hit@1": 0.0, "hit@5": 1.0, "recall@20": 1.0, "mrr": 1 / 3}
    candidates = Candidates(["10", "9", "x", "2", "9"])
    assert candidates.ids == ["2", "9", "10", "x"] and len(candidates) == 4  # STaRK's order: by index
    with pytest.raises(ValueError, match="torchmetrics behaviour"):
        ranking_metrics(["a"], ["a"], torchmetrics="1.8")
    with pytest.raises(ValueError, match="2 scores for 1 ranked ids"):
        ranking_metrics(["a"], ["a"], scores=[1.0, 2.0])


def test_the_two_scorers(stark_root):
    import asyncio

    from kgagents.evals.datasets import load_dataset
    from kgagents.evals.scorers import make_scorer

    item = load_dataset("stark-prime", stark_root).items[0]  # gold: node 0, never ranked below
    old, new = make_scorer("stark"), make_scorer("stark-torchmetrics-1.7.4")
    ranked = {"ranked_ids": ["6"]}
    a = asyncio.run(old.score_run(item, None, ranked)).details
    b = asyncio.run(new.score_run(item, None, ranked)).details
    assert a["recall@20"] == 1.0 and a["mrr"] > 0  # the unranked answer counts, after the ranking
    assert b["recall@20"] == 0.0 and b["mrr"] == 0.0 and b["hit@5"] == a["hit@5"] == 1.0


def test_per_iteration_means():
    from kgagents.evals.stark import curve_means

    records = [{"details": {"curve": [{"mrr": 0.0}, {"mrr": 1.0}, {"mrr": 1.0}]}},
               {"details": {"curve": [{"mrr": 0.5}]}},  # stopped after one iteration: its value holds
               {"details": {"curve": [{"mrr": None}, {"mrr": 0.25}]}}]
    records.append({"error": "failed: no curve"})  # counts 0 at every t
    assert curve_means(records, ["mrr"]) == {"mrr t=1": 0.5 / 4, "mrr t=2": 1.75 / 4, "mrr t=3": 1.75 / 4}
    assert curve_means([{"details": {}}, {"error": "x"}], ["mrr"]) == {} and curve_means([], ["mrr"]) == {}


async def test_candidates_come_from_the_item_then_the_graph(stark_root, tmp_path):
    """A MAG-shaped table-layout SKB records no candidate types: the item's (stark-mag: papers) decide."""
    import json as _json

    from kgagents.evals.datasets import Item
    from kgagents.evals.stark import StarkScorer

    folder = tmp_path / "kb"
    folder.mkdir()
    nodes = [{"id": 0, "type": "author", "name": "A"}, {"id": 1, "type": "paper", "name": "P1"},
             {"id": 2, "type": "paper", "name": "P2"}]
    (folder / "nodes.jsonl").write_text("\n".join(_json.dumps(n) for n in nodes) + "\n")
    (folder / "edges.jsonl").write_text(_json.dumps({"src": 0, "relation": "writes", "dst": 1}) + "\n")
    scorer = StarkScorer()
    mag = Item(id="q", question="q", gold=["2"], inputs={"graph": str(folder)}, meta={"candidate_types": ["paper"]})
    plain = Item(id="q", question="q", gold=["2"], inputs={"graph": str(folder)})
    assert scorer.candidates_of(mag).ids == ["1", "2"] and scorer.candidates_of(plain).ids == ["0", "1", "2"]
    hit = await scorer.score_run(mag, None, {"ranked_ids": ["0", "2"]})
    assert hit.grade == "HIT" and hit.correct and hit.details["mrr"] == 1.0  # the author is no candidate
    miss = await scorer.score_run(plain, None, {"ranked_ids": ["0", "2"]})
    assert miss.grade == "MISS" and not miss.correct and miss.details["mrr"] == 0.5
    assert scorer.candidates_of(Item(id="q", question="q", gold=[])) is None
    # the answer alone (no state), and the per-iteration curve over the same candidates and torchmetrics
    assert (await scorer.score(mag, '["0", "2"]')).details["mrr"] == 1.0
    curved = await scorer.score_run(mag, None, {"ranked_ids": ["2"], "curve": [["0", "2"], ["1"]]})
    assert [c["mrr"] for c in curved.details["curve"]] == [1.0, 0.5]
    newer = StarkScorer(">=1.7.4")
    curved = await newer.score_run(mag, None, {"ranked_ids": ["2"], "curve": [["1"]]})
    assert curved.details["curve"][0]["mrr"] == 0.0  # the unranked answer scores 0: not counted from 1.7.4 on
    # without the item's types, the imported SKB's: MAG's papers
    graph_only = Item(id="q", question="q", gold=["9"], inputs={"graph": str(stark_root / "skb" / "mag")})
    assert scorer.candidates_of(graph_only).ids == ["9", "10", "11", "12", "13"]


def test_the_scorers_means():
    from kgagents.evals.stark import StarkScorer

    records = [{"details": {"hit@1": 1.0, "mrr": 1.0, "hit@5": 1.0, "recall@20": 1.0}},
               {"details": {"hit@1": 0.0, "mrr": 0.5, "hit@5": 1.0, "recall@20": 0.5, "truncated_egos": 2}},
               {"error": "boom"}]  # a failed run counts 0
    out = StarkScorer().metrics(records)
    assert (out["n"], out["hit@1"], out["mrr"], out["hit@5"]) == (3, 1 / 3, 0.5, 2 / 3)
    assert out["failed runs"] == 1 and out["items with cut ego-graphs"] == 1
    assert StarkScorer().metrics([])["hit@1"] == 0.0
    assert (StarkScorer().name, StarkScorer(">=1.7.4").name) == ("stark", "stark-torchmetrics-1.7.4")
