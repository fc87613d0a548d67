"""Grounded reasoning on the command line, and scripts that follow a question's gold path.

    kgagents demo --workflow grounded [--strategy cot|tot|got] [--interaction agent|explore]
        an offline, scripted run on the GRBench-shaped fixture graph: ToT × agent by default; prints the gold
        answer; ``--strategy got`` merges thoughts, ``--interaction explore`` runs Algorithm 1

:func:`gold_path_steps` writes a scripted chat model's steps for one question of the fixture from its manifest
entry (start node and gold hop) and the graph: the first candidate of every state walks the gold path, and each of
its steps is conditioned on the observation the real store gave the previous one, so the script only gets to the
answer if the store and the workflow behave; the other candidates wander. Nothing is written per question.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from tools.pgraph import StaticKG

DEMO_DOMAIN = "dblp"
DEMO_QID = "0"


def render_value(value: Any) -> str:
    """A feature value as an answer: list items joined by ", ", booleans and null as JSON, the rest as text."""
    if isinstance(value, list):
        return ", ".join(render_value(v) for v in value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return str(value)


def gold_answer(row: dict[str, Any], graph: StaticKG) -> str:
    """The answer the gold hop leads to in the graph: the neighbours' names (in edge order) or the feature."""
    hop = row["hop"]
    if "relation" in hop:
        feature = hop.get("target_feature", "name")
        ends = graph.neighbours(row["start"], hop["relation"])
        return ", ".join(render_value(graph.features(e).get(feature, graph.node(e).name if graph.node(e) else e))
                         for e in ends)
    return render_value(graph.feature(row["start"], hop["feature"]))


def _s(when: str, **reply: Any) -> dict[str, Any]:
    return {"when": when, "times": 0, **reply}


def _act(calls: list[tuple[str, dict[str, Any]]], action_format: str) -> dict[str, Any]:
    """A scripted action reply: tool calls, or Graph-CoT's text protocol (``Function[args], ...``)."""
    if action_format == "text":
        return {"content": ", ".join(f"{name}[{', '.join(str(v) for v in args.values())}]" for name, args in calls)}
    return {"tool_calls": [{"name": name, "args": args} for name, args in calls]}


def _agent_steps(row: dict[str, Any], graph: StaticKG, action_format: str = "tools") -> list[dict[str, Any]]:
    start, hop, entity = row["start"], row["hop"], row["entity"]
    # every step names its question, so one script serves many questions at once
    question = ".*" + re.escape(f"<question>{row['question'].strip()}</question>")

    def gold(stage: str, step: int, *after: str) -> str:
        return rf"\[stage: agent {stage}, step {step}, candidate 1 " + question + "".join(f".*{a}" for a in after)

    steps = [
        _s(gold("thought", 1), content=f"I need the node of {entity}."),
        _s(gold("action", 1, "Thought 1: I need the node of"), **_act([("RetrieveNode", {"keyword": entity})],
                                                                    action_format)),
    ]
    found = re.escape(f"The ID of this retrieval target node is {start}.")
    if "relation" in hop:
        relation, feature = hop["relation"], hop.get("target_feature", "name")
        ends = graph.neighbours(start, relation)
        listed = re.escape(f"The {relation} neighbors of {start} are: {json.dumps(ends)}.")
        names = [f"The {re.escape(feature)} feature of {re.escape(e)} is: " for e in ends]
        steps += [
            _s(gold("thought", 2, found), content=f"Its {relation} neighbours answer it."),
            _s(gold("action", 2, found, "Thought 2: Its"),
               **_act([("NeighbourCheck", {"node_id": start, "neighbor_type": relation})], action_format)),
            _s(gold("thought", 3, listed), content=f"I need their {feature}."),
            _s(gold("action", 3, listed, "Thought 3: I need their"),
               **_act([("NodeFeature", {"node_id": e, "feature": feature}) for e in ends], action_format)),
            _s(gold("thought", 4, *names), content="Now I know the answer."),
            _s(gold("action", 4, *names, "Thought 4: Now I know"),
               **_act([("Finish", {"answer": gold_answer(row, graph)})], action_format)),
        ]
    else:
        feature = hop["feature"]
        shown = re.escape(f"The {feature} feature of {start} is: ")
        steps += [
            _s(gold("thought", 2, found), content=f"Its {feature} answers it."),
            _s(gold("action", 2, found, "Thought 2: Its"),
               **_act([("NodeFeature", {"node_id": start, "feature": feature})], action_format)),
            _s(gold("thought", 3, shown), content="Now I know the answer."),
            _s(gold("action", 3, shown, "Thought 3: Now I know"),
               **_act([("Finish", {"answer": gold_answer(row, graph)})], action_format)),
        ]
    return steps


