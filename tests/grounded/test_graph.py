"""Every route of the grounded-reasoning graph, driven offline by scripted chat models through the real static-KG
store: CoT / ToT / GoT × agent / exploration, both evaluators, Finish, step and depth limits, invalid actions,
empty neighbourhoods, entity extraction finding nothing, merges, and failing steps."""

from __future__ import annotations

import json
import re

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs import grounded as grounded_graph
from kgagents.graphs.grounded import compile_graph
from kgagents.graphs.io import OUTPUT_NODE, final_state
from kgagents.nodes.grounded import GroundedContext, chain_of, rank_by_scores, render_chain
from kgagents.prompts import grounded as P
from tests.grounded.conftest import action, step, thought

QUESTION = "Who are the authors of the paper Deep Graphs?"


async def run(graph_path, steps, question=QUESTION, **ctx):
    model = ScriptedChatModel(steps=steps)
    context = GroundedContext(model=model, api_backoff_base_s=0.001, **ctx)
    graph = compile_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": context.recursion_limit}
    nodes: list[str] = []
    async for chunk in graph.astream({"question": question, "graph": graph_path}, config, context=context,
                                     stream_mode="updates"):
        nodes.extend(chunk)
    assert nodes.pop() == OUTPUT_NODE  # the output schema's step, once, last
    return dict((await graph.aget_state(config)).values), model, nodes


GOLD_AGENT = [
    thought(1, "I need the paper node first."),
    action(1, ("RetrieveNode", {"keyword": "Deep Graphs"})),
    thought(2, "Its author neighbours are the authors."),
    action(2, ("NeighbourCheck", {"node_id": "p1", "neighbor_type": "author"})),
    thought(3, "I need their names."),
    action(3, ("NodeFeature", {"node_id": "a1", "feature": "name"}),
           ("NodeFeature", {"node_id": "a2", "feature": "name"})),
    thought(4, "The authors are Ann Lee and Bo Chen."),
    action(4, ("Finish", {"answer": "Ann Lee, Bo Chen"})),
]


async def test_graph_cot_agent_finishes_with_the_answer(academic):
    state, model, nodes = await run(academic, GOLD_AGENT)
    per_depth = ["generate_step", "collect_candidates", "evaluate_states", "select_states"]
    assert nodes == ["initialise", *per_depth * 4, "answer"]
    assert state["final_answer"] == "Ann Lee, Bo Chen" and state["exit_reason"] == "finished"
    chain = chain_of(state["thoughts"], state["best"])
    assert [t["id"] for t in chain] == ["t0.1", "t0.1.1", "t0.1.1.1", "t0.1.1.1.1"]
    assert chain[0]["actions"][0]["observation"] == "The ID of this retrieval target node is p1."
    assert chain[1]["actions"][0]["observation"] == 'The author neighbors of p1 are: ["a1", "a2"].'
    assert [a["observation"] for a in chain[2]["actions"]] == ["The name feature of a1 is: Ann Lee.",
                                                              "The name feature of a2 is: Bo Chen."]
    # each prompt carries the graph's definition and the scratchpad of the chain so far
    assert "paper -[author]-> author" in model.calls[0] and "author nodes have a name and the features: organization" \
        in model.calls[0]
    assert "Observation 2: The author neighbors of p1" in model.calls[4]
    assert state["usage"]["scripted"]["calls"] == len(model.calls) == 8
    assert state["graph_ref"]["location"].endswith("academic") and "thoughts" in state


