"""Fusion under a flaky API: 30 % faults of every kind through the real langchain-openai client; every run ends
with an answer or "No solution found", in bounded time, with the variants' usage and failures in the state."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgagents.graphs import fusion
from kgagents.nodes.kgot import NO_SOLUTION, KGoTContext
from tests import kgot_script as S
from tests.fakes.faults import assert_clean_ends, fault_server_fixture, fault_settings, runs_under_faults  # noqa: F401
from tests.fakes.openai_server import FakeOpenAIServer
from tests.kg.helpers import QUESTION
from tests.kg.test_fusion import fusion_steps

pytestmark = pytest.mark.slow

VARIANTS = ["networkx:direct", "networkx:query"]
#: The fusion tests' script, and a forced solution for a variant that reaches its iteration limit.
STEPS = [*fusion_steps(), S.step(S.FORCED, times=0, structured={"solution": "the total is 65"})]


async def test_fusion_runs_end_cleanly_under_faults(fault_server: FakeOpenAIServer, tmp_path: Path) -> None:
    context = KGoTContext(**fault_settings(fault_server, tools=True),
                          work_dir=str(tmp_path / "work"), max_iterations=3,
                          num_next_steps_decision=3, max_final_solution_parsing=2, recursion_limit=300)
    runs = await runs_under_faults(fault_server, fusion, STEPS, {"question": QUESTION, "variants": VARIANTS},
                                   context)

    assert_clean_ends(runs)
    for run in runs:
        state = run.state
        assert state["final_answer"] in ("65", NO_SOLUTION)
        assert sorted(r["variant"] for r in state["results"]) == VARIANTS
        for failure in state.get("failures") or []:  # a variant's failures are the fusion run's, by variant
            assert failure["node"].split(" › ")[0] in VARIANTS + ["combine_answers"], failure
    assert any(run.state["final_answer"] == "65" for run in runs)
