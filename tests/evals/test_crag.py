"""CRAG: the loader on the shipped sample (and CRAG's other layouts, and broken files), CRAG's local
evaluation against its 35 judge examples and cases of our own, the metrics, the datasets' context values, and
``kgagents eval agent-g --dataset crag`` end to end with the mock KG API."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import re
import tarfile

import pytest

from kgagents.cli import main
from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.crag import (
    ACCURATE,
    HALLUCINATION,
    MISSING,
    SAMPLE,
    CragScorer,
    crag_metrics,
    judge_examples,
    load_crag,
    parse_judge_reply,
)
from kgagents.evals.datasets import DatasetError, Item, load_dataset
from kgagents.evals.runner import EvalOptions, ItemRunner
from kgagents.evals.scorers import make_scorer
from kgagents.nodes.agent_g import AgentGContext
from kgagents.prompts.crag_judge import INSTRUCTIONS, judge_system, judge_user
from kgagents.tools.crag_api import CragMockServer
from tests.agent_g.conftest import decide, step, validate

FIRST = "3dbed55e-66a3-4dcd-907d-096f49387e41"


def sample_lines() -> list[str]:
    return bz2.decompress(SAMPLE.read_bytes()).decode("utf-8").splitlines()


# ----------------------------------------------------------------------------------------------------------
# The dataset
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_shipped_sample_loads_by_default():
    ds = load_dataset("crag", None)
    assert ds.scorer == "crag" and ds.split == "all" and ds.group_label == "Domain" and len(ds.items) == 10
    first = ds.items[0]
    assert first.id == FIRST and first.gold == "yes" and first.group == "open"
    assert first.question == ("is microsoft office 2019 available in a greater number of languages than "
                              "microsoft office 2013?")
    assert first.meta["alternative_answers"] == [] and first.meta["question_type"] == "comparison"
    assert first.inputs["query_time"] == "02/28/2024, 10:04:54 PT"
    pages = first.inputs["pages"]
    assert len(pages) == 5 and set(pages[0]) == {"name", "url", "snippet", "html"}
    assert pages[0]["url"].startswith("https://medium.com/") and "<html" in pages[0]["html"].lower()
    assert sorted({i.group for i in ds.items}) == ["finance", "movie", "open", "sports"]
    assert len(load_dataset("crag", None, split="test").items) == 10  # every sample record is CRAG's split 1
    assert load_dataset("crag", None, split="validation").items == []
    assert [i.id for i in load_dataset("crag", SAMPLE, limit=2).items] == [FIRST, ds.items[1].id]


@pytest.mark.slow
def test_crags_other_layouts(tmp_path):
    lines = sample_lines()
    plain = tmp_path / "dev.jsonl"
    plain.write_text("\n".join(lines[:3]) + "\n\n", encoding="utf-8")
    gz = tmp_path / "dev.jsonl.gz"
    gz.write_bytes(gzip.compress("\n".join(lines[3:5]).encode("utf-8")))
    archive = tmp_path / "task3" / "crag_task_3_dev_v4.tar.bz2"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:bz2") as tar:
        data = bz2.compress("\n".join(lines[5:]).encode("utf-8"))
        info = tarfile.TarInfo("crag_task_3_dev_v4/part_1.jsonl.bz2")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    assert len(load_crag(plain, "all")) == 3 and len(load_crag(gz, "all")) == 2
    assert len(load_crag(archive, "all")) == 5 and len(load_crag(archive.parent, "all")) == 5
    assert len(load_dataset("crag", tmp_path).items) == 5  # the folder's own: dev.jsonl and dev.jsonl.gz
    record = json.loads(lines[0]) | {"alt_ans": ["yes it is"], "split": 0}
    del record["alternative_answers"], record["interaction_id"]
    other = tmp_path / "v4.jsonl"
    other.write_text(json.dumps(record) + "\n", encoding="utf-8")
    item = load_crag(other, "validation")[0]
    assert item.meta["alternative_answers"] == ["yes it is"] and item.id == "1"


@pytest.mark.slow
def test_broken_files_are_named_with_their_line(tmp_path):
    lines = sample_lines()
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset("crag", tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n{not json\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"crag: {re.escape(str(bad))}, line 2: not valid JSON"):
        load_dataset("crag", bad)
    no_query = tmp_path / "noquery.jsonl"
    no_query.write_text(json.dumps({"answer": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"noquery.jsonl, line 1: a record needs query"):
        load_crag(no_query, "all")
    odd = tmp_path / "odd.jsonl"
    odd.write_text(json.dumps({"query": "q", "answer": "a", "alternative_answers": "[oops"}) + "\n")
    with pytest.raises(DatasetError, match="line 1: alternative answers are not a list"):
        load_crag(odd, "all")
    corrupt = tmp_path / "corrupt.jsonl.bz2"
    corrupt.write_bytes(b"not bz2 at all")
    with pytest.raises(DatasetError, match=r"cannot read .*corrupt.jsonl.bz2"):
        load_crag(corrupt, "all")
    empty_tar = tmp_path / "x.tar"
    with tarfile.open(empty_tar, "w"):
        pass
    with pytest.raises(DatasetError, match=r"holds no .jsonl"):
        load_crag(empty_tar, "all")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match=r"holds no .jsonl"):
        load_crag(tmp_path / "empty", "all")
    with pytest.raises(DatasetError, match="no split 'dev'"):
        load_dataset("crag", None, split="dev")


# ----------------------------------------------------------------------------------------------------------
# CRAG's local evaluation
# ----------------------------------------------------------------------------------------------------------
def judge_step(truth: str, prediction: str, reply: str) -> dict:
    """A scripted judge's answer to one (ground truth, prediction) user message (not the system's
    examples)."""
    return {"when": re.escape(f"\n Ground truth: {truth}\n Prediction: {prediction}\n"), "content": reply}


def score_json(score: int) -> str:
    return json.dumps({"score": score, "explanation": "scripted"})


async def test_crags_35_judge_examples():
    examples = judge_examples()
    assert len(examples) == 35
    agreeing = ScriptedChatModel(steps=[judge_step(e["ground_truth"], e["prediction"],
                                                   score_json(e["expected_score"])) for e in examples])
    contrary = ScriptedChatModel(steps=[judge_step(e["ground_truth"], e["prediction"],
                                                   score_json(1 - e["expected_score"])) for e in examples])
    decided_before_the_judge = 0
    for example in examples:
        item = Item(id="x", question=example["question"], gold=example["ground_truth"])
        score = await CragScorer(agreeing).score(item, example["prediction"])
        assert score.correct is (example["expected_score"] == 1), example
        assert score.grade in (ACCURATE, HALLUCINATION)
        against = await CragScorer(contrary).score(item, example["prediction"])
        if against.details["rule"] != "judge" or not against.details.get("judge"):
            decided_before_the_judge += 1  # a rule decided: it must agree with CRAG's expected score
            assert against.correct is (example["expected_score"] == 1), example
    assert decided_before_the_judge == 1  # "william shakespeare": the one exact match
    assert len(agreeing.calls) == 34 and len(contrary.calls) == 34
    system = agreeing.calls[0]
    assert INSTRUCTIONS in system and system.count("\nOutput: {\"score\": ") == 35
    assert ('Prediction: "w shakespeare"\nOutput: {"score": 1, "explanation": "The prediction matches the '
            'ground truth as w is the abbreviation of william."}') in system


async def test_rules_before_the_judge():
    judge = ScriptedChatModel(steps=[judge_step("new york city", "the big apple", score_json(0)),
                                     judge_step("nyc", "the big apple", score_json(1)),
                                     judge_step("new york city", "NYC", score_json(0))])
    scorer = CragScorer(judge)

    async def grade(gold, prediction, alternatives=()):
        item = Item(id="x", question="q?", gold=gold, meta={"alternative_answers": list(alternatives)})
        return await scorer.score(item, prediction)

    for prediction in ("I don't know.", "Sorry, i don't know the answer", "I DON'T KNOW"):
        missing = await grade("paris", prediction)
        assert missing.grade == MISSING and missing.details == {"rule": "i don't know", "judge model": "scripted"}
    exact = await grade("Paris", "  paris ")
    assert exact.grade == ACCURATE and exact.details == {"rule": "exact match", "ground_truth": "Paris",
                                                         "judge model": "scripted"}
    assert (await grade("invalid question", "Invalid question")).grade == ACCURATE
    assert (await grade("invalid question", "This question is invalid: he never won it")).grade == ACCURATE
    assert (await grade("invalid question", "paris")).grade == HALLUCINATION
    premise = await grade("paris", "invalid question")
    assert premise.grade == HALLUCINATION and premise.details["rule"] == "invalid question"
    assert judge.calls == []  # no rule above needed the judge
    scorer = CragScorer(judge, alternatives=True)  # crag-alternatives: the answer, then each alternative
    second = await grade("new york city", "the big apple", ["nyc"])  # the judge, once per ground truth
    assert second.grade == ACCURATE and [j["score"] for j in second.details["judge"]] == [0, 1]
    assert second.details["judge"][0] == {"ground_truth": "new york city", "reply": score_json(0), "score": 0}
    assert len(judge.calls) == 2 and second.usage
    # CRAG's order: each ground truth in turn, its exact match, then the judge; an alternative's exact match
    # comes after the judge's verdict on the answer
    alternative = await grade("new york city", "NYC", ["nyc"])
    assert alternative.grade == ACCURATE and alternative.details["rule"] == "exact match"
    assert alternative.details["ground_truth"] == "nyc" and len(judge.calls) == 3


async def test_crag_grades_against_the_answer_alone_as_its_script_loads_it():
    """CRAG's local_evaluation.py loads each record's ``answer`` (not ``alt_ans``): an alternative answer is no
    ground truth for ``crag``; ``crag-alternatives`` counts it."""
    item = Item(id="x", question="q?", gold="new york city", meta={"alternative_answers": ["nyc"]})
    judge = ScriptedChatModel(steps=[{**judge_step("new york city", "nyc", score_json(0)), "times": 0}])
    plain = await make_scorer("crag", grader_model=judge).score(item, "nyc")
    assert plain.grade == HALLUCINATION and [j["ground_truth"] for j in plain.details["judge"]] == ["new york city"]
    widened = await make_scorer("crag-alternatives", grader_model=judge).score(item, "nyc")
    assert widened.grade == ACCURATE and widened.details["rule"] == "exact match"


async def test_an_unparseable_judge_reply_is_incorrect():
    for reply in ("yes", '{"score": 2}', '{"score": "1"}', "score: 1", ""):
        judge = ScriptedChatModel(steps=[{"content": reply or " "}])
        score = await CragScorer(judge).score(Item(id="x", question="q", gold="paris"), "the capital")
        assert score.grade == HALLUCINATION and score.details["judge"][0]["score"] is None, reply
    assert parse_judge_reply('{"score": 1, "explanation": "fine"}') == 1
    assert parse_judge_reply('{"explanation": "hmm"} Wait, no! {"score": 0, "explanation": "wrong"}') == 0
    assert parse_judge_reply('{"score": 1} then {"explanation": "none"}') is None  # the last block counts


def test_the_metrics():
    grades = [ACCURATE] * 5 + [MISSING] * 3 + [HALLUCINATION] * 2
    m = crag_metrics(grades)
    assert (m["n"], m["n_correct"], m["n_miss"], m["n_hallucination"]) == (10, 5, 3, 2)
    assert m["accuracy"] == 0.5 and m["missing"] == 0.3 and m["hallucination"] == 0.2
    assert m["score"] == pytest.approx((2 * 5 + 3) / 10 - 1)
    assert m["score"] == pytest.approx(m["accuracy"] - m["hallucination"])
    assert crag_metrics([]) == {"n": 0, "accuracy": 0.0, "hallucination": 0.0, "missing": 0.0, "score": 0.0,
                                "n_correct": 0, "n_miss": 0, "n_hallucination": 0}
    records = [{"grade": ACCURATE}, {"grade": HALLUCINATION}, {"grade": None, "error": "boom"}]
    out = make_scorer("crag").metrics(records)
    assert out["failed runs"] == 1 and out["missing"] == pytest.approx(1 / 3) and out["score"] == 0.0
    assert crag_metrics([])["score"] == 0.0


def test_the_judge_prompt():
    system = judge_system(judge_examples())
    assert system.startswith("<instructions>\nAssume you are a human expert")
    assert ("</instructions>\n<examples>\nYou should make the judgment based on provided examples.\n"
            "Examples:\n") in system
    user = judge_user("q?", "a", "b")
    assert user == "Question: q?\n Ground truth: a\n Prediction: b\n" and user.stage == "crag judge"
    with pytest.raises(ValueError, match="judge example 0 lacks explanation"):
        judge_system([{"question": "q", "ground_truth": "a", "prediction": "b", "expected_score": 1}])


# ----------------------------------------------------------------------------------------------------------
# Datasets set context values
# ----------------------------------------------------------------------------------------------------------
def test_datasets_give_agent_g_its_task(tmp_path):
    scorer = make_scorer("crag")
    crag = ItemRunner(EvalOptions(workflow="agent-g", out_dir=tmp_path), "crag", scorer)
    stark = ItemRunner(EvalOptions(workflow="agent-g", out_dir=tmp_path), "stark", scorer)
    assert crag.base_context.task == "generation" and stark.base_context.task == "retrieval"
    mine = EvalOptions(workflow="agent-g", out_dir=tmp_path, context_values={"task": "generation"})
    override = ItemRunner(mine, "stark", scorer)
    assert override.base_context.task == "generation"  # the user's value wins
    made = EvalOptions(workflow="agent-g", out_dir=tmp_path, context=AgentGContext(max_iterations=2))
    ready = ItemRunner(made, "stark", scorer)
    assert ready.base_context.task == "retrieval" and ready.base_context.max_iterations == 2
    other = ItemRunner(EvalOptions(workflow="zeroshot", out_dir=tmp_path), "crag", scorer)
    assert not hasattr(other.base_context, "task")  # only workflows whose context has the field


# ----------------------------------------------------------------------------------------------------------
# End to end
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_eval_agent_g_on_crag_with_the_mock_kg(tmp_path, capsys):
    agent = tmp_path / "agent.json"
    agent.write_text(json.dumps({"name": "agent", "steps": [
        decide(1, source="text documents", domain="encyclopedia", context=".*microsoft office 2019"),
        step(r"\[stage: generator, iteration 1\].*microsoft office 2019", content="Final answer: Yes"),
        decide(1, entities=[("meta", "ticker_symbol")], relations=["finance_get_pe_ratio"], domain="finance",
               context=".*dow jones"),
        step(r"\[stage: generator, iteration 1\].*META → finance_get_pe_ratio → 21.199127",
             content="The reference gives Meta's PE ratio.\nFinal answer: Meta"),
        validate("1", "yes", times=0)]}), encoding="utf-8")
    judge = tmp_path / "judge.json"
    judge.write_text(json.dumps({"name": "judge", "steps": [
        judge_step("salesforce", "Meta", '{"score": 0, "explanation": "Meta is not Salesforce."}')]}))
    out = tmp_path / "out"
    with CragMockServer() as kg:
        code = main(["eval", "agent-g", "--dataset", "crag", "--model", f"scripted:{agent}", "--grader-model",
                     f"scripted:{judge}", "--limit", "2", "--out", str(out), "--no-progress", "--set",
                     f"crag_api_url={kg.url}"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "accuracy 0.5000" in printed.out and "hallucination 0.5000" in printed.out
    assert "score 0.0000" in printed.out and "missing 0.0000" in printed.out
    records = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert len(records) == 2 and records[FIRST]["grade"] == ACCURATE and records[FIRST]["answer"] == "Yes"
    second = next(r for r in records.values() if r["id"] != FIRST)
    assert second["grade"] == HALLUCINATION and second["group"] == "finance"
    assert second["grader_usage"]["scripted"]["calls"] == 1 and not records[FIRST]["grader_usage"]
    assert second["details"]["judge"][0]["reply"].startswith('{"score": 0')
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dataset"] == "crag" and manifest["scorer"] == "crag"
    report = (out / "report.md").read_text()
    assert "hallucination" in report and "| finance |" in report


async def test_the_judge_reads_the_question_and_the_alternatives_in_turn():
    """CRAG's loop goes on to the next ground truth after an invalid-question mismatch; the judge's message
    carries the question."""
    from kgagents.evals.datasets import load_plugins

    load_plugins()
    judge = ScriptedChatModel(steps=[{"when": r"Question: which city\?\n Ground truth: paris\n Prediction: the capital",
                                      "content": score_json(1)}])
    scorer = make_scorer("crag-alternatives", grader_model=judge)
    assert scorer.name == "crag-alternatives" and make_scorer("crag").name == "crag"
    item = Item(id="x", question="which city?", gold="paris", meta={"alternative_answers": ["invalid question"]})
    premise = await scorer.score(item, "the question is invalid")
    assert premise.grade == ACCURATE and premise.details["rule"] == "invalid question"
    assert premise.details["ground_truth"] == "invalid question"
    judged = await scorer.score(item, "the capital")
    assert judged.grade == ACCURATE and judged.details["rule"] == "judge" and judged.details["ground_truth"] == "paris"
    assert judged.details["judge model"] == "scripted"


def test_the_judge_runs_at_temperature_zero_with_the_scorers_retries():
    """CRAG's script asks its judge at temperature 0; the scorer's retry settings reach the judge's calls."""
    from kgagents.evals.crag import AgentGPaperScorer

    for scorer in (CragScorer("scripted:x", max_api_retries=2, api_backoff_base_s=0.5),
                   AgentGPaperScorer("scripted:x", max_api_retries=2, api_backoff_base_s=0.5)):
        caller = scorer._caller()
        assert caller.role == "graph_executor" and caller.context.temperature == 0.0
        assert (caller.context.max_api_retries, caller.context.api_backoff_base_s) == (2, 0.5)
    assert (CragScorer().max_api_retries, CragScorer().api_backoff_base_s) == (6, 1.0)


def test_per_iteration_grades_of_runs_of_different_lengths():
    curves = [{"grade": MISSING, "details": {"curve": [HALLUCINATION, ACCURATE, MISSING]}},
              {"grade": ACCURATE, "details": {"curve": [ACCURATE]}},  # stopped at t = 1: holds
              {"grade": ACCURATE, "details": {}}]  # no curve: its grade at every t
    out = CragScorer().metrics(curves)
    assert (out["accuracy t=1"], out["accuracy t=2"], out["accuracy t=3"]) == (2 / 3, 1.0, 2 / 3)
    assert out["missing t=3"] == 1 / 3 and out["hallucination t=1"] == 1 / 3
