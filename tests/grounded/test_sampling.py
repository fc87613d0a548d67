"""ToT / GoT candidates as a real API sees them: a seeded run asks for k different samples per state, and a run
recorded against a server whose candidates answer at unequal speeds replays with no divergence and the same
answer (the fake OpenAI server through the real langchain-openai client)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core import replay as replay_module
from kgagents.core.replay import Recording, using
from kgagents.graphs.grounded import compile_graph
from kgagents.graphs.io import final_state
from kgagents.nodes.grounded import GroundedContext
from kgagents.nodes.models import derived_seed
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, Step, script_responder
from tests.grounded.conftest import step

GOLD = "Ann Lee, Bo Chen"
QUESTION = "Who are the authors of the paper Deep Graphs?"


def _calls(*calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"name": name, "args": args} for name, args in calls]


#: Candidate j's thought says "Plan j" (a server sampling k times); each plan's action differs, so a reply
#: served to the wrong candidate changes every later request.
SCRIPT = [
    *(step(rf"\[stage: agent thought, step 1, candidate {j} ", times=0, content=f"Plan {j}.") for j in (1, 2, 3)),
    step(r"\[stage: agent action, step 1\b.*Thought 1: Plan 1", times=0,
         tool_calls=_calls(("RetrieveNode", {"keyword": "Deep Graphs"}))),
    step(r"\[stage: agent action, step 1\b.*Thought 1: Plan 2", times=0,
         tool_calls=_calls(("RetrieveNode", {"keyword": "KDD"}))),
    step(r"\[stage: agent action, step 1\b.*Thought 1: Plan 3", times=0,
         tool_calls=_calls(("RetrieveNode", {"keyword": "Ann Lee"}))),
    step(r"\[stage: merge thoughts, depth 1\]", times=0, content="Next Thought: combine both."),
    step(r"\[stage: agent action, step \d+, candidate merge of t0\.\d \+ t0\.\d\]", times=0,
         tool_calls=_calls(("RetrieveNode", {"keyword": "Bo Chen"}))),
    step(r"\[stage: agent action, step \d+, candidate merge\b", times=0,
         tool_calls=_calls(("Finish", {"answer": "Bo Chen"}))),
    step(r"\[stage: selection vote, depth 1\]", times=0, structured={"analysis": "1 found it", "best": [1, 2]}),
    *(step(rf"\[stage: agent thought, step 2, candidate {j} ", times=0, content=f"Step {j}.") for j in (1, 2, 3)),
    step(r"\[stage: agent action, step 2\b.*Thought 1: Plan 1.*Thought 2: Step 1", times=0,
         tool_calls=_calls(("Finish", {"answer": GOLD}))),
    step(r"\[stage: agent action, step 2\b.*Thought 2: Step 2", times=0,
         tool_calls=_calls(("Finish", {"answer": "KDD"}))),
    step(r"\[stage: agent action, step 2\b", times=0, tool_calls=_calls(("NodeDegree", {"node_id": "p1",
                                                                                       "neighbor_type": "author"}))),
    step(r"\[stage: merge thoughts, depth 2\]", times=0, content="Next Thought: combine again."),
    step(r"\[stage: selection vote, depth 2\]", times=0, structured={"analysis": "1 answers", "best": [1, 2]}),
    step(r"\[stage: final answer\]", times=0, structured={"answer": GOLD}),
]


class SlowFirstCandidates:
    """Answers from :data:`SCRIPT`; candidate j of a state answers after (4 - j) × 80 ms, so candidates finish in
    the reverse of the order they were asked (as a real API's latencies may have it)."""

    def __init__(self) -> None:
        self.responder = script_responder(SCRIPT)

    def step_for(self, request: RecordedRequest) -> Step:
        stage = request.headers.get("x-kgagents-stage", "")
        found = re.search(r"candidate (\d+) of", stage)
        if found:
            time.sleep((4 - int(found.group(1))) * 0.08)
        return self.responder(request)


def _context(server: FakeOpenAIServer, **values: Any) -> GroundedContext:
    settings = {"strategy": "tot", "branching": 3, "keep": 2, "max_depth": 2, **values}
    return GroundedContext(model="openai:gpt-4o-mini", base_url=server.base_url, api_backoff_base_s=0.001,
                           **settings)


async def _run(context: GroundedContext, academic: str, thread: str) -> dict[str, Any]:
    graph = compile_graph(InMemorySaver())
    config = {"configurable": {"thread_id": thread}, "recursion_limit": context.recursion_limit}
    return dict(await final_state(graph, {"question": QUESTION, "graph": academic}, config, context=context))


def _thought_requests(server: FakeOpenAIServer, step_no: int) -> list[RecordedRequest]:
    return [r for r in server.chat_requests
            if r.headers.get("x-kgagents-stage", "").startswith(f"agent thought, step {step_no},")]


async def test_a_seeded_tot_run_asks_for_k_different_samples_per_state(openai_server: FakeOpenAIServer, academic):
    """With ``seed`` S, the three candidates of a state are asked with the seeds derived from (S, j): three
    distinct requests (the same request three times would get the same sample three times)."""
    openai_server.answer_with(SlowFirstCandidates())  # type: ignore[arg-type]
    state = await _run(_context(openai_server, seed=7), academic, "seeded")
    assert state["final_answer"] == GOLD
    for step_no, states in ((1, 1), (2, 2)):
        requests = _thought_requests(openai_server, step_no)
        assert len(requests) == 3 * states
        bodies = {json.dumps(r.body, sort_keys=True) for r in requests}
        assert len(bodies) == len(requests)  # k distinct requests per state
        assert {r.body["seed"] for r in requests} == {derived_seed(7, "candidate", j) for j in (1, 2, 3)}
    # the decisions (here, the selection votes) keep the run's seed
    votes = [r for r in openai_server.chat_requests if "selection vote" in r.headers.get("x-kgagents-stage", "")]
    assert votes and {r.body["seed"] for r in votes} == {7}


async def _record_and_replay(server: FakeOpenAIServer, academic: str, tmp_path, **values: Any) -> None:
    server.answer_with(SlowFirstCandidates())  # type: ignore[arg-type]
    path = tmp_path / f"{values.get('strategy', 'tot')}.sqlite"
    recording = Recording(path, "record")
    with using(recording):
        recorded = await _run(_context(server, **values), academic, "recorded")
    recording.close()
    asked = len(server.chat_requests)
    assert recorded["final_answer"] == GOLD

    replay = Recording(path, "replay")
    with using(replay):
        replayed = await _run(_context(server, **values), academic, "replayed")
    assert len(server.chat_requests) == asked  # nothing reached the server
    assert replay.divergences == [] and replay.unused() == 0
    assert replayed["final_answer"] == recorded["final_answer"] and replayed["best"] == recorded["best"]
    assert ({k: t.get("thought") for k, t in replayed["thoughts"].items()}
            == {k: t.get("thought") for k, t in recorded["thoughts"].items()})
    replay.close()


async def test_a_recorded_tot_run_with_unequal_latencies_replays_as_recorded(openai_server, academic, tmp_path):
    await _record_and_replay(openai_server, academic, tmp_path)


async def test_a_recorded_got_run_with_unequal_latencies_replays_as_recorded(openai_server, academic, tmp_path):
    await _record_and_replay(openai_server, academic, tmp_path, strategy="got")


async def test_a_recording_made_before_places_were_kept_still_replays(openai_server: FakeOpenAIServer, academic,
                                                                       tmp_path, monkeypatch):
    """A recording whose calls are kept under their requests alone (as before places were kept: the key of a call
    with no place) replays by the request, in the order of the requests: no divergence, nothing asked, the same
    answer."""
    openai_server.answer_with(SlowFirstCandidates())  # type: ignore[arg-type]
    path = tmp_path / "old.sqlite"
    recording = Recording(path, "record")
    with monkeypatch.context() as patched:
        patched.setattr(replay_module, "_current_place", lambda **_: "")
        with using(recording):
            recorded = await _run(_context(openai_server, seed=7), academic, "old-recorded")
    recording.close()
    asked = len(openai_server.chat_requests)
    assert recorded["final_answer"] == GOLD

    replay = Recording(path, "replay")
    with using(replay):
        replayed = await _run(_context(openai_server, seed=7), academic, "old-replayed")
    assert len(openai_server.chat_requests) == asked
    assert replay.divergences == [] and replay.unused() == 0
    assert replayed["final_answer"] == recorded["final_answer"] and replayed["best"] == recorded["best"]
    replay.close()
