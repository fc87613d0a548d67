"""Grounded reasoning on the command line, and scripts that follow a question's gold path.

    kgagents demo --workflow grounded [--strategy cot|tot|got] [--interaction agent|explore]
        an offline, scripted run on the GRBench-shaped fixture graph: ToT × agent by default; prints the gold
        answer; ``--strategy got`` merges thoughts, ``--interaction explore`` runs Algorithm 1

:func:`gold_path_steps` writes a scripted chat model's steps for one question of the fixture from its entry (a
one-hop manifest row: start node and gold hop; a multi-hop entry: start node and the path's hops, see
:mod:`kgagents.evals.grbench_multihop`) and the graph: the first candidate of every state walks the gold path, and each
of its steps is conditioned on the observations the real store gave the previous one, so the script only gets to the
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

from kgagents.cli.common import _run, demo_intro, demo_model, demo_outro
from kgagents.evals.grbench_multihop import answer_nodes, levels_of
from kgagents.tools.pgraph import StaticKG, open_graph

DEMO_DOMAIN = "dblp"
DEMO_QID = "0"


def render_value(value: Any) -> str:
    """A feature value as an answer: list items joined by ", ", booleans and null as JSON, the rest as text."""
    if isinstance(value, list):
        return ", ".join(render_value(v) for v in value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return str(value)


def gold_path(row: dict[str, Any]) -> dict[str, Any]:
    """A fixture question as a path (see :mod:`kgagents.evals.grbench_multihop`): a multi-hop entry as it is; a one-hop
    manifest row's relation hop as a one-hop path, its feature hop as the start node's ``feature``."""
    if "hops" in row:
        return row
    hop = row["hop"]
    if "relation" in hop:
        return {**row, "hops": [hop["relation"]], "answer_at": 1, "reaches": None, "count": False,
                "target_feature": hop.get("target_feature", "name")}
    return {**row, "hops": [], "answer_at": 0, "reaches": None, "count": False, "feature": hop["feature"]}


def gold_answer(row: dict[str, Any], graph: StaticKG) -> str:
    """The answer a question's gold path leads to in the graph: the names (or the target feature) of the nodes
    it reaches, in edge order, or how many they are, or the start node's feature."""
    path = gold_path(row)
    if path.get("feature"):
        return render_value(graph.feature(path["start"], path["feature"]))
    nodes = answer_nodes(graph, path)
    if path.get("count"):
        return str(len(nodes))
    feature = path.get("target_feature") or "name"
    return ", ".join(render_value(graph.features(e).get(feature, graph.display_name(e))) for e in nodes)


def _s(when: str, **reply: Any) -> dict[str, Any]:
    return {"when": when, "times": 0, **reply}


def _act(calls: list[tuple[str, dict[str, Any]]], action_format: str) -> dict[str, Any]:
    """A scripted action reply: tool calls, or Graph-CoT's text protocol (``Function[args], ...``)."""
    if action_format == "text":
        return {"content": ", ".join(f"{name}[{', '.join(str(v) for v in args.values())}]" for name, args in calls)}
    return {"tool_calls": [{"name": name, "args": args} for name, args in calls]}


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i:i + size] for i in range(0, len(items), size)] or [[]]


def _agent_steps(row: dict[str, Any], graph: StaticKG, action_format: str = "tools",
                 max_actions: int = 20) -> list[dict[str, Any]]:
    """The gold path as the agent walks it: RetrieveNode, one step of NeighbourCheck calls per hop (at most
    ``max_actions`` calls a step), the answer nodes' names (or the start's feature), Finish. Each step's prompts
    must show the observations the store gave the step before."""
    path = gold_path(row)
    start, entity = path["start"], path["entity"]
    # every step names its question, so one script serves many questions at once
    question = ".*" + re.escape(f"<question>{path['question'].strip()}</question>")
    steps: list[dict[str, Any]] = []
    shown: list[str] = []  # what the previous step's observations must have said (first and last)

    def add(thought: str, calls: list[tuple[str, dict[str, Any]]], observations: list[str]) -> None:
        nonlocal shown
        number = len(steps) // 2 + 1
        head = rf"\[stage: agent {{}}, step {number}, candidate 1 " + question + "".join(f".*{a}" for a in shown)
        steps.append(_s(head.format("thought"), content=thought))
        steps.append(_s(head.format("action") + ".*" + re.escape(f"Thought {number}: {thought}"),
                        **_act(calls, action_format)))
        shown = [re.escape(o[:160]) for o in dict.fromkeys([observations[0], observations[-1]])]

    add(f"I need the node of {entity}.", [("RetrieveNode", {"keyword": entity})],
        [f"The ID of this retrieval target node is {start}."])
    levels = levels_of(graph, path)
    for i, relation in enumerate(path["hops"]):
        for chunk in _chunks(levels[i], max_actions):
            add(f"Its {relation} neighbours lead on.",
                [("NeighbourCheck", {"node_id": x, "neighbor_type": relation}) for x in chunk],
                [f"The {relation} neighbors of {x} are: {json.dumps(graph.neighbours(x, relation))}." for x in chunk])
    if path.get("feature"):
        feature = path["feature"]
        add(f"Its {feature} answers it.", [("NodeFeature", {"node_id": start, "feature": feature})],
            [f"The {feature} feature of {start} is: "])
    elif not path.get("count"):
        feature = path.get("target_feature") or "name"
        for chunk in _chunks(answer_nodes(graph, path), max_actions):
            add(f"I need their {feature}.", [("NodeFeature", {"node_id": e, "feature": feature}) for e in chunk],
                [f"The {feature} feature of {e} is: " for e in chunk])
    add("Now I know the answer.", [("Finish", {"answer": gold_answer(row, graph)})], ["Finish"])
    return steps


