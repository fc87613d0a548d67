"""Review of issue 35's grounded items (1, 2, 6, 7): each test reproduces a defect found in the review and fails on
the code as it was reviewed (branch point 4f253d0)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import Counter
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.replay import Recording, run_place, using
from kgagents.graphs.grounded import compile_graph
from kgagents.graphs.io import final_state
from kgagents.nodes.grounded import GroundedContext, candidate_seed
from kgagents.tools.graph_functions import one_thought, parse_actions
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, Step, script_responder
from tests.grounded.conftest import step

QUESTION = "Who are the authors of the paper Deep Graphs?"


# ----------------------------------------------------------------------------------------------------------------
# Item 1: seeded samples
# ----------------------------------------------------------------------------------------------------------------
def test_seeded_runs_of_an_evaluation_do_not_share_candidate_samples():
    """``eval --seed S --runs R`` gives run r the seed S + r (evals/runner.py), and candidate j of a state is sampled
    with seed + j - 1: run 1's candidate 1 is sent with S + 1, as run 0's candidate 2, with the same messages (the
    candidate number is not in them) -- the same sample. Runs meant to be independent repetitions share k - 1 of
    their k root candidates, so the spread over runs is understated."""
    def seeds(run_seed: int) -> set[int | None]:
        ctx = GroundedContext(strategy="tot", branching=3, seed=run_seed)
        return {candidate_seed(ctx, {"id": f"t0.{j}", "parents": ["t0"]}) for j in (1, 2, 3)}  # type: ignore[arg-type]

    run0, run1 = seeds(7), seeds(7 + 1)
    assert run0.isdisjoint(run1), f"run 0 samples with {sorted(run0)}, run 1 with {sorted(run1)}"  # type: ignore


def _vote_script() -> list[dict[str, Any]]:
    return [
        *(step(rf"\[stage: agent thought, step 1, candidate {j} ", times=0, content=f"Plan {j}.") for j in (1, 2)),
        step(r"\[stage: agent action, step 1\b.*Plan 1", times=0,
             tool_calls=[{"name": "Finish", "args": {"answer": "Ann Lee, Bo Chen"}}]),
        step(r"\[stage: agent action, step 1\b.*Plan 2", times=0,
             tool_calls=[{"name": "Finish", "args": {"answer": "Bo Chen"}}]),
        step(r"\[stage: score vote", times=0, structured={"score": 0.5}),
        step(r"\[stage: selection vote", times=0, structured={"analysis": "1 is better", "best": 1}),
        step(r"\[stage: final answer\]", times=0, structured={"answer": "Ann Lee, Bo Chen"}),
    ]


class _Policy:
    """A responder as the server's policy."""

    def __init__(self, responder: Any) -> None:
        self.step_for = responder


async def _seeded_vote_run(server: FakeOpenAIServer, academic: str, **values: Any) -> list[list[str]]:
    """A seeded ToT run whose votes are sampled one request at a time; the vote requests, grouped by stage."""
    server.answer_with(_Policy(script_responder(_vote_script())))  # type: ignore[arg-type]
    ctx = GroundedContext(model="openai:gpt-4o-mini", base_url=server.base_url, api_backoff_base_s=0.001,
                          strategy="tot", branching=2, keep=1, max_depth=1, seed=7, evaluate_temperature=0.7,
                          samples_in_one_request=False, **values)
    graph = compile_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "votes"}, "recursion_limit": ctx.recursion_limit}
    await final_state(graph, {"question": QUESTION, "graph": academic}, config, context=ctx)
    groups: dict[str, list[str]] = {}
    for r in server.chat_requests:
        stage = r.headers.get("x-kgagents-stage", "")
        if "vote" in stage:
            groups.setdefault(stage, []).append(json.dumps(r.body, sort_keys=True))
    return list(groups.values())