async def test_wrong_actions_become_clear_observations(academic):
    steps = [
        thought(1, "Try things."),
        action(1, ("NeighbourCheck", {"node_id": "nope", "neighbor_type": "author"}),
               ("NeighbourCheck", {"node_id": "p1", "neighbor_type": "editor"}),
               ("NodeFeature", {"node_id": "'p1'", "feature": "abstract"}),
               ("NodeDegree", {"node_id": "p1", "neighbor_type": "citation"}),
               ("Fly", {"to": "moon"})),
        thought(2, "Missing arguments."),
        action(2, ("NodeFeature", {"node_id": "p1"})),
        thought(3, "No call at all."),
        step(r"\[stage: agent action, step 3\b", content="I will just think."),
        thought(4, "Finish."),
        action(4, ("NodeDegree", {"node_id": "v1", "neighbor_type": "paper"}), ("Finish", {"answer": "nobody"})),
    ]
    state, _, _ = await run(academic, steps, max_actions=6)
    chain = chain_of(state["thoughts"], state["best"])
    first = [a["observation"] for a in chain[0]["actions"]]
    assert first[0] == "There is no node with ID 'nope' in the graph. Use RetrieveNode to find a node's ID."
    assert first[1] == "Node p1 has no 'editor' neighbours; its neighbour types are: author, venue."
    assert first[2] == "Node p1 has no feature 'abstract'; its features are: name, year, title."
    assert first[3].startswith("Node p1 has no 'citation' neighbours (degree 0)")
    assert first[4].startswith("Invalid action 'Fly'. Valid actions are RetrieveNode[keyword]")
    assert not any(a["ok"] for a in chain[0]["actions"])
    assert chain[1]["actions"][0]["observation"] == "NodeFeature needs node_id, feature; missing or empty: feature."
    assert chain[2]["observation"].startswith("Invalid action: no graph function was called")
    assert chain[3]["actions"][0]["observation"] == "The paper neighbor node degree of v1 is: 2."
    assert state["final_answer"] == "nobody"


async def test_the_step_limit_ends_a_chain_with_an_answer_from_it(academic):
    steps = [thought(i, f"Looking around {i}.") for i in (1, 2)] + [
        action(1, ("RetrieveNode", {"keyword": "KDD"})), action(2, ("NodeDegree", {"node_id": "v1",
                                                                                    "neighbor_type": "paper"})),
        step(r"\[stage: final answer\]", structured={"answer": "2 papers"})]
    state, model, nodes = await run(academic, steps, max_steps=2)
    assert state["exit_reason"] == "reached the step limit" and state["final_answer"] == "2 papers"
    assert nodes.count("generate_step") == 2 and nodes[-1] == "answer"
    assert "Observation 2: The paper neighbor node degree of v1 is: 2." in model.calls[-1]


async def test_a_failing_model_call_is_recorded_and_the_run_still_answers(academic):
    steps = [thought(1, "First.")]
    steps.append({"when": r"\[stage: agent action, step 1\b", "raise": "bad request", "status": 400, "times": 0})
    steps.append(step(r"\[stage: final answer\]", structured={"answer": "unknown"}))
    state, _, _ = await run(academic, steps, max_steps=3, max_api_retries=0)
    failed = state["thoughts"]["t0.1"]
    assert failed["error"] and "bad request" in failed["error"]
    assert state["exit_reason"] == ("a step failed: every candidate at depth 1 failed, so the answer comes from the "
                                    "question alone") and state["final_answer"] == "unknown"


# --------------------------------------------------------------------------------------------------------------
# ToT and GoT
# --------------------------------------------------------------------------------------------------------------
def tot_agent_steps() -> list[dict]:
    """Depth 1: three candidates (one retrieves the paper, two wander); depth 2: the kept ones finish."""
    return [
        step(r"\[stage: agent thought, step 1, candidate 1 ", content="Find the paper."),
        step(r"\[stage: agent thought, step 1, candidate [23] ", times=2, content="Look at the venue."),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Find the paper", times=0,
             tool_calls=[{"name": "RetrieveNode", "args": {"keyword": "Deep Graphs"}}]),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Look at the venue", times=0,
             tool_calls=[{"name": "RetrieveNode", "args": {"keyword": "KDD"}}]),
        step(r"\[stage: selection vote, depth 1\]", structured={"analysis": "choice 1 found the paper",
                                                                 "best": [1, 3]}),
        step(r"\[stage: agent thought, step 2\b", times=0, content="Now finish."),
        step(r"\[stage: agent action, step 2\b.*retrieval target node is p1", times=0,
             tool_calls=[{"name": "Finish", "args": {"answer": "Ann Lee, Bo Chen"}}]),
        step(r"\[stage: agent action, step 2\b.*retrieval target node is v1", times=0,
             tool_calls=[{"name": "Finish", "args": {"answer": "KDD"}}]),
        step(r"\[stage: selection vote, depth 2\]", structured={"analysis": "the paper chain", "best": [1]}),
    ]


