"""Grounded ToT × agent under a flaky API: 30 % faults of every kind through the real langchain-openai client;
every run ends with an answer or "No solution found", in bounded time, with its usage and failures in the state;
a candidate whose call failed is recorded as failed and the search goes on."""

from __future__ import annotations

import pytest

from kgagents.graphs import grounded
from kgagents.nodes.grounded import GroundedContext
from kgagents.nodes.state import NO_SOLUTION
from tests.fakes.faults import assert_clean_ends, fault_server_fixture, fault_settings, runs_under_faults  # noqa: F401
from tests.fakes.openai_server import FakeOpenAIServer
from tests.grounded.conftest import step

pytestmark = pytest.mark.slow

ANSWER = "Ann Lee, Bo Chen"
STEPS = [
    step(r"\[stage: agent thought, step 1, candidate 1 ", times=0, content="Find the paper."),
    step(r"\[stage: agent thought, step 1, candidate [23] ", times=0, content="Look at the venue."),
    step(r"\[stage: agent action, step 1\b.*Thought 1: Find the paper", times=0,
         tool_calls=[{"name": "RetrieveNode", "args": {"keyword": "Deep Graphs"}}]),
    step(r"\[stage: agent action, step 1\b", times=0,
         tool_calls=[{"name": "RetrieveNode", "args": {"keyword": "KDD"}}]),
    step(r"\[stage: selection vote, depth 1\]", times=0, structured={"analysis": "choice 1 found the paper",
                                                                    "best": [1, 3]}),
    step(r"\[stage: agent thought, step [23]\b", times=0, content="Now finish."),
    step(r"\[stage: agent action, step [23]\b.*retrieval target node is p1", times=0,
         tool_calls=[{"name": "Finish", "args": {"answer": ANSWER}}]),
    step(r"\[stage: agent action, step [23]\b", times=0, tool_calls=[{"name": "Finish", "args": {"answer": "KDD"}}]),
    step(r"\[stage: selection vote, depth [23]\]", times=0, structured={"analysis": "the paper chain", "best": [1]}),
    step(r"\[stage: final answer\]", times=0, structured={"answer": ANSWER}),
]


async def test_grounded_tot_agent_runs_end_cleanly_under_faults(fault_server: FakeOpenAIServer, academic: str) -> None:
    context = GroundedContext(**fault_settings(fault_server), strategy="tot", interaction="agent", branching=3,
                              keep=2, max_depth=3)
    runs = await runs_under_faults(fault_server, grounded, STEPS, {"question": "Who are the authors of the paper "
                                                                   "Deep Graphs?", "graph": academic}, context)

    assert_clean_ends(runs)
    for run in runs:
        assert run.state["final_answer"] in (ANSWER, "KDD", NO_SOLUTION) and run.state["exit_reason"]
        for thought in run.state["thoughts"].values():
            assert not (thought.get("error") and thought.get("kept")), thought  # a failed candidate is never kept
    assert any(run.state["final_answer"] == ANSWER for run in runs)
