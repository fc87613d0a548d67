"""Scorers against the public test vectors (tests/evals/data, see PROVENANCE.md) and cases of our own."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest

from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.datasets import Item
from kgagents.evals.scorers import (
    GaiaScorer,
    SimpleQAScorer,
    hit_at_k,
    parse_simpleqa_grade,
    precision_at_k,
    question_scorer,
    recall_at_k,
    reciprocal_rank,
    rouge_l,
    simpleqa_grader_prompt,
    simpleqa_grader_template,
    simpleqa_metrics,
)

DATA = Path(__file__).parent / "data"


def vectors(name):
    return json.loads((DATA / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", vectors("gaia_thirdparty_test_cases.json")["cases"],
                         ids=lambda c: f"{c['model_answer']!r}-vs-{c['ground_truth']!r}")
def test_gaia_public_cases(case):
    assert question_scorer(case["model_answer"], case["ground_truth"]) is case["expected"]


@pytest.mark.parametrize("answer, truth, expected", [
    ("1,000", "1000", True),        # a numeric ground truth: commas, $ and % are stripped from the answer
    ("1000", "1,000", False),       # a ground truth with a comma is a list of two elements
    ("$12.50", "12.5", True),
    ("45%", "45", True),
    ("forty-two", "42", False),     # unparseable numbers never match
    ("12.0 km", "12", False),
    ("sea gull", "seagull", True),  # whitespace is removed
    ("St. Louis", "st louis", True),  # punctuation removed for plain strings
    ("a, b.", "a, b", False),       # ... but kept inside list elements
    ("b, a", "a, b", False),        # order matters in lists
    ("Paris; 3", "paris, 3.0", True),
    (None, "None", True),           # a missing answer is the string "None"
    ("almost 42", "42", False),     # strict: no lenient close call
    ("42.000001", "42", False),
])
def test_gaia_rules_of_our_own(answer, truth, expected):
    assert question_scorer(answer, truth) is expected


async def test_gaia_scorer_leaves_unknown_gold_unscored():
    scorer = GaiaScorer()
    assert (await scorer.score(Item(id="x", question="q", gold="?"), "a")).correct is None
    assert (await scorer.score(Item(id="x", question="q", gold="4"), "4.0")).correct is True
    m = scorer.metrics([{"correct": True}, {"correct": False}, {"correct": None, "error": "boom"}])
    assert m == {"n": 3, "correct": 1, "accuracy": pytest.approx(1 / 3)}


def test_simpleqa_template_is_the_reference_one():
    template = simpleqa_grader_template()
    assert {n for _, n, _, _ in string.Formatter().parse(template) if n} == {"question", "target", "predicted_answer"}
    # every example grade of the public vectors is embedded in the template
    for ex in vectors("simpleqa_grader_prompt_examples.json")["examples"]:
        assert ex["predicted_answer"] in template
    prompt = simpleqa_grader_prompt("Q?", "gold", "pred")
    assert prompt.endswith('Just return the letters "A", "B", or "C", with no text around it.')
    assert "Question: Q?\nGold target: gold\nPredicted answer: pred\n```" in prompt


@pytest.mark.parametrize("reply, letter", [("A", "A"), ("B", "B"), ("C", "C"), ("  B\n", "B"), ("", "C"),
                                           ("I cannot grade this", "C"),  # the first C of "cannot"
                                           ("CORRECT", "C"),  # the reference rule's quirk, kept on purpose
                                           ("INCORRECT", "C"), ("xyz", "C"), ("The answer is B", "B")])
def test_simpleqa_parsing_rule(reply, letter):
    assert parse_simpleqa_grade(reply) == letter


async def test_simpleqa_grader_on_the_public_examples():
    """A scripted grader replies each example's expected letter; the scorer maps it to the expected grade."""
    examples = vectors("simpleqa_grader_prompt_examples.json")["examples"]
    names = {"A": "CORRECT", "B": "INCORRECT", "C": "NOT_ATTEMPTED"}
    for ex in examples:
        target = "Gold target: " + ex["gold_target"].replace("(", r"\(").replace(")", r"\)")
        predicted = "Predicted answer: " + __import__("re").escape(ex["predicted_answer"]) + "\n```"
        grader = ScriptedChatModel(steps=[{"when": target + r"\n" + predicted, "content": ex["expected"]}])
        item = Item(id="x", question=ex["question"], gold=ex["gold_target"])
        score = await SimpleQAScorer(grader).score(item, ex["predicted_answer"])
        assert score.grade == names[ex["expected"]]
        assert score.correct is (ex["expected"] == "A")
        assert score.usage["scripted"]["calls"] == 1


