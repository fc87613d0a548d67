"""The search's decisions: which state the answer comes from, what a failed depth leaves, when the evaluator is
consulted, how ties are shared, and which limits are accepted. Each test drives the real graph and store with a
scripted model (or calls the decision function directly) and fails on the behaviour it guards against."""

from __future__ import annotations

import pytest

from kgagents.nodes.grounded import GroundedContext, best_state, rank_by_scores
from tests.grounded.conftest import step, thought
from tests.grounded.test_graph import run

GOLD = "Ann Lee, Bo Chen"


def _finish(answer: str) -> list[dict]:
    return [{"name": "Finish", "args": {"answer": answer}}]


def _retrieve(keyword: str) -> list[dict]:
    return [{"name": "RetrieveNode", "args": {"keyword": keyword}}]


# --------------------------------------------------------------------------------------------------------------
# 1. The answer comes from the state that ended the search
# --------------------------------------------------------------------------------------------------------------
async def test_the_answer_is_the_state_that_ended_the_search_not_the_earliest_final(academic):
    """ToT-select, k = t = 2: a depth-1 candidate guesses "KDD" at once; the vote ranks the other candidate first,
    whose child (ranked first at depth 2) finishes with the gold answer and ends the search."""
    steps = [
        step(r"\[stage: agent thought, step 1, candidate 1 ", content="Find the paper."),
        step(r"\[stage: agent thought, step 1, candidate 2 ", content="Guess."),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Find the paper", times=0,
             tool_calls=_retrieve("Deep Graphs")),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Guess", times=0, tool_calls=_finish("KDD")),
        step(r"\[stage: selection vote, depth 1\]", times=0,
             structured={"analysis": "1 found the paper", "best": [1, 2]}),
        step(r"\[stage: agent thought, step 2, candidate 1 ", content="Finish with its authors."),
        step(r"\[stage: agent thought, step 2, candidate 2 ", content="Look elsewhere."),
        step(r"\[stage: agent action, step 2\b.*Thought 2: Finish with", times=0, tool_calls=_finish(GOLD)),
        step(r"\[stage: agent action, step 2\b.*Thought 2: Look elsewhere", times=0, tool_calls=_retrieve("KDD")),
        step(r"\[stage: selection vote, depth 2\]", times=0, structured={"analysis": "1 answers", "best": [1, 2]}),
    ]
    state, _, _ = await run(academic, steps, strategy="tot", branching=2, keep=2)
    assert "t0.2" in state["finals"] and "t0.1.1" in state["finals"]
    assert state["best"] == "t0.1.1" and state["final_answer"] == GOLD and state["exit_reason"] == "finished"


def _selection(depth: int, kept: list[str]) -> dict:
    return {"depth": depth, "evaluator": "score", "candidates": kept, "kept": kept, "reason": ""}


def test_scores_of_different_depths_are_never_one_cohort():
    """A depth-1 final kept second (0.9, 3 votes of its cohort) against the depth-2 final ranked first (0.6, 1 vote):
    the depth-2 final ended the search, so it gives the answer."""
    thoughts = {
        "t0": {"id": "t0", "depth": 0, "kind": "root"},
        "t0.1": {"id": "t0.1", "depth": 1, "finished": False, "score": 0.95, "votes": 3},
        "t0.2": {"id": "t0.2", "depth": 1, "finished": True, "answer": "KDD", "score": 0.9, "votes": 3},
        "t0.1.1": {"id": "t0.1.1", "depth": 2, "finished": True, "answer": GOLD, "score": 0.6, "votes": 1},
        "t0.1.2": {"id": "t0.1.2", "depth": 2, "finished": False, "score": 0.5, "votes": 0},
    }
    state = {"thoughts": thoughts, "finals": ["t0.2", "t0.1.1"], "frontier": ["t0.1.1", "t0.1.2"], "depth": 2,
             "selections": [_selection(1, ["t0.1", "t0.2"]), _selection(2, ["t0.1.1", "t0.1.2"])]}
    assert best_state(state)[0] == "t0.1.1"
    # at the depth limit with no final at the last depth: the best-ranked final of the last depth that had finals
    state3 = {**state, "finals": ["t0.2"], "frontier": ["t0.1.2", "t0.1.1"],
              "selections": [_selection(1, ["t0.1", "t0.2"]), _selection(2, ["t0.1.2", "t0.1.1"])]}
    thoughts3 = {**thoughts, "t0.1.1": {**thoughts["t0.1.1"], "finished": False}}
    assert best_state({**state3, "thoughts": thoughts3})[0] == "t0.2"