async def test_seeded_score_vote_samples_are_distinct_requests(openai_server: FakeOpenAIServer, academic):
    """Score evaluator, 3 samples per state, a server asked one sample at a time (``samples_in_one_request`` off,
    or a server that refuses ``n``, or a model without ``n``): with ``--seed`` the 3 samples of a state are the
    same request with the same seed, so a server that honours seeds answers the same vote 3 times and V(p, S)
    counts one vote thrice -- the collapse item 1 fixed for candidates, left in the Score evaluator."""
    groups = await _seeded_vote_run(openai_server, academic, evaluator="score", score_samples=3)
    assert groups and all(len(g) == 3 for g in groups)
    for bodies in groups:
        assert len(set(bodies)) == len(bodies), "a state's score votes are byte-identical requests"


async def test_seeded_selection_vote_samples_are_distinct_requests(openai_server: FakeOpenAIServer, academic):
    """The same for ToT's vote selection (``selection=vote``, ``vote_samples`` 3)."""
    groups = await _seeded_vote_run(openai_server, academic, evaluator="select", selection="vote", vote_samples=3)
    assert groups and all(len(g) == 3 for g in groups)
    for bodies in groups:
        assert len(set(bodies)) == len(bodies), "the selection's votes are byte-identical requests"


# ----------------------------------------------------------------------------------------------------------------
# Item 6: one step per text reply
# ----------------------------------------------------------------------------------------------------------------
def test_a_markdown_bold_thought_reply_is_cut_at_its_invented_steps():
    """Chat models often bold the labels (``**Thought 2:**``): the label is kept and the invented action and
    observation reach the scratchpad, as before item 6."""
    reply = "**Thought 2:** I need p1's authors.\n**Action 2:** NeighbourCheck[p1, author]\n**Observation 2:** Ann Lee"
    assert one_thought(reply) == "I need p1's authors."


def test_a_markdown_bold_action_reply_runs_only_its_own_action():
    """``**Action 1:** RetrieveNode[...]`` then an invented observation, thought and ``**Action 2:** Finish[...]``:
    both calls are run, so the chain finishes with an answer the model wrote before seeing any observation."""
    reply = ("**Action 1:** RetrieveNode[Deep Graphs]\n**Observation 1:** The ID is p1.\n**Thought 2:** done\n"
             "**Action 2:** Finish[Ann Lee]")
    assert [a.name for a in parse_actions(reply)] == ["RetrieveNode"]


def test_an_action_reply_that_runs_on_into_the_next_action_line_keeps_one_step():
    """``Action 1: ...`` then ``Action 2: Finish[...]`` on the next line: the second line is the next step's action
    (Graph-CoT stops generation at the first newline, so it never sees it), yet it is joined to the first and run."""
    reply = "Action 1: RetrieveNode[Deep Graphs]\nAction 2: Finish[Ann Lee]"
    assert [a.name for a in parse_actions(reply)] == ["RetrieveNode"]


