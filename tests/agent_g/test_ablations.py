"""The paper's ablations as settings (§4.3, Tables 6 and 7, Figure 5): the validator without its context, the
oracle validator and commentor reading the gold, fewer commentor shots, the per-iteration metrics of one run,
and ReAct with its examples and step budget."""

from __future__ import annotations

import json

import pytest

from kgagents.cli import main
from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.crag import ACCURATE, HALLUCINATION, MISSING, CragScorer
from kgagents.evals.datasets import Item
from kgagents.graphs import agent_g_baselines as B
from kgagents.nodes import agent_g_oracle as O
from kgagents.nodes.agent_g import AgentGContext
from kgagents.prompts import agent_g as P
from tests.agent_g.conftest import QUESTION, comment, decide, step, validate
from tests.agent_g.test_baselines import run as run_baseline
from tests.agent_g.test_graph import BOTH, run

WRONG_FIRST = decide(1, entities=[("tuberculosis", "disease")], relations=["indication"])  # reaches Rifampin
RIGHT_SECOND = decide(2, entities=BOTH, relations=["enzyme", "indication"])  # reaches Ivermectin


@pytest.mark.slow
async def test_the_validator_without_its_context(prime):
    steps = [decide(1, entities=BOTH, relations=["enzyme", "indication"]), validate(1, "yes")]
    _, with_context, _ = await run({"question": QUESTION, "graph": prime}, steps, task="retrieval")
    _, without, _ = await run({"question": QUESTION, "graph": prime}, steps, task="retrieval",
                              validator_context=False)
    assert "Reasoning paths:\nCYP3A4 → enzyme → Ivermectin" in with_context.calls[1]
    assert "Ivermectin" in without.calls[1] and "Reasoning paths" not in without.calls[1]
    pages = [{"name": "Band", "url": "u", "text": "PJ Morton plays keyboards in Maroon 5."}]
    steps = [decide(1, source="text documents"), step(r"\[stage: generator", content="Final answer: PJ Morton"),
             validate(1, "yes")]
    _, model, _ = await run({"question": "who plays keyboards?", "pages": pages}, steps, validator_context=False)
    validator = model.calls[-1]
    assert "<prediction>PJ Morton</prediction>" in validator and "plays keyboards in Maroon 5" not in validator


@pytest.mark.slow
async def test_oracles_need_the_gold_and_nothing_else_keeps_it(prime):
    with pytest.raises(ValueError, match="the oracle ablations need the gold answer"):
        await run({"question": QUESTION, "graph": prime}, [], task="retrieval", oracle_validator=True)
    steps = [decide(1, entities=BOTH, relations=["enzyme", "indication"]), validate(1, "yes")]
    state, model, _ = await run({"question": QUESTION, "graph": prime, "oracle": {"answer_ids": ["0"]}}, steps,
                                task="retrieval")
    assert state["oracle"] is None and len(model.calls) == 2  # dropped at the start; the critic is the LLM


@pytest.mark.slow
async def test_the_oracle_critic_on_a_ranking(prime):
    """No validator or commentor call: the oracle rejects Rifampin (not an answer), names the error from the
    gold (one entity whose ego-graph misses the answer), and accepts Ivermectin."""
    steps = [WRONG_FIRST, {**RIGHT_SECOND, "when": RIGHT_SECOND["when"] + ".*The entity or relation is incorrect"}]
    state, model, _ = await run({"question": QUESTION, "graph": prime, "oracle": {"answer_ids": ["0"]}}, steps,
                                task="retrieval", oracle_validator=True, oracle_commentor=True)
    first, second = state["iterations"]
    assert first["ranked_ids"] == ["6"] and not first["accepted"] and first["error_type"] == "incorrect entity/relation"
    assert second["accepted"] and state["ranked_ids"] == ["0"] and len(model.calls) == 2  # the two actions


