"""GRBench's scorer on its own (fast, no workflow run): GPT4Score with a scripted judge (verdicts, retries, failures
left not judged), the metrics over result records (judged only, per error type, per difficulty), the trace that
§7's taxonomy reads, and the judge's prompt and reply parsing. Written to kill the mutants of a mutation test
(docs/grounded.md gives its score)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.grbench import (
    GPT4SCORE_PROMPT,
    GRBenchScorer,
    answer_in_trace,
    error_type,
    given_answer,
    gpt4score_prompt,
    parse_judgement,
    trace_text,
    trace_values,
)


def _item(gold: str = "Ann Lee", difficulty: str | None = "easy") -> SimpleNamespace:
    return SimpleNamespace(question="Who wrote Deep Graphs?", gold=gold, meta={"difficulty": difficulty})


def _judge(*replies: dict) -> ScriptedChatModel:
    return ScriptedChatModel(steps=[{"when": "Please help me judge", "times": 1, **r} for r in replies])


async def test_a_judged_answer():
    judge = _judge({"content": "Yes."})
    score = await GRBenchScorer(judge).score_run(_item(), "Ann Lee", {"exit_reason": "finished"})
    assert score.correct is True and score.grade == "YES"
    assert score.details == {"rouge_l": 1.0, "gpt4score": 1, "error_type": None, "exit_reason": "finished",
                             "difficulty": "easy", "judge": "ScriptedChatModel"}
    assert score.usage and judge.calls[0].startswith("You are a generative language model evaluator.")
    no = await GRBenchScorer(_judge({"content": "No"})).score_run(_item(), "Bo Chen", {"exit_reason": "finished"})
    assert no.correct is False and no.grade == "NO" and no.details["error_type"] == "wrong reasoning step"
    assert no.details["gpt4score"] == 0 and no.details["rouge_l"] == 0.0


async def test_the_judge_s_api_is_retried_as_asked_then_the_answer_is_not_judged():
    flaky = ({"raise": "overloaded", "status": 503}, {"content": "Yes"})
    retried = GRBenchScorer(_judge(*flaky), max_api_retries=1, api_backoff_base_s=0.001)
    assert (await retried.score_run(_item(), "Ann Lee", {})).grade == "YES"
    failed = GRBenchScorer(_judge(*flaky), max_api_retries=0, api_backoff_base_s=0.001)
    score = await failed.score_run(_item(), "Ann Lee", {})
    assert score.correct is None and score.grade == "NOT_JUDGED" and score.details["gpt4score"] is None
    assert "overloaded" in score.details["judge_error"] and score.details["rouge_l"] == 1.0
    # not judged: the error type falls back on Rouge-L (>= 0.5 counts as right)
    wrong = await GRBenchScorer(_judge({"raise": "down", "status": 400}), max_api_retries=0).score_run(
        _item(), "Bo Chen", {"exit_reason": "reached the step limit"})
    assert wrong.details["error_type"] == "reached the step limit"


async def test_without_a_judge():
    for name in ("none", " None "):
        scorer = GRBenchScorer(name)
        assert scorer.model is None
        score = await scorer.score(_item(gold="Ann Lee, Bo Chen"), "Ann Lee")
        assert score.correct is None and score.grade is None and "judge" not in score.details
        assert score.details["rouge_l"] == pytest.approx(2 / 3, abs=1e-6)
    assert GRBenchScorer("openai:gpt-4o").model == "openai:gpt-4o" and GRBenchScorer().model is None
    judge = object()
    assert GRBenchScorer(judge).model is judge


def _record(rouge, judged, error_type=None, difficulty=None, **extra):
    details = {"rouge_l": rouge, "gpt4score": judged, "error_type": error_type, "difficulty": difficulty}
    return {"details": {k: v for k, v in details.items() if v is not None}, **extra}


def test_the_metrics_count_only_judged_answers_and_break_down_by_difficulty():
    records = [
        _record(1.0, 1, difficulty="easy"),
        _record(0.5, 0, "answer found but not returned", "easy"),
        {"details": {"rouge_l": None, "gpt4score": None, "judge_error": "down", "error_type": "reached the step limit",
                     "difficulty": "medium"}},
        _record(0.25, None, "wrong reasoning step", error="boom"),
    ]
    assert GRBenchScorer().metrics(records) == {
        # the failed run counts as its empty answer judged "No" (Graph-CoT's code): 1 of 3, not 1 of 2
        "n": 4, "rouge_l": 43.75, "gpt4score": 100 * (1 / 3), "not judged": 1,
        "answer found but not returned": 1, "reached the step limit": 1, "wrong reasoning step": 1,
        "failed runs": 1, "easy: n": 2, "easy: rouge_l": 75.0, "easy: gpt4score": 50.0,
        "medium: n": 1, "medium: rouge_l": 0.0, "medium: gpt4score": None}
    assert GRBenchScorer().metrics([]) == {
        "n": 0, "rouge_l": 0.0, "gpt4score": None, "not judged": 0, "answer found but not returned": 0,
        "reached the step limit": 0, "wrong reasoning step": 0, "failed runs": 0}
    judged = GRBenchScorer().metrics([_record(0.0, 1), _record(0.0, 1), _record(0.0, 0), _record(0.0, 1)])
    assert judged["gpt4score"] == 75.0 and judged["not judged"] == 0


STATE = {"context": "KDD: a venue", "thoughts": {
    "t0.1": {"observation": "None of the entities was found in the graph: Zed Quill",
             "actions": [{"observation": "The name feature of a1 is: Ann Lee."}],
             "triples": [["2019", "year of", "Deep Graphs"], ["Deep Graphs", "author", "Bo Chen"]],
             "attributes": ["Deep Graphs — year: 2020"]}}}


def test_the_trace_holds_every_kind_of_grounding():
    text = trace_text(STATE)
    assert text.splitlines() == ["KDD: a venue", "None of the entities was found in the graph: Zed Quill",
                                 "The name feature of a1 is: Ann Lee.", "2019 year of Deep Graphs",
                                 "Deep Graphs author Bo Chen", "Deep Graphs — year: 2020"]
    assert trace_text({}) == ""
    values = trace_values(STATE)
    assert {"Ann Lee", "2020", "2019", "Bo Chen", "Deep Graphs", "a venue"} <= set(values)
    assert "year of" not in values and "author" not in values


@pytest.mark.parametrize("gold, kind", [
    ("Zed Quill", "answer found but not returned"),  # named in an exploration note
    ("Bo Chen", "answer found but not returned"),  # a triple's end only
    ("2019", "answer found but not returned"),  # a number as a triple's head
    ("Ann Lee, Bo Chen", "answer found but not returned"),  # parts found apart
    ("Lee Ann", "wrong reasoning step"), ("Bo Chen, Cy Dee", "wrong reasoning step"),
    ("2021", "wrong reasoning step"), ("true", "wrong reasoning step"),
])
def test_the_taxonomy_reads_the_trace(gold, kind):
    assert error_type(False, gold, STATE) == kind
    assert error_type(True, gold, STATE) is None


def test_text_answers_are_found_by_their_words_in_order():
    assert answer_in_trace("Ann Lee", "x ann lee y") and not answer_in_trace("Ann Lee", "Lee Ann")
    assert answer_in_trace("Ann Lee, Bo Chen", "Bo Chen then Ann Lee")
    assert not answer_in_trace(",", "anything") and not answer_in_trace("", "anything")


def test_the_judge_s_prompt_and_reply():
    prompt = gpt4score_prompt("Who?", "Ann", "Ann Lee")
    template = GPT4SCORE_PROMPT.read_text(encoding="utf-8")
    assert prompt == template.rstrip("\n").format(question="Who?", prediction="Ann", truth="Ann Lee")
    assert not prompt.endswith("\n") and "Ground truth: Ann Lee." in prompt
    for reply in ("Yes", " yes. ", "'Yes'", "Yes!", '"YES"'):
        assert parse_judgement(reply), reply
    for reply in ("No", "Yes X", "Yes, it is", "X", "", "Yess"):
        assert not parse_judgement(reply), reply


def test_the_answer_scored_is_the_answer_given():
    assert given_answer({"answer": "", "final_answer": "No solution found"}) == ""
    assert given_answer({"final_answer": "KDD"}) == "KDD" and given_answer({}) is None


async def test_what_the_judge_is_asked_and_how(monkeypatch, tmp_path):
    import json

    from kgagents.nodes import llm as llm_module

    contexts = []
    original = llm_module.LLMCaller.__init__

    def recording(self, context, role, **kw):
        contexts.append(context)
        original(self, context, role, **kw)

    monkeypatch.setattr(llm_module.LLMCaller, "__init__", recording)
    judge = _judge({"content": "Yes"})
    await GRBenchScorer(judge, max_api_retries=2, api_backoff_base_s=0.25).score_run(_item(), None, {})
    assert "Question:Who wrote Deep Graphs? \nModel prediction:  \nGround truth: Ann Lee. \n" in judge.calls[0]
    ctx = contexts[-1]
    assert (ctx.temperature, ctx.max_api_retries, ctx.api_backoff_base_s) == (0.0, 2, 0.25)
    assert GRBenchScorer().max_api_retries == 6 and GRBenchScorer().api_backoff_base_s == 1.0
    script = tmp_path / "judge.json"
    script.write_text(json.dumps({"steps": [{"when": "Please help me judge", "times": 0, "content": "No"}]}))
    named = await GRBenchScorer(f"scripted:{script}").score_run(_item(), "Ann Lee", {})
    assert named.details["judge"] == f"scripted:{script}" and named.grade == "NO"


async def test_the_judge_s_verdict_decides_the_error_type_else_rouge_l():
    state = {"exit_reason": "finished",
             "thoughts": {"t": {"actions": [{"observation": "The name of a1 is: Ann Lee."}]}}}
    refused = await GRBenchScorer(_judge({"content": "No"})).score_run(_item(), "Ann Lee", state)
    assert refused.details["rouge_l"] == 1.0 and refused.details["error_type"] == "answer found but not returned"
    failing = GRBenchScorer(_judge({"raise": "down", "status": 400}, {"raise": "down", "status": 400}),
                            max_api_retries=0)
    exact = await failing.score_run(_item(), "Ann Lee", state)
    assert exact.details["error_type"] is None  # not judged: Rouge-L 1.0 counts as right
    half = await failing.score_run(_item(gold="Ann Lee Smith"), "Ann", state)
    assert half.details["rouge_l"] == 0.5 and half.details["error_type"] is None  # 0.5 counts as right
    assert (await GRBenchScorer().score_run(_item(gold="Ann Lee, Bo Chen"), "Ann Lee", {})).details["rouge_l"] \
        == 0.666667


async def test_a_judge_error_is_kept_short_and_on_one_line():
    long = "x " * 400
    score = await GRBenchScorer(_judge({"raise": long, "status": 400}), max_api_retries=0).score_run(
        _item(), "Ann", {})
    error = score.details["judge_error"]
    assert error.startswith("LLMError: graph_executor model call failed after 1 attempt(s): ")
    assert len(error) == len("LLMError: ") + 300 and "\n" not in error and "  " not in error


async def test_an_item_without_meta_has_no_difficulty():
    item = SimpleNamespace(question="Q?", gold="A")
    assert (await GRBenchScorer().score_run(item, "A", {})).details["difficulty"] is None
