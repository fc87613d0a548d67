"""Running a workflow through the real ``langchain-openai`` client against the fault server.

:func:`runs_under_faults` runs a compiled workflow once per seed, each run against a fresh :class:`FaultPolicy`
(30 % faults of every kind, otherwise the replies of a scripted responder), each within :data:`RUN_LIMIT_S`;
:func:`assert_clean_ends` checks what every workflow promises under faults: each run ends with an answer (or
its explicit no-answer), in bounded time, with usage recorded and every failure logged with what was done
instead, and the faults met were of every kind.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.graphs.io import final_state
from tests.fakes import isolate_model_env
from tests.fakes.openai_server import FAULT_KINDS, FakeOpenAIServer, FaultPolicy, script_responder

#: Seeds of the runs of one workflow.
SEEDS = (1, 2, 3)
#: A hang guard for one run, not a measurement (a stall costs one ``llm_timeout_s``; the backoff is milliseconds).
RUN_LIMIT_S = 180.0
#: The share of requests answered with a fault.
FAULT_RATE = 0.3
MODEL = "gpt-4o-mini"


def fault_settings(server: FakeOpenAIServer, *, tools: bool = False) -> dict[str, Any]:
    """Context values for runs against ``server``: the real OpenAI client (dummy key), short timeouts and
    backoff, and one API retry and one parse re-ask, so some calls fail for good and the workflow degrades
    (``tools``: the tools' short backoff too, for the workflows with KGoT's context)."""
    settings = {"model": f"openai:{MODEL}", "base_url": server.base_url, "llm_timeout_s": 0.5,
                "max_api_retries": 1, "max_parse_retries": 1, "api_backoff_base_s": 0.001,
                "api_backoff_max_s": 0.01}
    return {**settings, "tool_backoff_base_s": 0.001, "tool_backoff_max_s": 0.01} if tools else settings


@dataclass
class FaultRun:
    seed: int
    state: dict[str, Any]
    seconds: float
    injected: Counter[str]


async def runs_under_faults(server: FakeOpenAIServer, graph_module: Any, steps: list[dict[str, Any]],
                            task: dict[str, Any], context: Any, *, seeds: tuple[int, ...] = SEEDS) -> list[FaultRun]:
    """One run of ``graph_module``'s compiled graph per seed on ``task``, the server answering with faults or
    from the script ``steps``; a run that passes :data:`RUN_LIMIT_S` fails the test."""
    runs = []
    for seed in seeds:
        policy = FaultPolicy(script_responder(steps), rate=FAULT_RATE, seed=seed)
        server.answer_with(policy)
        graph = graph_module.compile_graph(InMemorySaver())
        config = {"configurable": {"thread_id": f"faults-{seed}"},
                  "recursion_limit": getattr(context, "recursion_limit", 200)}
        start = time.monotonic()
        state = await asyncio.wait_for(final_state(graph, task, config, context=context), RUN_LIMIT_S)
        runs.append(FaultRun(seed, dict(state), time.monotonic() - start, Counter(policy.injected)))
    return runs


def assert_clean_ends(runs: list[FaultRun]) -> None:
    """Every run answered in bounded time with its usage recorded; failures were met, logged, and degraded
    around; every kind of fault was injected."""
    for run in runs:
        state = run.state
        assert isinstance(state.get("final_answer"), str) and state["final_answer"].strip(), run
        usage = state["usage"][MODEL]
        assert usage["calls"] > 0 and usage["input_tokens"] > 0 and usage["cost_usd"] > 0
        for failure in state.get("failures") or []:
            assert failure["error"] and failure["outcome"] and failure["node"], failure
    assert any(run.state.get("failures") for run in runs), "no model call failed for good: nothing degraded"
    injected = sum((run.injected for run in runs), Counter())
    assert set(FAULT_KINDS) <= set(injected), injected
    # the share of faulty requests is FAULT_RATE's, within two standard errors of a binomial draw of this size
    total = sum(injected.values())
    share = sum(injected[k] for k in FAULT_KINDS) / total
    assert abs(share - FAULT_RATE) <= 2 * math.sqrt(FAULT_RATE * (1 - FAULT_RATE) / total), injected


@pytest.fixture(name="fault_server")
def fault_server_fixture(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeOpenAIServer]:
    """``fault_server``: a running fault server, the user's model configuration hidden from the test (import
    this function into a test module to use the fixture)."""
    isolate_model_env(monkeypatch, tmp_path)
    with FakeOpenAIServer() as server:
        yield server
