"""Multi-hop questions (2–3 hops) through the real store and graph: a scripted model that follows each question's
gold path reaches the gold answer under CoT, ToT (Selection and Score) and GoT, with the agent and with automatic
graph exploration. The questions, paths and graphs are derived from GRBench's templates by
``evals/grbench_multihop.py`` (see evals/data/grbench/PROVENANCE.md); the scripts are written from each entry and
the graph by :func:`kgagents.cli.grounded.gold_path_steps`, nothing per question."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.cli.grounded import gold_path_steps
from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.grbench import QUESTIONS_DIR
from kgagents.evals.grbench_multihop import gold_answer, graph_of, load_manifest, stale
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
        assert entry["kind"] in ("question", "template", "composed") and entry["source"]["domain"] == entry["domain"]
        if entry["kind"] == "question":  # GRBench's own question and answer, verbatim
            row = grbench[(entry["domain"], entry["source"]["qid"])]
            assert (entry["question"], entry["answer"]) == (row["question"], row["answer"])


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
