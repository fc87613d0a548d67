"""CoLoTa / CR-LT loaders (with the known data defects) and the ARK-V1 paper's metrics."""

from __future__ import annotations

import json
import math

import pytest

from kgagents.evals.colota import (
    DATA_DIR,
    CoLoTaDataError,
    CoLoTaScorer,
    KGQAQuestion,
    colota_metrics,
    data_issues,
    format_metrics,
    load_colota,
    load_cr_lt,
    load_cr_lt_kgqa,
    normalise_answer,
    records_to_answers,
    reliability,
    resolve_gold_triples,
)


def test_cr_lt_subgraphs():
    questions = load_cr_lt()
    assert len(questions) == 200 and questions[0].id == "S1" and questions[-1].id == "S200"
    assert sum(q.answer is True for q in questions) == 96 and sum(q.answer is False for q in questions) == 104
    assert sum(len(q.graph) for q in questions) == 15_807
    s2 = next(q for q in questions if q.id == "S2")
    assert s2.question == "Is Yui Yuigahama's pet a corgi?" and s2.answer is False
    assert s2.gold_triples == ["(Yui Yuigahama, has pet, Sablé)", "(Sablé, animal breed, dachshund)"]
    assert s2.reasoning_strategy and s2.inference_rule and s2.graph_file.endswith("customized_dataset.jsonl")


def test_cr_lt_defects_are_reported():
    notes = data_issues(load_cr_lt())
    assert "S100: entity 'New York City' has no QID (null in the source)" in notes
    assert "S126: entity 'Zulfiqar Ali Bhutto' has no QID (null in the source)" in notes
    missing = sorted(n.split(":")[0] for n in notes if "does not occur in the subgraph" in n)
    assert missing == sorted(["S6", "S48", "S62", "S106", "S109", "S130", "S138", "S169"])


@pytest.mark.slow
def test_cr_lt_selection():
    assert [q.id for q in load_cr_lt(ids=["S3", "S1"])] == ["S1", "S3"]
    assert [q.id for q in load_cr_lt(limit=2)] == ["S1", "S2"]
    with pytest.raises(CoLoTaDataError, match="no question with id S999"):
        load_cr_lt(ids=["S1", "S999"])


def test_cr_lt_bad_files_are_clear_errors(tmp_path):
    bad = tmp_path / "customized_dataset.jsonl"
    bad.write_text('{"id": "S1", "question": "q?", "a_entity": true, "graph": [["a", "b", {"relation": "r"}]]}\n'
                   '{"id": "S2", "question": "q?", "a_entity": true, "graph": [["a", "b"]]}\n', encoding="utf-8")
    with pytest.raises(CoLoTaDataError, match="S2: edge 0 is not"):
        load_cr_lt(bad, with_gold=False)
    bad.write_text('{"id": "S1", "graph": [\n', encoding="utf-8")
    with pytest.raises(CoLoTaDataError, match="line 1: not valid JSON"):
        load_cr_lt(tmp_path, with_gold=False)


@pytest.mark.slow
def test_colota_seeds_and_defects():
    qa = load_colota("qa")
    assert len(qa) == 200 and qa[0].id == "S1" and all(isinstance(q.answer, bool) for q in qa)
    s39 = next(q for q in qa if q.id == "S39")
    assert s39.answer is False and "took False from customized_dataset.jsonl" in s39.issues[0]
    assert len(load_colota("cv")) == 150
    everything = load_colota("qa", seeds_only=False)
    assert len(everything) == 1691 and len({q.id for q in everything}) == 1691
    dup = next(q for q in everything if q.id == "S200#2")
    assert any("repeats an earlier record" in i for i in dup.issues)
    assert "Souda" in dup.q_entity and not any(k.startswith(", ") for q in everything for k in q.q_entity)
    assert any("copied from a seed" in i for i in dup.issues)
    assert "C150#2" in {q.id for q in load_colota("cv", seeds_only=False)}
    no_fill = next(q for q in load_colota("qa", fill_answers=False) if q.id == "S39")
    assert no_fill.answer is None and "no gold answer" in no_fill.issues[0]
    with pytest.raises(CoLoTaDataError, match="subsets"):
        load_colota("xx")


def test_cr_lt_kgqa_files():
    qa = load_cr_lt_kgqa("qa")
    assert len(qa) == 200 and qa[0].gold_triples == ["(Horsens, population, 59,449)", "(Ikast, population, 15,979)"]
    assert next(q for q in qa if q.id == "S39").answer is None
    cv = load_cr_lt_kgqa("cv")
    assert len(cv) == 150 and cv[0].reasoning_steps[0]["evidence"] == ["1- (Naďa Hejná, spouse, Vít Hejný)"]


def test_the_newest_cr_lt_qa_file_names_its_defect(tmp_path):
    text = (DATA_DIR / "CR-LT-QA.json").read_text(encoding="utf-8")
    broken = tmp_path / "CR-LT-QA.json"
    # the upstream HEAD adds an entity to S33 without the comma before it
    broken.write_text(text.replace('"Jordan Motor Car Company": "Q1703639"\n',
                                   '"Jordan Motor Car Company": "Q1703639"\n      "Kaká": "Q531814"\n', 1),
                      encoding="utf-8")
    with pytest.raises(CoLoTaDataError, match=r"not valid JSON.*misses a comma in S33"):
        load_cr_lt_kgqa("qa", tmp_path)