async def test_tot_agent_with_the_selection_evaluator(academic):
    state, model, nodes = await run(academic, tot_agent_steps(), strategy="tot", branching=3, keep=2)
    assert nodes[:4] == ["initialise", "generate_step", "generate_step", "generate_step"]
    depth1, depth2 = state["selections"]
    assert depth1["candidates"] == ["t0.1", "t0.2", "t0.3"] and depth1["kept"] == ["t0.1", "t0.3"]
    assert depth1["evaluator"] == "select" and "found the paper" in depth1["reason"]
    assert depth2["candidates"] == ["t0.1.1", "t0.1.2", "t0.1.3", "t0.3.1", "t0.3.2", "t0.3.3"]
    assert depth2["kept"][0] == "t0.1.1"
    assert state["final_answer"] == "Ann Lee, Bo Chen" and state["best"] == "t0.1.1"
    vote = next(c for c in model.calls if "[stage: selection vote, depth 1]" in c)
    assert "Choice 1:\nThought 1: Find the paper." in vote and "Choice 3:" in vote
    assert {t["id"]: t.get("kept") for t in state["thoughts"].values()}["t0.2"] is False


async def test_tot_with_the_score_evaluator_ranks_by_votes(academic):
    steps = [s for s in tot_agent_steps() if "selection vote" not in s["when"]] + [
        step(r"\[stage: score vote, state t0\.1\]", times=0, structured={"score": 0.9}),
        step(r"\[stage: score vote, state t0\.\d\]", times=0, structured={"score": "0.2"}),
        step(r"\[stage: score vote, state t0\.1\.\d\]", times=0, structured={"score": 0.8}),
        step(r"\[stage: score vote, state t0\.\d\.\d\]", times=0, structured={"score": 0.1}),
    ]
    state, model, nodes = await run(academic, steps, strategy="tot", evaluator="score", branching=3, keep=2,
                                    score_samples=2)
    assert nodes.count("score_state") == 3 + 6
    depth1 = state["selections"][0]
    assert depth1["kept"] == ["t0.1", "t0.2"] and depth1["evaluator"] == "score"
    assert state["scores"]["t0.1"] == [0.9, 0.9] and state["thoughts"]["t0.1"]["votes"] == 2
    assert state["final_answer"] == "Ann Lee, Bo Chen"
    assert sum("[stage: score vote" in c for c in model.calls) == 2 * 9


def test_rank_by_scores_counts_votes_then_means():
    ranked = rank_by_scores(["a", "b", "c"], {"a": [0.5, 0.9], "b": [0.7, 0.1], "c": [0.6, 0.6]})
    assert ranked == [("a", 1, 0.7), ("b", 1, 0.4), ("c", 0, 0.6)]
    assert rank_by_scores(["x", "y"], {}) == [("x", 0, 0.0), ("y", 0, 0.0)]