def test_the_oracle_commentor_rules():
    gold = {"answer_ids": ["0"]}
    assert O.retrieval_error({"module": "text"}, {}, gold) == "incorrect document"
    assert O.retrieval_error({"module": "graph"}, {"linked": {"a": "1", "b": "2"}, "ranked_ids": []}, gold) == \
        "no intersection"
    assert O.retrieval_error({"module": "graph"}, {"linked": {"a": "1", "b": "2"}, "ranked_ids": ["6"]}, gold) == \
        "incorrect intersection"
    assert O.retrieval_error({"module": "graph"}, {"linked": {"a": "1"}, "ranked_ids": ["6", "0"]}, gold) == \
        "missing entity"
    assert O.retrieval_error({"module": "graph"}, {"linked": {"a": "1"}, "ranked_ids": ["6"]}, gold) == \
        "incorrect entity/relation"
    crag = {"answer": "paris", "question_type": "simple", "static_or_dynamic": "static", "domain": "open",
            "popularity": ""}
    action = {"question_type": "simple", "dynamism": "static", "domain": "encyclopedia", "module": "graph"}
    assert O.generation_error({**action, "question_type": "multi_hop"}, crag) == "incorrect question type"
    assert O.generation_error({**action, "dynamism": "real-time"}, crag) == "incorrect question dynamism"
    assert O.generation_error({**action, "domain": "music"}, crag) == "incorrect question domain"
    assert O.generation_error(action, crag) == "incorrect retrieval module"  # a web question on the graph
    assert O.generation_error(action, {**crag, "popularity": "head"}) == "incorrect entity and relation"
    assert O.generation_error({**action, "module": "text"}, {**crag, "popularity": "tail"}) == \
        "incorrect retrieval module"
    assert O.generation_error({**action, "question_type": "multi_hop"}, {**crag, "question_type": "multi-hop"}) \
        == "incorrect retrieval module"  # CRAG's multi-hop is the agent's multi_hop


def test_the_oracle_validator_rules():
    gold = {"answer": "Paris", "alternative_answers": ["paree"]}
    assert O.answer_by_rules("paris", gold) is True and O.answer_by_rules("Paree", gold) is True
    assert O.answer_by_rules("I don't know", gold) is False and O.answer_by_rules("", gold) is False
    assert O.answer_by_rules("invalid question", gold) is False
    assert O.answer_by_rules("invalid question", {"answer": "invalid question"}) is True
    assert O.answer_by_rules("the capital", gold) is None  # the evaluator decides
    assert O.judged_accurate("Accurate.") and not O.judged_accurate("inaccurate") and not O.judged_accurate("")


@pytest.mark.slow
async def test_the_oracle_critic_on_an_answer():
    pages = [{"name": "France", "url": "u", "text": "Paris is the capital of France."}]
    oracle = {"answer": "Paris", "domain": "open", "question_type": "simple", "static_or_dynamic": "static"}
    steps = [decide(1, source="text documents", domain="music", question_type="simple", dynamism="static"),
             step(r"\[stage: generator, iteration 1\]", content="Final answer: the city of lights"),
             {"when": r"\[stage: agent-g evaluator\].*### True Answer: Paris", "content": "incorrect"},
             decide(2, source="text documents", domain="encyclopedia", question_type="simple", dynamism="static",
                    context=".*The predicted domain of the question is wrong"),
             step(r"\[stage: generator, iteration 2\]", content="Final answer: Paris")]
    state, _, _ = await run({"question": "capital of france?", "pages": pages, "oracle": oracle}, steps,
                            oracle_validator=True, oracle_commentor=True)
    first, second = state["iterations"]
    assert not first["accepted"] and first["error_type"] == "incorrect question domain"
    assert second["accepted"] and state["final_answer"] == "Paris"


@pytest.mark.slow
async def test_commentor_shots(prime):
    steps = [decide(1, entities=[BOTH[0]], relations=["enzyme"]), validate(1, "no"), comment(1, "missing entity"),
             decide(2, entities=BOTH, relations=["enzyme", "indication"]), validate(2, "yes")]
    _, model, _ = await run({"question": QUESTION, "graph": prime}, steps, task="retrieval", commentor_shots=0)
    commentor = next(c for c in model.calls if "[stage: commentor" in c)
    assert "<examples>\n(none)\n</examples>" in commentor
    _, model, _ = await run({"question": QUESTION, "graph": prime}, steps, task="retrieval", commentor_shots=1)
    commentor = next(c for c in model.calls if "[stage: commentor" in c)
    assert "optical TALU" in commentor and "Maria Ortiz" not in commentor  # the first built-in example only
    with pytest.raises(ValueError, match="commentor_shots must be at least 0"):
        AgentGContext(commentor_shots=-1)