def _explore_steps(row: dict[str, Any], graph: StaticKG) -> list[dict[str, Any]]:
    start, hop, entity = row["start"], row["hop"], row["entity"]
    node = graph.node(start)
    name = node.name if node is not None else entity
    wanted = hop.get("relation") or hop.get("feature")
    question = ".*" + re.escape(f"<question>{row['question'].strip()}</question>")
    head = ".*" + re.escape(f"<head_entity>{name}</head_entity>")
    steps = [
        _s(r"\[stage: search thought, step 1, candidate 1 " + question, content=f"I need {name} and its {wanted}."),
        _s(r"\[stage: entity extraction\].*" + re.escape(f"I need {name} and its"), structured={"entities": [name]}),
    ]
    if "relation" in hop:
        ends = graph.neighbours(start, hop["relation"])
        labels = [graph.node(e).name for e in dict.fromkeys(ends)]  # type: ignore[union-attr]
        steps += [
            _s(r"\[stage: prune relations\]" + head, structured={"relations": [hop["relation"]]}),
            _s(r"\[stage: prune entities\]" + head + ".*" + re.escape(f"<relation>{hop['relation']}</relation>"),
               structured={"entities": labels}),
        ]
    else:
        steps += [_s(r"\[stage: search attributes\]" + ".*" + re.escape(f"<entity>{name}</entity>"),
                     structured={"attributes": [hop["feature"]]})]
    steps += [_s(r"\[stage: final answer\]" + question, structured={"answer": gold_answer(row, graph)})]
    return steps


#: What every other decision gets: votes that prefer the first choice (the gold chain), scores that prefer
#: chains that followed the graph, GoT's merge thoughts, wandering candidates, exploration's defaults, and
#: GPT4Score's judgement (the judge sees the gold answer).
GENERIC_STEPS: list[dict[str, Any]] = [
    _s(r"\[stage: selection vote", structured={"analysis": "the first choice follows the question's entity",
                                               "best": [1, 2, 3]}),
    _s(r"\[stage: score vote.*(Its |Triple: )", structured={"score": 0.9}),
    _s(r"\[stage: score vote", structured={"score": 0.2}),
    _s(r"\[stage: merge thoughts", content="Both chains start from the question's entity; keep following it."),
    _s(r"\[stage: agent thought", content="Maybe how connected the question's entity is matters."),
    _s(r"\[stage: agent action", tool_calls=[{"name": "RetrieveNode", "args": {"keyword": "the question's entity"}}]),
    _s(r"\[stage: search thought", content="Something else may matter."),
    _s(r"\[stage: entity extraction\]", structured={"entities": []}),
    _s(r"\[stage: search attributes\]", structured={"attributes": []}),
    _s(r"\[stage: prune relations\]", structured={"relations": []}),
    _s(r"\[stage: prune entities\]", structured={"entities": []}),
    _s(r"\[stage: search end\]", structured={"sufficient": True, "reason": "nothing more to find"}),
    _s(r"\[stage: final answer\]", structured={"answer": "unknown"}),
    _s(r"Please help me judge if the model prediction is correct", content="Yes"),
]


def gold_path_steps(rows: list[dict[str, Any]] | dict[str, Any], graphs: list[StaticKG] | StaticKG, *,
                    interaction: str = "agent", action_format: str = "tools") -> list[dict[str, Any]]:
    """A scripted model's steps for fixture questions (see the module docstring): each question's gold path, then
    :data:`GENERIC_STEPS` for every other decision (one script can serve several questions). The agent's actions
    are tool calls or text actions (``action_format``, as the run's context says)."""
    rows = [rows] if isinstance(rows, dict) else rows
    graphs = [graphs] * len(rows) if not isinstance(graphs, list) else graphs
    steps: list[dict[str, Any]] = []
    for row, graph in zip(rows, graphs):
        steps += _agent_steps(row, graph, action_format) if interaction == "agent" else _explore_steps(row, graph)
    return steps + GENERIC_STEPS


def run_demo(args: argparse.Namespace) -> int:
    """``kgagents demo --workflow grounded``: a fixture question through the real graph, scripted."""
    from evals.grbench import fixture_graph, fixture_questions
    from kgagents.cli import _run
    from kgagents.report import format_grounded
    from nodes.grounded import GroundedContext
    from tools.pgraph import open_graph

    strategy = getattr(args, "strategy", None) or "tot"
    interaction = getattr(args, "interaction", None) or "agent"
    row = next(r for r in fixture_questions(DEMO_DOMAIN) if r["qid"] == DEMO_QID)
    source = fixture_graph(DEMO_DOMAIN)
    label = {"cot": "CoT", "tot": "ToT", "got": "GoT"}.get(strategy, strategy)
    print(f"Scripted demo: GRBench DBLP question {DEMO_QID} on the GRBench-shaped fixture graph, Graph-{label} × "
          f"{interaction}, through the real grounded graph, static-KG store and SQLite checkpoints with a scripted "
          "chat model (no LLM is called).", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="kgagents-demo-") as tmp:
        graph = open_graph(source)
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps({"name": "grounded-demo",
                                      "steps": gold_path_steps(row, graph, interaction=interaction)}),
                          encoding="utf-8")
        values = {"model": f"scripted:{script}", "strategy": strategy, "interaction": interaction}
        args.runs_dir = args.runs_dir or tmp
        ctx = GroundedContext.from_mapping(values)
        _, state = _run("grounded", args, {"question": row["question"], "graph": str(source)}, None, values,
                        context_override=ctx)
        if not getattr(args, "quiet", False):
            print("\n".join(format_grounded(state)), file=sys.stderr)
        print(state.get("final_answer", "(no answer)"))
    return 0
