"""ARK-V1 under a flaky API: 30 % faults of every kind through the real langchain-openai client; every run ends
with an answer (or ARK-V1's abstention, ``None``), in bounded time, with its usage and failures in the state; a
stage's failed call is a failed attempt, bounded by ``C_max``."""

from __future__ import annotations

import pytest

from kgagents.graphs import ark
from kgagents.nodes.ark import ArkContext
from kgagents.tools.pgraph import graph_from_edges
from tests.ark import script as S
from tests.fakes.faults import assert_clean_ends, fault_server_fixture, fault_settings, runs_under_faults  # noqa: F401
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.slow

YUI, SABLE = "Yui Yuigahama", "Sablé"
SECOND_STEP = r"Summary of the 1 reasoning step"


async def test_ark_runs_end_cleanly_under_faults(fault_server: FakeOpenAIServer, example: dict, embedder) -> None:
    graph = graph_from_edges(example["graph"])
    pet, breed = graph.triples(YUI, "has pet")[0].key, graph.triples(SABLE, "animal breed")[0].key
    steps = [*S.anchor(SABLE, context=SECOND_STEP, times=0), *S.anchor(YUI, times=0),
             *S.relation("animal breed", context=SECOND_STEP, times=0), *S.relation("has pet", times=0),
             *S.reasoning([breed], "Sablé is a dachshund, not a corgi.", False, context=SECOND_STEP, times=0),
             *S.reasoning([pet], "Her pet is Sablé.", True, times=0), *S.final(False, times=0)]
    context = ArkContext(**fault_settings(fault_server), embedding_model=embedder)
    runs = await runs_under_faults(fault_server, ark, steps, {"question": example["question"], "kg": example["graph"]},
                                   context,
                                   seeds=(11, 12, 13))  # fault patterns that meet every kind of fault

    assert_clean_ends(runs)
    for run in runs:
        assert run.state["final_answer"] in ("False", "None") and run.state["exit_reason"]
        for attempt in run.state["attempts"]:
            assert attempt["c"] <= context.c_max
    assert any(run.state["final_answer"] == "False" for run in runs)
    failed = [a for run in runs for a in run.state["attempts"] if a["outcome"].startswith(("no reply", "unparseable"))]
    assert failed  # a failed call was a failed attempt, and the run went on
