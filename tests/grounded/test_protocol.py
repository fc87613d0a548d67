"""The paper's protocol as settings (and the ``paper-*`` presets that turn them on): ToT's best-choice vote, ...
Each test drives the real graph and store with a scripted model."""

from __future__ import annotations

from tests.grounded.conftest import step
from tests.grounded.test_graph import run

GOLD = "Ann Lee, Bo Chen"


def _call(name: str, **args) -> list[dict]:
    return [{"name": name, "args": args}]


# --------------------------------------------------------------------------------------------------------------
# Selection as ToT's vote
# --------------------------------------------------------------------------------------------------------------
async def test_selection_by_vote_keeps_the_states_with_most_votes(academic):
    steps = [
        step(r"\[stage: agent thought, step 1, candidate 1 ", content="Look at the venue."),
        step(r"\[stage: agent thought, step 1, candidate 2 ", content="Find the paper."),
        step(r"\[stage: agent thought, step 1, candidate 3 ", content="Look at an author."),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Look at the venue", tool_calls=_call("RetrieveNode", keyword="KDD")),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Find the paper", tool_calls=_call("RetrieveNode",
                                                                                          keyword="Deep Graphs")),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Look at an author", tool_calls=_call("RetrieveNode",
                                                                                             keyword="Ann Lee")),
        # five votes: choice 2 twice, choice 3 twice, choice 1 once; one reply names no choice
        step(r"\[stage: selection vote, depth 1\]", times=2, structured={"analysis": "2 found it", "best": 2}),
        step(r"\[stage: selection vote, depth 1\]", times=1, structured={"analysis": "3", "best": "The best choice is 3"}),
        step(r"\[stage: selection vote, depth 1\]", times=1, structured={"analysis": "none", "best": 7}),
        step(r"\[stage: selection vote, depth 1\]", times=1, structured={"analysis": "3 again", "best": [3]}),
        step(r"\[stage: agent thought, step 2\b", times=0, content="Finish."),
        step(r"\[stage: agent action, step 2\b.*node is p1", times=0, tool_calls=_call("Finish", answer=GOLD)),
        step(r"\[stage: agent action, step 2\b", times=0, tool_calls=_call("Finish", answer="KDD")),
        step(r"\[stage: selection vote, depth 2\]", times=0, structured={"analysis": "the paper's", "best": 1}),
    ]
    state, model, _ = await run(academic, steps, strategy="tot", branching=3, keep=2, selection="vote",
                                vote_samples=5)
    depth1 = state["selections"][0]
    assert depth1["kept"] == ["t0.2", "t0.3"]  # 2 votes each (ties in candidate order), t0.1 has none
    assert "4 of 5 vote(s) counted" in depth1["reason"]
    assert {c: state["thoughts"][c]["votes"] for c in ("t0.1", "t0.2", "t0.3")} == {"t0.1": 0, "t0.2": 2, "t0.3": 2}
    vote = next(c for c in model.calls if "[stage: selection vote, depth 1]" in c)
    assert "The best choice is s" in vote and "Choice 2:\nThought 1: Find the paper." in vote
    assert sum("[stage: selection vote, depth 1]" in c for c in model.calls) == 5
    assert state["final_answer"] == GOLD and state["best"] == "t0.2.1"


# --------------------------------------------------------------------------------------------------------------
# The presets
# --------------------------------------------------------------------------------------------------------------
def test_every_row_has_a_paper_preset_with_the_protocol():
    from graphs.grounded import PAPER_PROTOCOL, PRESETS, ROWS
    from kgagents.workflows import load_workflow, make_context, preset

    assert set(PRESETS) == set(ROWS) | {f"paper-{row}" for row in ROWS} and len(ROWS) == 10
    for row, values in ROWS.items():
        ctx = make_context(load_workflow("grounded"), preset("grounded", f"paper-{row}"))
        assert {k: getattr(ctx, k) for k in values} == values
        assert {k: getattr(ctx, k) for k in PAPER_PROTOCOL} == PAPER_PROTOCOL
    assert PAPER_PROTOCOL["selection"] == "vote" and PAPER_PROTOCOL["vote_samples"] > 1