# --------------------------------------------------------------------------------------------------------------
# 2. A failed depth keeps the chain
# --------------------------------------------------------------------------------------------------------------
async def test_a_depth_whose_every_candidate_failed_answers_from_the_last_depth_that_survived(academic):
    steps = [
        thought(1, "I need the paper node first."),
        step(r"\[stage: agent action, step 1\b", tool_calls=_retrieve("Deep Graphs")),
        thought(2, "Its authors."),
        {"when": r"\[stage: agent action, step 2\b", "raise": "bad request", "status": 400, "times": 0},
        step(r"\[stage: final answer\]", structured={"answer": "p1's authors"}),
    ]
    state, model, _ = await run(academic, steps, max_steps=4, max_api_retries=0)
    assert state["thoughts"]["t0.1.1"]["error"]
    assert state["best"] == "t0.1" and "failed" in state["exit_reason"] and "depth 2" in state["exit_reason"]
    final_prompt = model.calls[-1]
    assert "[stage: final answer]" in final_prompt
    assert "Observation 1: The ID of this retrieval target node is p1." in final_prompt
    assert state["final_answer"] == "p1's authors"


# --------------------------------------------------------------------------------------------------------------
# 3. Candidates within t are evaluated before a Finish ends the run; vote ties are shared
# --------------------------------------------------------------------------------------------------------------
async def test_a_finish_among_no_more_than_t_candidates_waits_for_the_evaluator(academic):
    """k = t = 3: candidate 1 calls Finish at depth 1; the vote ranks candidate 2 first, so the search goes on."""
    steps = [
        step(r"\[stage: agent thought, step 1, candidate 1 ", content="Guess."),
        step(r"\[stage: agent thought, step 1, candidate [23] ", times=2, content="Find the paper."),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Guess", times=0, tool_calls=_finish("KDD")),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Find", times=0, tool_calls=_retrieve("Deep Graphs")),
        step(r"\[stage: selection vote, depth 1\]", structured={"analysis": "2 found the paper", "best": [2, 3, 1]}),
        step(r"\[stage: agent thought, step 2\b", times=0, content="Finish with its authors."),
        step(r"\[stage: agent action, step 2\b", times=0, tool_calls=_finish(GOLD)),
        step(r"\[stage: selection vote, depth 2\]", times=0, structured={"analysis": "all agree", "best": [1, 2, 3]}),
    ]
    state, model, _ = await run(academic, steps, strategy="tot", branching=3, keep=3)
    assert any("[stage: selection vote, depth 1]" in c for c in model.calls)
    assert state["selections"][0]["kept"][0] == "t0.2"
    assert state["final_answer"] == GOLD and state["best"].startswith("t0.2.")


def test_tied_score_votes_are_shared():
    ranked = rank_by_scores(["a", "b", "c"], {"a": [0.5, 0.2], "b": [0.5, 0.9], "c": [0.1, 0.9]})
    assert ranked == [("b", 2, 0.7), ("c", 1, 0.5), ("a", 1, 0.35)]


# --------------------------------------------------------------------------------------------------------------
# 4. Limits are validated
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field, value", [
    ("max_depth", 0), ("max_depth", -2), ("max_steps", 0), ("branching", -1), ("keep", 0), ("score_samples", 0),
    ("search_depth", 0), ("max_relations", 0), ("max_neighbours", -1), ("neighbours_shown", 0), ("max_actions", 0),
    ("observation_chars", 0), ("retrieve_k", 0), ("recursion_limit", 0), ("candidate_temperature", -0.5),
])
def test_limits_of_zero_or_below_are_a_clear_error(field, value):
    with pytest.raises(ValueError, match=field):
        GroundedContext(**{field: value})


def test_a_served_run_with_a_bad_limit_fails_at_the_start():
    with pytest.raises(ValueError, match="max_depth must be at least 1"):
        GroundedContext.from_mapping({"max_depth": 0})
