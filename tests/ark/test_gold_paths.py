"""A scripted model that follows each question's gold reasoning path gets every gold triple retrieved and
selected through the real store and graph, on the real CR-LT subgraphs.

The script of each question is derived here from its CoLoTa gold triples and its subgraph: one reasoning step
per (head, relation) of the gold triples, in order, selecting the keys the store gives those triples. Nothing is
written per question.
"""

from __future__ import annotations

import re

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.cli.report import format_run
from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.colota import KGQAQuestion, load_cr_lt, resolve_gold_triples
from kgagents.graphs.ark import compile_graph
from kgagents.graphs.io import final_state
from kgagents.nodes.ark import ArkContext
from kgagents.tools.pgraph import StaticKG, graph_from_edges
from tests.ark import script as S

QUESTIONS = load_cr_lt()
FOLLOWABLE = [q for q in QUESTIONS if q.gold_triples and all(t.found for t in resolve_gold_triples(q))]


def test_enough_questions_have_a_gold_path_in_their_subgraph():
    assert len(QUESTIONS) == 200
    assert len(FOLLOWABLE) >= 10
    # the resolver splits on the graph's own names, so commas inside values do not break it
    s1 = next(q for q in QUESTIONS if q.id == "S1")
    first = resolve_gold_triples(s1)[0]
    assert (first.head, first.relation, first.tail) == ("Horsens", "population", "+59449")


def gold_script(question: KGQAQuestion, graph: StaticKG) -> tuple[list[dict], list[tuple[str, str, str, str]]]:
    """The scripted steps that walk the gold path, and the gold triples as (head, relation, tail, key)."""
    gold = resolve_gold_triples(question)
    groups = list(dict.fromkeys((t.head, t.relation) for t in gold))
    expected, steps = [], []
    for i, (head, relation) in enumerate(groups):
        keys = []
        for t in gold:
            if (t.head, t.relation) == (head, relation):
                key = next(e.key for e in graph.triples(head, relation) if e.tail == t.tail)
                keys.append(key)
                expected.append((head, relation, t.tail, key))
        last = i == len(groups) - 1
        summary = S.quoted(head) if i == 0 else rf"Summary of the {i} reasoning step\(s\)"
        steps += S.anchor(head, context=re.escape(question.question[:40]) if i == 0 else summary)
        steps += S.relation(relation, context=re.escape(f'The anchor entity "{head}" is in the knowledge graph'))
        steps += S.reasoning(list(dict.fromkeys(keys)), f"{head} / {relation}: gold facts.", not last,
                             context=re.escape(f'triple(s) of "{head}" / "{relation}"'))
    steps += S.final(question.answer)
    return steps, expected


@pytest.mark.slow
@pytest.mark.parametrize("question", FOLLOWABLE, ids=[q.id for q in FOLLOWABLE])
async def test_the_gold_path_is_retrieved_and_selected(question):
    graph = graph_from_edges(question.graph)
    steps, expected = gold_script(question, graph)
    model = ScriptedChatModel(steps=steps)
    compiled = compile_graph(InMemorySaver())
    config = {"configurable": {"thread_id": question.id}, "recursion_limit": 500}
    task = {"question": question.question, "question_id": question.id, "question_type": "yes_no",
            "kg_file": question.graph_file, "kg_id": question.id}
    state = await final_state(compiled, task, config, context=ArkContext(model=model))

    assert state["answer"] is question.answer
    assert all(a["valid"] for a in state["attempts"]), state["attempts"]
    assert state["exit_reason"] == "the model stopped exploring"
    assert not model.remaining(), "every scripted step was used"
    for head, relation, tail, key in expected:
        step = next(s for s in state["steps"] if (s["anchor"], s["relation"]) == (head, relation))
        assert key in [t["key"] for t in step["retrieved"]]
        assert (key, tail) in [(t["key"], t["tail"]) for t in step["selected"]]
    trace = format_run("ark", question.id, state)
    for head, relation, tail, key in expected:
        assert f"[{key}] ({head}, {relation}, {tail})" in trace
    assert f"Answer: {question.answer}" in trace
