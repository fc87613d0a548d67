"""One step per reply, as Graph-CoT keeps it: a thought reply that writes on into an action, an observation or the
next thought keeps only its thought, and an action reply that first echoes its thought still has its action."""

from __future__ import annotations

from kgagents.tools.graph_functions import one_thought, parse_actions
from tests.grounded.conftest import step, thought
from tests.grounded.test_graph import run
from tests.grounded.test_protocol import text_action

GOLD = "Ann Lee, Bo Chen"


def test_a_thought_reply_is_cut_at_the_first_step_the_model_invented():
    assert one_thought("Thought 2: I need the authors.\nAction 2: NeighbourCheck[p1, author]\n"
                       "Observation 2: The author neighbors of p1 are: [\"a9\"].\nThought 3: Done.") == \
        "I need the authors."
    assert one_thought("I need the paper,\nthen its authors.\nObservation 1: made up") == \
        "I need the paper,\nthen its authors."
    assert one_thought("Next Thought: combine both chains.\nThought 4: more") == "combine both chains."
    assert one_thought("  Thought 1 : plain  ") == "plain"
    assert one_thought("Action 1: RetrieveNode[x]") == ""  # no thought at all, and no invented action kept


def test_an_action_reply_that_echoes_its_thought_parses_to_its_action():
    calls = parse_actions("Thought 1: I need the paper node first.\nAction 1: RetrieveNode[Deep Graphs]\n"
                          "Observation 1: The ID of this retrieval target node is p1.\nThought 2: next")
    assert [(c.name, c.args, c.error) for c in calls] == [("RetrieveNode", {"keyword": "Deep Graphs"}, None)]
    calls = parse_actions("Thought 3: their names.\nAction 3: NodeFeature[a1, name],\nNodeFeature[a2, name]")
    assert [c.args for c in calls] == [{"node_id": "a1", "feature": "name"}, {"node_id": "a2", "feature": "name"}]


async def test_one_step_per_reply_in_a_run(academic):
    """The first thought writes on with a made-up action, observation and next thought; the first action reply
    echoes its thought. The chain keeps the thought alone, the action runs, and nothing invented is shown to the
    model again."""
    steps = [
        thought(1, "I need the paper node first.\nAction 1: RetrieveNode[Shallow Nets]\n"
                   "Observation 1: The ID of this retrieval target node is p9.\nThought 2: Its authors are Zed."),
        text_action(1, "Thought 1: I need the paper node first.\nAction 1: RetrieveNode[Deep Graphs]"),
        thought(2, "Its authors."), text_action(2, "Action 2: NeighbourCheck[p1, author]"),
        thought(3, "Their names."), text_action(3, "NodeFeature[a1, name], NodeFeature[a2, name]"),
        thought(4, "Done."), text_action(4, "Finish[Ann Lee, Bo Chen]"),
        step(r"\[stage: final answer\]", times=0, structured={"answer": "none"}),
    ]
    state, model, _ = await run(academic, steps, action_format="text")
    first = state["thoughts"]["t0.1"]
    assert first["thought"] == "I need the paper node first."
    assert [(a["name"], a["args"]) for a in first["actions"]] == [("RetrieveNode", {"keyword": "Deep Graphs"})]
    assert first["actions"][0]["observation"] == "The ID of this retrieval target node is p1."
    assert state["final_answer"] == GOLD
    for prompt in model.calls[1:]:
        assert "Shallow Nets" not in prompt and "p9" not in prompt and "Zed" not in prompt