@pytest.mark.slow
def test_per_iteration_metrics_from_one_run(stark_root, tmp_path, capsys):
    """Figure 5 from one run: Rifampin at iteration 1 (rejected), Ivermectin at 2 (accepted), T = 3."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": [
        {**WRONG_FIRST, "when": WRONG_FIRST["when"]}, validate(1, "no"), comment(1, "incorrect entity/relation"),
        RIGHT_SECOND, validate(2, "yes")]}))
    out = tmp_path / "run"
    assert main(["eval", "agent-g", "--dataset", "stark-prime", "--data", str(stark_root), "--model",
                 f"scripted:{script}", "--out", str(out), "--no-progress", "--no-report", "--max-iterations", "3",
                 "--set", "iteration_metrics=true"]) == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["hit@1 t=1"], summary["hit@1 t=2"], summary["hit@1 t=3"]) == (0.0, 1.0, 1.0)
    assert summary["hit@1"] == 1.0 and "hit@1 t=4" not in summary


async def test_crag_grades_each_iterations_answer_once():
    judge = ScriptedChatModel(steps=[{"when": r"Prediction: lyon", "content": '{"score": 0}', "times": 0}])
    scorer = CragScorer(judge)
    item = Item(id="x", question="capital?", gold="paris")
    score = await scorer.score_run(item, "paris", {"curve": ["lyon", "paris", "paris"]})
    assert score.grade == ACCURATE and score.details["curve"] == [HALLUCINATION, ACCURATE, ACCURATE]
    assert len(judge.calls) == 1  # "lyon" once; "paris" by exact match
    metrics = scorer.metrics([{"grade": score.grade, "details": score.details}])
    assert (metrics["accuracy t=1"], metrics["accuracy t=2"], metrics["score t=3"]) == (0.0, 1.0, 1.0)
    records = [{"grade": score.grade, "details": score.details},
               {"grade": HALLUCINATION, "details": {"curve": [HALLUCINATION], "judge model": "other"}},
               {"grade": MISSING, "details": {}}, {"error": "boom"}]  # no curve: its grade (or missing) holds
    metrics = scorer.metrics(records)
    assert (metrics["accuracy t=1"], metrics["hallucination t=1"], metrics["missing t=1"]) == (0.0, 0.5, 0.5)
    assert (metrics["accuracy t=3"], metrics["hallucination t=3"]) == (0.25, 0.25) and "accuracy t=4" not in metrics
    assert metrics["judge model"] == "other, scripted" and "accuracy t=1" not in scorer.metrics([])


@pytest.mark.slow
async def test_react_with_examples_and_four_steps():
    pages = [{"name": "Band", "url": "u", "text": "PJ Morton plays keyboards in Maroon 5."}]
    steps = [step(r"\[stage: react", times=0, structured={"thought": "read", "action": "search_web"}),
             step(r"\[stage: generator", content="Final answer: PJ Morton")]
    state, model, nodes = await run_baseline(B.react, {"question": "who plays keyboards?", "pages": pages}, steps)
    assert nodes.count("react_step") == 4 and state["final_answer"] == "PJ Morton"
    assert P.REACT_EXAMPLES.splitlines()[0] in model.calls[0]


def test_the_papers_presets_are_valid_settings():
    from kgagents.graphs.agent_g import PRESETS
    from kgagents.graphs.workflows import preset

    for name, values in PRESETS.items():
        ctx = AgentGContext(**values)
        assert ctx.max_iterations == 5 and ctx.radius == 2, name
    assert PRESETS["paper-stark-oracle"]["oracle_validator"] and PRESETS["paper-crag-0-shot"]["commentor_shots"] == 0
    assert preset("agent-g-text-rag", "paper-stark")["embedding_model"] == "openai:text-embedding-ada-002"
    with pytest.raises(ValueError, match="no preset 'paper-stark-oracle'"):
        preset("agent-g-react", "paper-stark-oracle")  # the ablations are Agent-G's