def _name(graph: StaticKG, node_id: str) -> str:
    """A node's name as exploration writes it (entities, head entities, triples)."""
    node = graph.node(node_id)
    return node.name if node is not None else node_id


def _explore_steps(row: dict[str, Any], graph: StaticKG) -> list[dict[str, Any]]:
    """The gold path as automatic graph exploration walks it: a thought naming the start entity, its extraction,
    then at each BFS level the hop's relation and every tail kept, until End? sees the last hop's triples (or the
    start's feature)."""
    path = gold_path(row)
    start = path["start"]
    name = _name(graph, start)
    question = ".*" + re.escape(f"<question>{path['question'].strip()}</question>")
    hops = path["hops"]
    wanted = hops[0] if hops else path["feature"]
    steps = [
        _s(r"\[stage: search thought, step 1, candidate 1 " + question,
           content=f"I need {name} and where its {wanted} leads."),
        _s(r"\[stage: entity extraction\].*" + re.escape(f"I need {name} and where its"),
           structured={"entities": [name]}),
    ]
    levels = levels_of(graph, path)
    for i, relation in enumerate(hops):
        for x in levels[i]:
            head = question + ".*" + re.escape(f"<head_entity>{_name(graph, x)}</head_entity>")
            steps += [_s(r"\[stage: prune relations\]" + head, structured={"relations": [relation]}),
                      _s(r"\[stage: prune entities\]" + head + ".*" + re.escape(f"<relation>{relation}</relation>"),
                         structured={"entities": list(dict.fromkeys(graph.neighbours(x, relation)))})]
    if hops:
        last = re.escape(f"{_name(graph, levels[len(hops) - 1][0])} -> {hops[-1]} -> ")
    else:
        last = re.escape(f"{name} — {path['feature']}: ")
        steps.append(_s(r"\[stage: search attributes\]" + question + ".*" + re.escape(f"<entity>{name}</entity>"),
                        structured={"attributes": [path["feature"]]}))
    steps += [_s(r"\[stage: search end\]" + question + ".*" + last,
                 structured={"sufficient": True, "reason": "the path is complete"}),
              _s(r"\[stage: search end\]" + question, structured={"sufficient": False, "reason": "go on"}),
              _s(r"\[stage: final answer\]" + question, structured={"answer": gold_answer(row, graph)})]
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
                    interaction: str = "agent", action_format: str = "tools",
                    max_actions: int = 20) -> list[dict[str, Any]]:
    """A scripted model's steps for fixture questions, one-hop manifest rows or multi-hop entries (see the module
    docstring): each question's gold path, then :data:`GENERIC_STEPS` for every other decision (one script can
    serve several questions). The agent's actions are tool calls or text actions (``action_format``), at most
    ``max_actions`` a step, as the run's context says."""
    rows = [rows] if isinstance(rows, dict) else rows
    graphs = [graphs] * len(rows) if not isinstance(graphs, list) else graphs
    steps: list[dict[str, Any]] = []
    for row, graph in zip(rows, graphs, strict=True):
        steps += (_agent_steps(row, graph, action_format, max_actions) if interaction == "agent"
                  else _explore_steps(row, graph))
    return steps + GENERIC_STEPS


def run_demo(args: argparse.Namespace) -> int:
    """``kgagents demo --workflow grounded``: a fixture question through the real graph, scripted."""
    from kgagents.cli.report import format_grounded
    from kgagents.evals.grbench import fixture_graph, fixture_questions
    from kgagents.nodes.grounded import GroundedContext

    strategy = getattr(args, "strategy", None) or "tot"
    interaction = getattr(args, "interaction", None) or "agent"
    row = next(r for r in fixture_questions(DEMO_DOMAIN) if r["qid"] == DEMO_QID)
    source = fixture_graph(DEMO_DOMAIN)
    label = {"cot": "CoT", "tot": "ToT", "got": "GoT"}.get(strategy, strategy)
    demo_intro(f"Scripted demo: GRBench DBLP question {DEMO_QID} on the GRBench-shaped fixture graph, "
               f"Graph-{label} × {interaction}, through the real grounded graph, static-KG store and SQLite "
               "checkpoints with a scripted chat model (no LLM is called).", row["question"])
    with tempfile.TemporaryDirectory(prefix="kgagents-demo-") as tmp:
        graph = open_graph(source)
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps({"name": "grounded-demo",
                                      "steps": gold_path_steps(row, graph, interaction=interaction)}),
                          encoding="utf-8")
        values = {"model": f"scripted:{script}", "strategy": strategy, "interaction": interaction}
        ctx = GroundedContext.from_mapping({**values, "model": demo_model(script)})
        thread_id, state = _run("grounded", args, {"question": row["question"], "graph": str(source)}, None,
                                values, context_override=ctx)
        if not getattr(args, "quiet", False):
            print("\n".join(format_grounded(state)), file=sys.stderr)
        print(state.get("final_answer", "(no answer)"))
    demo_outro(thread_id, picture=True)
    return 0