def test_simpleqa_metrics():
    m = simpleqa_metrics(["A", "A", "B", "C"])
    assert m["correct"] == 0.5 and m["incorrect"] == 0.25 and m["not_attempted"] == 0.25
    assert m["correct_given_attempted"] == pytest.approx(2 / 3)
    assert m["f_score"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert simpleqa_metrics(["C", "NOT_ATTEMPTED"])["f_score"] == 0.0
    assert simpleqa_metrics([])["n"] == 0
    assert simpleqa_metrics(["CORRECT", "INCORRECT"])["correct_given_attempted"] == 0.5


def test_simpleqa_runner_metrics_count_failed_items_as_not_attempted():
    m = SimpleQAScorer().metrics([{"grade": "CORRECT"}, {"grade": None, "error": "boom"}])
    assert m["correct"] == 0.5 and m["not_attempted"] == 0.5


@pytest.mark.slow
def test_rouge_l_public_vectors():
    for case in vectors("rouge_score_test_vectors.json")["cases"]:
        if case.get("rouge_types") == ["rougeL"] and "fmeasure" in case:
            got = rouge_l(case["prediction"], case["target"])
            assert got["precision"] == pytest.approx(case["precision"])
            assert got["recall"] == pytest.approx(case["recall"])
            assert got["fmeasure"] == pytest.approx(case["fmeasure"])
        elif case.get("prediction") == "" and "fmeasure" in case:
            assert rouge_l("", case["target"])["fmeasure"] == case["fmeasure"]
        elif case.get("score_multi"):
            best = max(rouge_l(case["prediction"], t)["fmeasure"] for t in case["targets"])
            assert best == pytest.approx(case["expected_fmeasure"]["rougeL"])
        elif "predictions" in case:
            for p, r in zip(case["predictions"], case["references"], strict=True):
                assert rouge_l(p, r)["fmeasure"] == pytest.approx(case["expected"]["rougeL"])
    assert rouge_l("The Cat, sat!", "the cat sat")["fmeasure"] == 1.0


@pytest.mark.parametrize("prediction, target, expected", [
    ("The venue is KDD", "KDD", (0.25, 1.0, 0.4)),  # a one-word gold inside a longer answer
    ("Graph reasoning", "KDD", (0.0, 0.0, 0.0)),  # no overlap: 0, not a division by zero
    ("", "KDD", (0.0, 0.0, 0.0)), ("— !", "x", (0.0, 0.0, 0.0)),  # no token on one side
    ("b a", "a b", (0.5, 0.5, 0.5)),  # a subsequence keeps the order
    ("a a b", "a b b", (2 / 3, 2 / 3, 2 / 3)), ("Ann Lee, Bo Chen", "Bo Chen", (0.5, 1.0, 2 / 3)),
    ("running runs", "run", (0.0, 0.0, 0.0)),  # no stemming
])
def test_rouge_l_by_hand(prediction, target, expected):
    got = rouge_l(prediction, target)
    assert (got["precision"], got["recall"], got["fmeasure"]) == pytest.approx(expected)


def test_retrieval_public_vectors():
    fns = {"retrieval_hit_rate": hit_at_k, "retrieval_recall": recall_at_k, "retrieval_precision": precision_at_k}
    checked = 0
    for case in vectors("torchmetrics_docstring_vectors.json")["cases"]:
        if case["fn"] in fns:
            assert fns[case["fn"]](case["preds"], case["target"], case["top_k"]) == pytest.approx(case["expected"])
            checked += 1
        elif case["fn"] == "retrieval_reciprocal_rank":
            assert reciprocal_rank(case["preds"], case["target"]) == pytest.approx(case["expected"])
            checked += 1
        # the ">= 1.8.0 only" cases give all-zero scores, which the rank-based definitions do not ignore
    assert checked == 4
    assert reciprocal_rank([0.9, 0.8], [False, False]) == 0.0 and recall_at_k([0.1], [False], 1) == 0.0
