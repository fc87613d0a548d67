"""A scripted model that follows each question's gold path through the real store and graph reaches the gold
answer, on the GRBench-shaped fixture graphs (real GRBench questions and answers; see
evals/data/grbench/PROVENANCE.md). The scripts are written from each question's manifest entry and the graph by
:func:`kgagents.cli.grounded.gold_path_steps`; every step of the gold path is conditioned on what the store
returned for the previous one."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.cli.grounded import gold_answer, gold_path_steps
from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.grbench import fixture_graph, fixture_questions
from kgagents.graphs.grounded import compile_graph
from kgagents.graphs.io import final_state
from kgagents.nodes.grounded import GroundedContext
from kgagents.tools.pgraph import open_graph

ROWS = fixture_questions()
#: Every domain, every template: 3 questions per (domain, template) for the agent, 1 for exploration.
AGENT_ROWS = [r for r in ROWS if int(r["qid"]) % 10 < 3]
EXPLORE_ROWS = [r for r in ROWS if int(r["qid"]) % 10 == 5]


def test_the_fixture_covers_enough_questions():
    assert len(AGENT_ROWS) >= 60 and len({r["domain"] for r in AGENT_ROWS}) >= 4
    assert len(EXPLORE_ROWS) >= 20


async def _run(row, **ctx):
    source = str(fixture_graph(row["domain"]))
    graph = open_graph(source)
    interaction = ctx.get("interaction", "agent")
    model = ScriptedChatModel(steps=gold_path_steps(row, graph, interaction=interaction,
                                                    action_format=ctx.get("action_format", "tools")))
    context = GroundedContext(model=model, **ctx)
    config = {"configurable": {"thread_id": row["qid"]}, "recursion_limit": context.recursion_limit}
    state = await final_state(compile_graph(InMemorySaver()),
                              {"question": row["question"], "graph": source}, config,
                                                          context=context)
    return state, graph


@pytest.mark.parametrize("row", AGENT_ROWS, ids=[f"{r['domain']}-{r['qid']}" for r in AGENT_ROWS])
async def test_graph_cot_agent_follows_the_gold_path(row):
    state, graph = await _run(row, strategy="cot", interaction="agent")
    assert gold_answer(row, graph) == row["answer"]  # the graph holds the question's gold fact
    assert state["final_answer"] == row["answer"] and state["exit_reason"] == "finished"


TEXT_ROWS = [r for r in ROWS if int(r["qid"]) % 10 == 1]


@pytest.mark.parametrize("row", TEXT_ROWS, ids=[f"{r['domain']}-{r['qid']}" for r in TEXT_ROWS])
async def test_graph_cot_agent_with_text_actions_follows_the_gold_path(row):
    state, _ = await _run(row, strategy="cot", interaction="agent", action_format="text")
    assert state["final_answer"] == row["answer"] and state["exit_reason"] == "finished"
    assert all(t.get("action_text") for t in state["thoughts"].values() if t["id"] != "t0")


@pytest.mark.parametrize("row", EXPLORE_ROWS, ids=[f"{r['domain']}-{r['qid']}" for r in EXPLORE_ROWS])
async def test_graph_exploration_finds_the_gold_fact(row):
    state, _ = await _run(row, strategy="cot", interaction="explore", max_neighbours=50)
    assert state["final_answer"] == row["answer"]
    record = state["thoughts"]["t0.1"]
    assert record["linked"] and record["finished"]
    if "relation" in row["hop"]:
        assert {t[1] for t in record["triples"]} == {row["hop"]["relation"]}
    else:
        assert any(f"— {row['hop']['feature']}: " in a for a in record["attributes"])


@pytest.mark.slow
@pytest.mark.parametrize("strategy, evaluator, interaction", [
    ("tot", "select", "agent"), ("tot", "score", "agent"), ("got", "select", "agent"), ("got", "score", "agent"),
    ("tot", "select", "explore"), ("got", "score", "explore")])
async def test_tot_and_got_reach_the_gold_answer(strategy, evaluator, interaction):
    row = next(r for r in ROWS if r["domain"] == "dblp" and r["qid"] == "0")
    state, _ = await _run(row, strategy=strategy, interaction=interaction, evaluator=evaluator, max_neighbours=50)
    assert state["final_answer"] == row["answer"] and state["exit_reason"] == "finished"
    # the gold path is the first candidate's chain
    assert state["best"] == ("t0.1.1.1.1" if interaction == "agent" else "t0.1")
    if strategy == "got":
        assert any(t.get("kind") == "merge" for t in state["thoughts"].values())