async def test_got_merges_pairs_of_candidates(academic):
    steps = [
        step(r"\[stage: agent thought, step 1, candidate [12] ", times=2, content="Find the paper."),
        step(r"\[stage: agent thought, step 1, candidate 3 ", content="Look at the venue."),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Find the paper", times=0,
             tool_calls=[{"name": "RetrieveNode", "args": {"keyword": "Deep Graphs"}}]),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Look at the venue", times=0,
             tool_calls=[{"name": "RetrieveNode", "args": {"keyword": "KDD"}}]),
        step(r"\[stage: merge thoughts, depth 1\]", content="Thought: The paper is p1; its authors are next."),
        # the merged thought is grounded like a step: it is step 3 of the merged chain (both parents, then it)
        step(r"\[stage: agent action, step 3, candidate merge of t0\.1 \+ t0\.2\]",
             tool_calls=[{"name": "NeighbourCheck", "args": {"node_id": "p1", "neighbor_type": "author"}}]),
        step(r"\[stage: agent action, step \d+, candidate merge of ", times=0,
             tool_calls=[{"name": "Finish", "args": {"answer": "KDD"}}]),
        step(r"\[stage: selection vote, depth 1\]", structured={"analysis": "the merge", "best": [4, 1]}),
        # the children of the merge continue a chain of three thoughts (both parents and the merge): step 4
        step(r"\[stage: agent thought, step [24]\b", times=0, content="Check the authors."),
        step(r"\[stage: agent action, step [24]\b", times=0,
             tool_calls=[{"name": "Finish", "args": {"answer": "Ann Lee, Bo Chen"}}]),
        step(r"\[stage: merge thoughts, depth 2\]", times=0, content="Both chains finish the same way."),
        step(r"\[stage: selection vote, depth 2\]", structured={"analysis": "first", "best": [1]}),
    ]
    state, model, nodes = await run(academic, steps, strategy="got", branching=3, keep=2)
    merge = state["thoughts"]["m1.1"]
    assert merge["kind"] == "merge" and merge["parents"] == ["t0.1", "t0.2"]
    assert merge["thought"] == "The paper is p1; its authors are next."
    assert merge["actions"][0]["observation"] == 'The author neighbors of p1 are: ["a1", "a2"].'
    assert state["selections"][0]["candidates"] == ["t0.1", "t0.2", "t0.3", "m1.1"]
    assert state["selections"][0]["kept"] == ["m1.1", "t0.1"]
    merge_prompt = next(c for c in model.calls if "[stage: merge thoughts, depth 1]" in c)
    assert "<chain_1>\nThought 1: Find the paper." in merge_prompt and "<merged_chain>" in merge_prompt
    # the merged state's children continue both parents' chains
    child = chain_of(state["thoughts"], "m1.1.1")
    assert [t["id"] for t in child] == ["t0.1", "t0.2", "m1.1", "m1.1.1"]
    assert nodes.count("merge_thoughts") == 1 + 3  # depth 1: 3 candidates → 1 pair; depth 2: 6 → 3 pairs
    # depth 2 pairs divergent branches: each merge joins a child of m1.1 with a child of t0.1
    assert [state["thoughts"][f"m2.{i}"]["parents"] for i in (1, 2, 3)] == [
        ["m1.1.1", "t0.1.1"], ["m1.1.2", "t0.1.2"], ["m1.1.3", "t0.1.3"]]
    child_prompt = next(c for c in model.calls if "step 4, candidate 1" in c)
    assert "Thought 3 (merged): The paper is p1" in child_prompt
    assert "Action 3: NeighbourCheck[p1, author]\nObservation 3: The author neighbors of p1" in child_prompt
    assert state["final_answer"] == "Ann Lee, Bo Chen"


async def test_the_depth_limit_ends_the_search_with_the_best_state(academic):
    steps = [step(r"\[stage: agent thought", times=0, content="Wander."),
             step(r"\[stage: agent action", times=0, tool_calls=[{"name": "RetrieveNode", "args": {"keyword": "KDD"}}]),
             step(r"\[stage: selection vote", times=0, structured={"analysis": "", "best": [2]}),
             step(r"\[stage: final answer\]", structured={"answer": "KDD"})]
    state, _, nodes = await run(academic, steps, strategy="tot", branching=2, keep=1, max_depth=3)
    assert [s["kept"] for s in state["selections"]] == [["t0.2"], ["t0.2.2"], ["t0.2.2.2"]]
    assert state["exit_reason"] == "reached the step limit" and state["best"] == "t0.2.2.2"
    assert nodes.count("generate_step") == 6 and state["final_answer"] == "KDD"