# ----------------------------------------------------------------------------------------------------------------
# Item 2: recordings keyed by the call's place
# ----------------------------------------------------------------------------------------------------------------
class _SamplingServer:
    """A server that samples: the n-th request of a candidate's thought (whatever its body) gets "Plan j-n"; the
    first request of candidate 1's thought answers last (a slow reply), every other at once. Actions finish with
    the plan they read; votes keep choice 1."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: Counter[str] = Counter()

    def step_for(self, request: RecordedRequest) -> Step:
        stage = request.headers.get("x-kgagents-stage", "")
        if stage.startswith("agent thought"):
            j = re.search(r"candidate (\d+) of", stage)
            with self.lock:
                n = self.seen[stage]
                self.seen[stage] += 1
            if j and j.group(1) == "1" and n == 0:
                time.sleep(0.4)
            return Step("reply", content=f"Plan {j.group(1) if j else '?'}-{n}.")
        if stage.startswith("agent action"):
            plans = re.findall(r"Plan (\d+-\d+)", request.prompt)
            return Step("tool_calls", tool_calls=[("Finish", {"answer": f"Answer {plans[-1] if plans else '?'}"})])
        if stage.startswith("selection vote"):
            return Step("tool_calls", tool_calls=[(None, {"analysis": "1", "best": [1]})])
        return Step("tool_calls", tool_calls=[(None, {"answer": "none"})])


async def _two_runs(server: FakeOpenAIServer, academic: str, tag: str, lead: int = 0) -> list[dict[str, Any]]:
    """Two runs of one question at once (``eval --runs 2`` at concurrency 2, no seed), run ``lead`` started
    first; their final states, run 0's first."""
    ctx = GroundedContext(model="openai:gpt-4o-mini", base_url=server.base_url, api_backoff_base_s=0.001,
                          strategy="tot", branching=2, keep=1, max_depth=1)
    graph = compile_graph(InMemorySaver())

    async def run(index: int) -> dict[str, Any]:
        config = {"configurable": {"thread_id": f"{tag}-run{index}"}, "recursion_limit": ctx.recursion_limit}
        with run_place("q1", index):  # as the evaluation runner says which item and run it runs
            return dict(await final_state(graph, {"question": QUESTION, "graph": academic}, config, context=ctx))

    tasks = {lead: asyncio.create_task(run(lead))}
    await asyncio.sleep(0.05)  # run ``lead`` asks first
    tasks[1 - lead] = asyncio.create_task(run(1 - lead))
    return [await tasks[0], await tasks[1]]


async def test_two_concurrent_runs_of_one_item_replay_as_recorded(openai_server: FakeOpenAIServer, academic, tmp_path):
    """``eval --runs 2 --record`` (or two items with the same question) at concurrency 2: the runs' identical
    requests have the same place (node, task path, stage: no thread or run in it), so they are numbered by
    completion order when recorded and served in request order when replayed. Run 0's candidate 1 gets run 1's
    reply and its candidate 2 its own: a state that never existed, whose selection vote the recording lacks."""
    openai_server.answer_with(_SamplingServer())  # type: ignore[arg-type]
    path = tmp_path / "runs.sqlite"
    recording = Recording(path, "record")
    with using(recording):
        recorded = await _two_runs(openai_server, academic, "rec")
    recording.close()
    asked = len(openai_server.chat_requests)

    replay = Recording(path, "replay")
    with using(replay):
        replayed = await _two_runs(openai_server, academic, "rep", lead=1)  # in the other order
    replay.close()
    assert len(openai_server.chat_requests) == asked
    assert replay.divergences == []
    assert [r["final_answer"] for r in replayed] == [r["final_answer"] for r in recorded]


# ----------------------------------------------------------------------------------------------------------------
# Item 7: Graph-RAG's neighbour listing
# ----------------------------------------------------------------------------------------------------------------
def test_graph_rag_keeps_its_per_relation_cap_on_a_node_listed_at_both_ends(tmp_path):
    """A paper with 25 authors, GRBench-shaped (paper -author-> a, a -paper-> paper): the author line shows 20 and
    says "(5 more)", then the incoming ``paper`` line lists those 5 as new neighbours (they were only not shown):
    25 authors in the context against ``neighbours_per_relation`` 20 (Graph-CoT's ``sample_n``), and a context that
    says 5 are left out and then lists them."""
    from kgagents.nodes.kg_rag import node_context
    from kgagents.tools.pgraph import open_graph
    from kgagents.tools.pgraph.build import GraphBuilder

    b = GraphBuilder(tmp_path / "g")
    b.add_node("p1", type="paper", name="Big Paper", features={"title": "Big Paper"})
    for i in range(25):
        b.add_node(f"a{i}", type="author", name=f"Author {i:02d}")
        b.add_edge("p1", "author", f"a{i}")
        b.add_edge(f"a{i}", "paper", "p1")
    b.finish(name="g", fingerprint="ab" * 8, source={"path": "test"})
    text = node_context(open_graph(str(tmp_path / "g")), "p1", hops=1, per_relation=20)
    listed = set(re.findall(r"Author \d\d", text))
    assert len(listed) <= 20, text