def test_gold_triples_resolve_against_the_subgraph():
    q = KGQAQuestion(id="X", question="?", answer=True, gold_triples=[
        "(Horsens, population, 59,449)", "1- (Big, Town, located in, Small, Land)", "(Nobody, knows, x)",
        "(Mike Mitchell, date of birth, 18 October 1970)", "(E, candidate, Barack Obama {votes received, 1})"])
    graph = [["Horsens", "+59449", {"relation": "population"}],
             ["Big, Town", "Small, Land", {"relation": "located in"}],
             ["Mike Mitchell", "+1970-10-18T00:00:00Z", {"relation": "date of birth"}],
             ["E", "Barack Obama", {"relation": "candidate", "votes received": "+1"}]]
    found = [(t.head, t.relation, t.tail) for t in resolve_gold_triples(q, graph)]
    assert found == [("Horsens", "population", "+59449"), ("Big, Town", "located in", "Small, Land"),
                     (None, None, None), ("Mike Mitchell", "date of birth", "+1970-10-18T00:00:00Z"),
                     ("E", "candidate", "Barack Obama")]


def test_metrics_as_in_the_paper():
    gold = {"q1": True, "q2": False, "q3": True}
    answers = {"q1": [True, True], "q2": [None, False], "q3": [False, None]}
    m = colota_metrics(answers, gold)
    assert m["questions"] == 3 and m["runs"] == 2
    assert m["answer_rate"]["per_run"] == pytest.approx([2 / 3, 2 / 3]) and m["answer_rate"]["std"] == 0
    assert m["conditional_accuracy"]["per_run"] == pytest.approx([0.5, 1.0])
    assert m["conditional_accuracy"]["mean"] == pytest.approx(0.75)
    assert m["conditional_accuracy"]["std"] == pytest.approx(math.sqrt(0.125))   # sample std over runs
    assert m["overall_accuracy"]["per_run"] == pytest.approx([1 / 3, 2 / 3])
    half = 1 - 1 / math.log2(3)
    assert m["reliability_per_question"] == pytest.approx({"q1": 1.0, "q2": half, "q3": half})
    assert m["reliability"] == pytest.approx((1 + 2 * half) / 3)
    text = format_metrics(m)
    assert "answer rate %:          66.67 ± 0.00" in text and "reliability:            0.58" in text


def test_reliability_bounds_and_edge_cases():
    assert reliability([True] * 30) == 1.0
    assert reliability([True, False, None] * 10) == pytest.approx(0.0)
    assert reliability(["True", "yes", True]) == 1.0
    one = colota_metrics({"a": [None], "b": [True]}, {"a": True, "b": True, "c": False})
    assert one["conditional_accuracy"]["mean"] == 1.0 and one["answer_rate"]["mean"] == 0.5
    assert colota_metrics({"a": [None]}, {"a": True})["conditional_accuracy"]["per_run"][0] != 0.5  # nan: none answered
    assert colota_metrics({"a": [True], "z": [True]}, {"a": True, "z": None})["skipped_no_gold"] == ["z"]
    with pytest.raises(ValueError, match="same number of runs"):
        colota_metrics({"a": [True], "b": [True, False]}, {"a": True, "b": True})
    assert [normalise_answer(x) for x in ("True", "no.", "Yes, it is", "maybe", None, 1)] == [
        True, False, True, None, None, None]


async def test_scorer_and_records():
    class It:
        gold = True

    scorer = CoLoTaScorer()
    assert (await scorer.score(It(), True)).correct is True
    assert (await scorer.score(It(), None)).grade == "ABSTAINED"
    records = [{"id": "a", "run": 0, "answer": True, "gold": True, "correct": True},
               {"id": "a", "run": 1, "answer": None, "gold": True, "correct": False, "error": "boom"},
               {"id": "b", "run": 0, "answer": False, "gold": True, "correct": False}]
    answers, gold, failed = records_to_answers(records)
    assert answers == {"a": [True, None], "b": [False, None]} and gold == {"a": True, "b": True}
    assert failed == {"a": {1}, "b": {1}}   # an error and a missing record: no answer of the agent
    flat = scorer.metrics(records)
    assert flat["runs"] == 2 and flat["failed_runs"] == 2 and flat["answer_rate"] == 1.0
    assert flat["reliability"] == 1.0 and flat["accuracy"] == 0.5
    json.dumps(flat, allow_nan=False)


def test_failed_runs_are_left_out_of_the_metrics_not_counted_as_abstentions():
    """A run that failed says nothing about the agent: it neither lowers the answer rate nor steadies the answers."""
    gold = {"a": True, "b": False}
    m = colota_metrics({"a": [True, None, True], "b": [None, False, None]}, gold, {"a": {1}, "b": {2}})
    assert m["answer_rate"]["per_run"] == pytest.approx([0.5, 1.0, 1.0])   # b's run 0 is a real abstention
    assert m["overall_accuracy"]["per_run"] == pytest.approx([0.5, 1.0, 1.0])
    assert m["reliability_per_question"]["a"] == 1.0      # [True, True]: the failed run is not a third answer
    assert m["reliability_per_question"]["b"] == pytest.approx(1 - 1 / math.log2(3))   # [None, False]
    assert m["failed_runs"] == 2 and m["failed"] == ["a run 1", "b run 2"]
    text = format_metrics(m)
    assert "failed runs, left out of the metrics: 2 of 6 (a run 1, b run 2)" in text

    # every run failed (e.g. a dataset without graphs): nothing to measure, not "answer rate 0, reliability 1"
    everything = colota_metrics({"a": [None, None]}, {"a": True}, {"a": {0, 1}})
    assert math.isnan(everything["answer_rate"]["mean"]) and math.isnan(everything["reliability"])
    text = format_metrics(everything)
    assert "answer rate %:          n/a" in text and "reliability:            n/a" in text
    assert "failed runs, left out of the metrics: 2 of 2" in text
