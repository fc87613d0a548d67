"""Agent-G under a flaky API: 30 % faults of every kind through the real langchain-openai client; every run ends
with an answer or "I don't know", in bounded time, with its usage and failures in the state (a failed agent call
falls back to the text module, a failed generator says "I don't know", a failed validator call rejects)."""

from __future__ import annotations

import pytest

from kgagents.graphs import agent_g
from kgagents.nodes.agent_g import AgentGContext
from tests.agent_g.conftest import comment, decide, step, validate
from tests.fakes.faults import assert_clean_ends, fault_server_fixture, fault_settings, runs_under_faults  # noqa: F401
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.slow

#: The first answer is rejected (feedback, a second iteration), later ones are accepted.
STEPS = [decide("\\d", entities=[("Ivermectin", "drug")], relations=["indication"], domain="encyclopedia", times=0),
         step(r"\[stage: generator", times=0, content="Ivermectin treats it.\nFinal answer: strongyloidiasis"),
         validate(1, "no", times=0), validate("\\d", "yes", times=0),
         comment("\\d", "incorrect entity and relation", times=0)]


async def test_agent_g_runs_end_cleanly_under_faults(fault_server: FakeOpenAIServer, prime: str) -> None:
    context = AgentGContext(**fault_settings(fault_server), task="generation", max_iterations=3)
    runs = await runs_under_faults(fault_server, agent_g, STEPS,
                                   {"question": "What does Ivermectin treat?", "graph": prime}, context,
                                   seeds=(4, 5, 6))  # fault patterns that meet every kind of fault

    assert_clean_ends(runs)
    for run in runs:
        # the scripted answer, "I don't know", or -- when a fault garbled the generator's reply -- that reply
        assert run.state["final_answer"].strip() and run.state["exit_reason"]
        assert 1 <= len(run.state["iterations"]) <= context.max_iterations
    assert any(run.state["final_answer"] == "strongyloidiasis" for run in runs)
