"""Multi-hop questions (2–3 hops) through the real store and graph: a scripted model that follows each question's
gold path reaches the gold answer under CoT, ToT (Selection and Score) and GoT, with the agent and with automatic
graph exploration. The questions, paths and graphs are derived from GRBench's templates by
``evals/grbench_multihop.py`` (see evals/data/grbench/PROVENANCE.md); the scripts are written from each entry and
the graph by :func:`kgagents.cli.grounded.gold_path_steps`, nothing per question. Searches on the store from the
entities each question names check how many hops it needs: at least 30 cannot be answered by one."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from functools import cache

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.cli.grounded import gold_path_steps, render_value
from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.grbench import QUESTIONS_DIR
from kgagents.evals.grbench_multihop import answer_nodes, gold_answer, graph_of, load_manifest, stale
from kgagents.graphs.grounded import PAPER_PROTOCOL, compile_graph
from kgagents.graphs.io import final_state
from kgagents.nodes.grounded import GroundedContext
from kgagents.tools.pgraph import open_graph

ENTRIES = load_manifest()
IDS = [e["id"] for e in ENTRIES]
#: The paper's protocol with the packaged embedder (all-mpnet-base-v2 cannot be downloaded here).
PAPER = {**PAPER_PROTOCOL, "embedding_model": "all-MiniLM-L6-v2"}
#: Exploration keeps every neighbour a gold path needs (a paper here has up to 60 authors).
WIDE = {"max_neighbours": 100, "neighbours_shown": 100}
COMBINATIONS = [(strategy, evaluator, interaction) for strategy in ("tot", "got") for evaluator in ("select", "score")
                for interaction in ("agent", "explore")]


def test_the_fixture_is_what_the_script_derives():
    assert stale() == []


def test_the_fixture_has_enough_multi_hop_questions_with_their_provenance():
    assert len(ENTRIES) >= 30 and {len(e["hops"]) for e in ENTRIES} == {2, 3}
    assert Counter(e["domain"] for e in ENTRIES).keys() >= {"dblp", "maple/Physics", "biomedical"}
    grbench = {}
    for path in QUESTIONS_DIR.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                grbench[(path.stem.replace("maple_", "maple/"), str(row["qid"]))] = row
    for entry in ENTRIES:
        assert entry["kind"] in ("question", "rewritten", "template", "composed")
        assert entry["source"]["domain"] == entry["domain"]
        if entry["kind"] == "question":  # GRBench's own question and answer, verbatim
            row = grbench[(entry["domain"], entry["source"]["qid"])]
            assert (entry["question"], entry["answer"]) == (row["question"], row["answer"])
        if entry["kind"] == "rewritten":  # the facts of a GRBench question, asked from one of its entities
            row = grbench[(entry["domain"], entry["source"]["qid"])]
            assert entry["entity"] in row["question"] and entry["question"] != row["question"]


@cache
def _store(folder):
    return open_graph(folder)


def _named_in(question, graph):
    """The nodes a question names: every node whose name occurs in it as words (GRBench's author templates put
    the second title's "?" inside the quotes)."""
    return [n.id for n in graph.iter_nodes()
            if n.name and re.search(r"(?<!\w)" + re.escape(n.name.rstrip("?")) + r"(?!\w)", question)]


def _searches(entry):
    """What one-hop and k-hop searches from the entities the question names find, on the real store: the answer
    nodes, the nodes within one hop (the named ones included), every text those hold, and the nodes within k hops
    (k the path's length)."""
    graph = _store(str(graph_of(entry)))
    named = _named_in(entry["question"], graph)
    answer = answer_nodes(graph, entry)
    one_hop = set(graph.ego_graph(named, radius=1, max_nodes=None).hops)
    texts = {render_value(v) for n in one_hop for value in graph.features(n).values()
             for v in ([value, *value] if isinstance(value, list) else [value])}
    k_hops = set(graph.ego_graph(named, radius=len(entry["hops"]), max_nodes=None).hops)
    return graph, named, answer, one_hop, texts, k_hops


def _one_hop_cannot_answer(entry):
    graph, _, answer, one_hop, texts, _ = _searches(entry)
    names = {render_value(graph.features(n).get(entry["target_feature"])) for n in answer}
    return not (set(answer) & one_hop) and entry["answer"] not in texts and not (names & texts)


def test_at_least_30_questions_cannot_be_answered_by_one_hop_from_the_entities_they_name():
    beyond = [e for e in ENTRIES if _one_hop_cannot_answer(e)]
    assert len(beyond) >= 30
    assert len([e for e in beyond if e["domain"] != "biomedical"]) >= 10  # academic questions too


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_one_hop_from_the_named_entities_cannot_answer_a_multi_hop_question_and_k_hops_can(entry):
    """``named`` and ``hops_needed`` are what searches on the store find; where two or more hops are needed, no
    answer node, name or the answer itself is among the named entities' neighbours and attributes, and a search
    as deep as the path reaches every answer node."""
    graph, named, answer, _, _, k_hops = _searches(entry)
    assert sorted(named) == sorted(entry["named"]) and entry["start"] in named and answer
    assert set(answer) <= k_hops
    needed = next(r for r in range(len(entry["hops"]) + 1)
                  if set(answer) <= set(graph.ego_graph(named, radius=r, max_nodes=None).hops))
    assert needed == entry["hops_needed"] and needed >= 1
    assert _one_hop_cannot_answer(entry) == (needed >= 2)


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_the_gold_path_gives_the_answer_in_the_store(entry):
    graph = open_graph(str(graph_of(entry)))
    assert gold_answer(graph, entry) == entry["answer"]


async def _run(entry, **ctx):
    source = str(graph_of(entry))
    graph = open_graph(source)
    steps = gold_path_steps(entry, graph, interaction=ctx.get("interaction", "agent"),
                            action_format=ctx.get("action_format", "tools"))
    context = GroundedContext(model=ScriptedChatModel(steps=steps), **ctx)
    config = {"configurable": {"thread_id": entry["id"]}, "recursion_limit": context.recursion_limit}
    return await final_state(compile_graph(InMemorySaver()),
                             {"question": entry["question"], "graph": source}, config,
                                                         context=context)


@pytest.mark.slow
@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
async def test_graph_cot_follows_the_gold_path(entry):
    state = await _run(entry, strategy="cot", interaction="agent")
    assert state["final_answer"] == entry["answer"] and state["exit_reason"] == "finished"
    hops_walked = [a for t in state["thoughts"].values() for a in t.get("actions") or []
                   if a["name"] == "NeighbourCheck"]
    assert {a["args"]["neighbor_type"] for a in hops_walked} == set(entry["hops"])


@pytest.mark.slow
@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
async def test_graph_exploration_follows_the_gold_path(entry):
    state = await _run(entry, strategy="cot", interaction="explore", **WIDE)
    assert state["final_answer"] == entry["answer"] and state["exit_reason"] == "finished"
    record = state["thoughts"]["t0.1"]
    assert [d["level"] for d in record["decisions"] if d["stage"] == "end"] == list(range(1, len(entry["hops"]) + 1))
    assert {t[1] for t in record["triples"]} == set(entry["hops"])


#: Every question under one ToT / GoT combination (in turn; every combination under every question with
#: KGAGENTS_FULL_MATRIX=1, about a minute more), with the paper's protocol (text actions, ToT's vote, no answer
#: at the step limit, the domain's definition).
ROTATION = ([(entry, *combination) for entry in ENTRIES for combination in COMBINATIONS]
            if os.environ.get("KGAGENTS_FULL_MATRIX") == "1"
            else [(entry, *COMBINATIONS[i % len(COMBINATIONS)]) for i, entry in enumerate(ENTRIES)])


def test_every_combination_gets_questions_of_several_domains():
    for combination in COMBINATIONS:
        domains = {e["domain"] for e, *c in ROTATION if tuple(c) == combination}
        assert len(domains) >= 2, combination


@pytest.mark.slow
@pytest.mark.parametrize("entry, strategy, evaluator, interaction", ROTATION,
                         ids=[f"{e['id']}-{s}-{v}-{i}" for e, s, v, i in ROTATION])
async def test_tot_and_got_follow_the_gold_path(entry, strategy, evaluator, interaction):
    state = await _run(entry, strategy=strategy, evaluator=evaluator, interaction=interaction, **PAPER, **WIDE)
    assert state["final_answer"] == entry["answer"] and state["exit_reason"] == "finished"
    chain = [state["best"]]
    while state["thoughts"][chain[-1]]["parents"] != ["t0"]:
        chain.append(state["thoughts"][chain[-1]]["parents"][0])
    assert all(t.endswith(".1") for t in chain)  # the gold path is every state's first candidate
    if strategy == "got":
        merges = [t for t in state["thoughts"].values() if t.get("kind") == "merge" and not t.get("error")]
        assert merges and all(m.get("actions") or m.get("decisions") for m in merges)  # grounded like steps


@pytest.mark.slow
def test_kgagents_eval_on_the_multihop_dataset(tmp_path, capsys):
    from kgagents.cli import main
    from kgagents.evals.datasets import load_dataset

    dataset = load_dataset("grbench-multihop", None, split="biomedical")
    assert {i.meta["difficulty"] for i in dataset.items} == {"medium"} and len(dataset.items) == 20
    assert {i.meta["hops_needed"] for i in dataset.items} == {2, 3}
    picked = dataset.items[:3]
    entries = {e["id"]: e for e in ENTRIES}
    graph = open_graph(picked[0].inputs["graph"])
    steps = gold_path_steps([entries[i.id] for i in picked], graph, action_format="text") + [
        {"when": r"Please help me judge", "times": 0, "content": "Yes"}]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    assert main(["eval", "grounded", "--dataset", "grbench-multihop", "--domain", "biomedical", "--ids",
                 *[i.id for i in picked], "--preset", "paper-graph-cot", "--set", "embedding_model=all-MiniLM-L6-v2",
                 "--model", f"scripted:{script}", "--grader-model", f"scripted:{script}", "--out",
                 str(tmp_path / "out"), "--no-progress"]) == 0
    capsys.readouterr()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["rouge_l"] == 100.0 and summary["gpt4score"] == 100.0 and summary["medium: n"] == 3