# --------------------------------------------------------------------------------------------------------------
# Automatic graph exploration (Algorithm 1)
# --------------------------------------------------------------------------------------------------------------
def explore(stage: str, *, times: int = 0, context: str = "", **reply) -> dict:
    return step(rf"\[stage: {stage}.*{context}" if context else rf"\[stage: {stage}", times=times, **reply)


async def test_cot_exploration_prunes_relations_and_neighbours(academic):
    steps = [
        explore("search thought", content="Thought: I need the paper Deep Graphs and its authors."),
        explore("entity extraction", structured={"entities": ["Deep Graphs"]}),
        explore("search attributes", structured={"attributes": ["year"]}),
        explore("prune relations", structured={"relations": ["author", "nonsense"]}),
        explore("prune entities", structured={"entities": "Ann Lee; Bo Chen"}),
        explore("search end", structured={"sufficient": "yes", "reason": "the authors are known"}),
        explore("final answer", structured={"answer": "Ann Lee, Bo Chen"}),
    ]
    state, model, _ = await run(academic, steps, interaction="explore")
    record = state["thoughts"]["t0.1"]
    assert record["thought"] == "I need the paper Deep Graphs and its authors."
    assert record["linked"] == {"Deep Graphs": "p1"} and record["visited"] == ["p1"]
    assert record["triples"] == [["Deep Graphs", "author", "Ann Lee"], ["Deep Graphs", "author", "Bo Chen"]]
    assert record["attributes"] == ["Deep Graphs — year: 2020"] and record["finished"]
    stages = [d["stage"] for d in record["decisions"]]
    assert stages == ["attributes", "relations", "entities", "end"]
    assert record["decisions"][1]["offered"] == ["author", "venue"]  # "paper" in: the graph lists both ways
    assert record["decisions"][1]["chosen"] == ["author"]
    assert state["final_answer"] == "Ann Lee, Bo Chen" and state["exit_reason"] == "finished"
    assert "Triple: Deep Graphs -> author" in model.calls[-1]


async def test_exploration_with_nothing_to_find(academic):
    steps = [
        explore("search thought", content="Hmm."),
        explore("entity extraction", times=1, structured={"entities": []}),
        explore("entity extraction", times=1, structured={"entities": ["Lonely Venue"]}),
        explore("search attributes", structured={"attributes": []}),
        explore("search end", structured={"sufficient": False}),
        explore("final answer", structured={"answer": "unknown"}),
    ]
    state, _, _ = await run(academic, steps, interaction="explore", max_steps=2, search_depth=2)
    first, second = state["thoughts"]["t0.1"], state["thoughts"]["t0.1.1"]
    assert first["observation"] == "No entities were found in the thought: nothing to explore."
    assert first["triples"] == [] and [d["stage"] for d in first["decisions"]] == ["end"]
    assert second["linked"] == {"Lonely Venue": "v2"} and second["visited"] == ["v2"]
    assert second["decisions"][0] == {"stage": "relations", "level": 1, "entity": "Lonely Venue", "offered": [],
                                      "chosen": []}
    assert state["exit_reason"] == "reached the step limit" and state["final_answer"] == "unknown"


async def test_tot_exploration_with_scores(academic):
    steps = [
        explore("search thought", content="Find Deep Graphs."),
        explore("entity extraction", structured={"entities": ["Deep Graphs"]}),
        explore("search attributes", structured={"attributes": []}),
        explore("prune relations", structured={"relations": ["venue"]}),
        explore("prune entities", structured={"entities": ["KDD"]}),
        explore("search end", structured={"sufficient": True}),
        explore("score vote", structured={"score": 0.5}),
        explore("final answer", structured={"answer": "KDD"}),
    ]
    state, _, nodes = await run(academic, steps, interaction="explore", strategy="tot", evaluator="score",
                                branching=2, keep=1)
    assert nodes.count("generate_step") == 2 and nodes.count("score_state") == 2
    assert state["thoughts"]["t0.1"]["triples"] == [["Deep Graphs", "venue", "KDD"]]
    assert state["final_answer"] == "KDD" and state["best"] == "t0.1"


