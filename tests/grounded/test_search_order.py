"""ToT's breadth-first order and its evaluator's calls, Graph-RAG's neighbour listing and the RAG rows' paper
preset: ties go to the better parent's children, no score is asked when one candidate is left, each neighbour is
listed once, and ``--preset paper-text-rag`` / ``paper-graph-rag`` name the paper's retriever."""

from __future__ import annotations

import pytest

from kgagents.graphs.kg_rag import graph_rag, text_rag
from kgagents.nodes.kg_rag import KGRagContext, node_context
from kgagents.tools.pgraph import open_graph, resolve
from tests.grounded.conftest import step
from tests.grounded.test_graph import run


def _retrieve(keyword: str) -> list[dict]:
    return [{"name": "RetrieveNode", "args": {"keyword": keyword}}]


def _score(state: str, score: float) -> dict:
    return step(rf"\[stage: score vote, state {state}\]", times=0, structured={"score": score})


async def test_tied_candidates_are_kept_in_the_order_of_their_parents_rank(academic):
    """Depth 1 ranks t0.2 above t0.1; at depth 2 every candidate scores the same, so the kept states are t0.2's
    children (BFS from the ranked frontier), not t0.1's (the smaller ids)."""
    steps = [
        step(r"\[stage: agent thought, step 1, candidate 1 ", times=0, content="Look at the venue."),
        step(r"\[stage: agent thought, step 1, candidate 2 ", times=0, content="Find the paper."),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Look at", times=0, tool_calls=_retrieve("KDD")),
        step(r"\[stage: agent action, step 1\b", times=0, tool_calls=_retrieve("Deep Graphs")),
        _score("t0.1", 0.2), _score("t0.2", 0.9),
        step(r"\[stage: agent thought, step 2\b", times=0, content="Go on."),
        step(r"\[stage: agent action, step 2\b", times=0, tool_calls=_retrieve("Ann Lee")),
        _score(r"t0\.\d\.\d", 0.5),
        step(r"\[stage: final answer\]", times=0, structured={"answer": "Ann Lee"}),
    ]
    state, _, _ = await run(academic, steps, strategy="tot", evaluator="score", branching=2, keep=2, max_depth=2)
    first, second = state["selections"]
    assert first["kept"] == ["t0.2", "t0.1"]
    assert second["candidates"] == ["t0.2.1", "t0.2.2", "t0.1.1", "t0.1.2"]
    assert second["kept"] == ["t0.2.1", "t0.2.2"] and state["best"] == "t0.2.1"


async def test_no_score_is_asked_when_one_candidate_is_left(academic):
    """k = t = 1 under the Score evaluator: each depth has one candidate, kept without a score (a score call would
    find no script step and be logged as a failure)."""
    steps = [
        step(r"\[stage: agent thought, step 1\b", content="Find the paper."),
        step(r"\[stage: agent action, step 1\b", tool_calls=_retrieve("Deep Graphs")),
        step(r"\[stage: agent thought, step 2\b", content="Finish."),
        step(r"\[stage: agent action, step 2\b", tool_calls=[{"name": "Finish", "args": {"answer": "Ann Lee"}}]),
    ]
    state, model, nodes = await run(academic, steps, strategy="tot", evaluator="score", branching=1, keep=1,
                                    max_depth=3)
    assert state["final_answer"] == "Ann Lee"
    assert not any("score vote" in call for call in model.calls)
    assert "score_state" not in nodes and not state.get("failures")
    assert [s["reason"] for s in state["selections"]] == ["one candidate: no evaluation needed"] * 2


def test_graph_rag_lists_each_neighbour_once(academic):
    """The academic graph lists every neighbour at both ends (a paper's authors, each author's papers): the paper's
    context names each author and the venue once."""
    graph = open_graph(resolve(academic))
    text = node_context(graph, "p1", hops=1, per_relation=20)
    assert text.count("Ann Lee") == 1 and text.count("Bo Chen") == 1 and text.count("KDD") == 1
    assert "→ author: Ann Lee [a1]; Bo Chen [a2]" in text and "←" not in text
    # an incoming edge whose neighbour is not listed the other way is still shown
    author = node_context(graph, "a2", hops=1, per_relation=20)
    assert author.count("Deep Graphs") == 1 and author.count("Shallow Nets") == 1


def test_graph_rag_lists_incoming_only_neighbours(tmp_path):
    from kgagents.tools.pgraph.build import GraphBuilder

    b = GraphBuilder(tmp_path / "cites")
    for node in ("p1", "p2", "p3"):
        b.add_node(node, type="paper", name=f"Paper {node[-1]}")
    b.add_edge("p1", "cites", "p2")
    b.add_edge("p3", "cites", "p1")
    b.finish(name="cites", fingerprint="cc" * 8, source={"path": "test"})
    text = node_context(open_graph(resolve(str(tmp_path / "cites"))), "p1", hops=1, per_relation=20)
    assert "→ cites: Paper 2 [p2]" in text and "← cites: Paper 3 [p3]" in text


@pytest.mark.parametrize("workflow", [text_rag, graph_rag])
def test_the_rag_rows_have_a_paper_preset_with_the_paper_s_retriever(workflow):
    values = workflow.preset(f"paper-{workflow.name}")
    assert values["embedding_model"] == "all-mpnet-base-v2" and values["vector_index"] == "exact"
    assert KGRagContext(**values).embedding_model == "all-mpnet-base-v2"
