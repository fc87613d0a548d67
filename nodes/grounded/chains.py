"""Chains of the thought graph: a state's chain (the thought and its ancestors), the order a chain is told in,
the scratchpad the prompts show, and a branch's task."""

from __future__ import annotations

import re
from typing import Any

from kgagents.nodes.grounded.context import GroundedContext
from kgagents.nodes.grounded.state import ROOT, GroundedState, StepTask, Thought


def chain_of(thoughts: dict[str, Thought], leaf: str) -> list[Thought]:
    """The state ending in ``leaf``: the thought and its ancestors (both parents of merges), root excluded,
    ordered by depth."""
    seen: dict[str, Thought] = {}
    stack = [leaf]
    while stack:
        current = stack.pop()
        if current in seen or current == ROOT or current not in thoughts:
            continue
        seen[current] = thoughts[current]
        stack.extend(thoughts[current].get("parents", []))
    return ordered(seen.values())


def ordered(thoughts: Any) -> list[Thought]:
    """Thoughts by depth, steps (by id) before merges: the order a chain is told in."""
    return sorted(thoughts, key=lambda t: (t.get("depth", 0), t.get("kind") == "merge", _id_key(t["id"])))


def _id_key(thought_id: str) -> tuple[Any, ...]:
    """``t0.2.10`` after ``t0.2.9``: ids compare by their numbers."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.]", thought_id))


def render_chain(chain: list[Thought], *, numbered: bool = True) -> str:
    """A chain as the scratchpad the prompts show: thoughts with their actions/observations or triples."""
    if not chain:
        return "(no steps yet)"
    lines = []
    for i, t in enumerate(chain, 1):
        label = f"Thought {i}" if numbered else "Thought"
        merged = " (merged)" if t.get("kind") == "merge" else ""
        lines.append(f"{label}{merged}: {t.get('thought', '')}")
        actions = t.get("actions") or []
        if actions:  # the step's calls on one line, as the text protocol writes them; an observation per call
            lines.append(f"Action {i}: " + ", ".join(_written(a) for a in actions))
        for j, action in enumerate(actions):
            lines.append(f"Observation {i}{'.' + str(j + 1) if len(actions) > 1 else ''}: "
                         f"{action.get('observation', '')}")
        if t.get("observation") and not t.get("actions"):
            lines.append(f"Observation {i}: {t['observation']}")
        for h, r, tail in t.get("triples") or []:
            lines.append(f"  Triple: {h} -> {r} -> {tail}")
        for attribute in t.get("attributes") or []:
            lines.append(f"  Attribute: {attribute}")
        if t.get("error"):
            lines.append(f"  (failed: {t['error']})")
    return "\n".join(lines)


def _written(action: dict[str, Any]) -> str:
    """A call as the text protocol writes it (an unreadable one as the model wrote it)."""
    return action.get("written") or (
        f"{action['name']}[{', '.join(str(v) for v in action.get('args', {}).values())}]")


def _triples_of(chain: list[Thought]) -> str:
    triples = [f"{h} -> {r} -> {t}" for th in chain for h, r, t in th.get("triples") or []]
    return "\n".join(dict.fromkeys(triples)) or "(none)"


def _attributes_of(chain: list[Thought]) -> str:
    return "\n".join(dict.fromkeys(a for th in chain for a in th.get("attributes") or [])) or "(none)"


def _thoughts_of(chain: list[Thought]) -> str:
    return "\n".join(f"Thought {i}: {t.get('thought', '')}" for i, t in enumerate(chain, 1)) or "(none)"


def _visited_of(chain: list[Thought]) -> set[str]:
    return {v for t in chain for v in t.get("visited") or []}


def task_of(state: GroundedState, thought_id: str, depth: int, parents: list[str], chain: list[Thought],
            chain_2: list[Thought] | None = None) -> StepTask:
    """A branch's task: the run's question, graph, definition and domain, and the thought it makes or
    judges."""
    return StepTask(question=state["question"], graph_ref=state["graph_ref"],
                    graph_definition=state.get("graph_definition", ""),
                    domain=state.get("domain") or "generic", id=thought_id, depth=depth, parents=parents,
                    chain=chain, chain_2=chain_2 or [])


def _candidate(task: StepTask, ctx: GroundedContext) -> str:
    """``j of k``: which of its state's candidates this step is (the last part of its id); a merge says so."""
    if len(task["parents"]) > 1:
        return "merge of " + " + ".join(task["parents"])
    return f"{task['id'].rsplit('.', 1)[-1]} of {ctx.width[0]}"