# --------------------------------------------------------------------------------------------------------------
# Inputs, context, prompts
# --------------------------------------------------------------------------------------------------------------
async def test_clear_errors_for_missing_inputs(academic):
    with pytest.raises(ValueError, match="needs a knowledge graph"):
        await run(None, [], question="Who?")
    with pytest.raises(ValueError, match="no question"):
        await run(academic, [], question="  ")
    with pytest.raises(ValueError, match="strategy must be"):
        GroundedContext(strategy="beam")
    with pytest.raises(ValueError, match="branching must be at least 1"):
        GroundedContext(branching=0)


def test_render_chain_of_merges_and_failures():
    thoughts = {"t0": {"id": "t0", "depth": 0, "parents": [], "kind": "root", "thought": "q"},
                "a": {"id": "a", "depth": 1, "parents": ["t0"], "kind": "step", "thought": "A",
                      "triples": [["x", "r", "y"]], "attributes": ["x — year: 1"]},
                "b": {"id": "b", "depth": 1, "parents": ["t0"], "kind": "step", "thought": "B", "error": "boom"},
                "m": {"id": "m", "depth": 1, "parents": ["a", "b"], "kind": "merge", "thought": "M"}}
    text = render_chain(chain_of(thoughts, "m"))
    assert text.splitlines() == ["Thought 1: A", "  Triple: x -> r -> y", "  Attribute: x — year: 1",
                                 "Thought 2: B", "  (failed: boom)", "Thought 3 (merged): M"]


EXPECTED = {
    "AGENT_THOUGHT": {"step", "candidate", "examples", "graph_definition", "question", "scratchpad"},
    "AGENT_ACTION": {"step", "candidate", "examples", "graph_definition", "question", "scratchpad", "thought"},
    "SEARCH_THOUGHT": {"step", "candidate", "examples", "graph_definition", "question", "triples", "thoughts",
                       "attributes"},
    "ENTITY_EXTRACTION": {"text"}, "PRUNE_RELATIONS": {"question", "entity", "relations", "limit"},
    "PRUNE_ENTITIES": {"question", "head_entity", "relation", "tail_entities", "limit"},
    "SEARCH_ATTRIBUTES": {"question", "entity", "attributes"},
    "SEARCH_END": {"question", "thoughts", "triples", "attributes"},
    "SELECTION_VOTE": {"depth", "keep", "question", "choices"}, "SCORE_VOTE": {"state", "question", "chain"},
    "MERGE": {"depth", "question", "chain_1", "chain_2", "merged_chain"}, "FINAL_ANSWER": {"question", "chain"},
    "AGENT_ACTION_TEXT": {"step", "candidate", "examples", "graph_definition", "question", "scratchpad", "thought"},
    "SELECTION_BEST": {"depth", "question", "choices"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_prompt_placeholders(name):
    template = getattr(P, name)
    assert P.placeholders(template) == EXPECTED[name]
    # every call is named by its stage, as metadata: the text the model reads holds no stage line
    assert re.match(r"[a-z -]+", template.stage) and "[stage" not in template


async def test_the_served_graph_takes_a_context_of_json_values(academic, tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "grounded", "steps": GOLD_AGENT}), encoding="utf-8")
    state = await final_state(grounded_graph.graph,
                              {"question": QUESTION, "graph": academic}, {"recursion_limit": 100},
                                               context={"model": f"scripted:{script}", "strategy": "cot"})
    assert state["final_answer"] == "Ann Lee, Bo Chen"
    assert grounded_graph.graph.get_name() == "grounded" and grounded_graph.graph.checkpointer is None
