"""Grounded-reasoning fixtures: a small academic graph built into the compact store, and script builders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kgagents.tools.pgraph.build import GraphBuilder


@pytest.fixture()
def academic(tmp_path) -> str:
    """A GRBench-shaped academic graph: papers, authors (with an organisation), venues, both directions."""
    b = GraphBuilder(tmp_path / "academic")
    b.add_node("p1", type="paper", name="Deep Graphs", features={"year": 2020, "title": "Deep Graphs"})
    b.add_node("p2", type="paper", name="Shallow Nets", features={"year": 2021, "title": "Shallow Nets"})
    b.add_node("a1", type="author", name="Ann Lee", features={"organization": "MIT"})
    b.add_node("a2", type="author", name="Bo Chen", features={"organization": "ETH"})
    b.add_node("v1", type="venue", name="KDD")
    b.add_node("v2", type="venue", name="Lonely Venue")
    for paper, authors in (("p1", ["a1", "a2"]), ("p2", ["a2"])):
        for author in authors:
            b.add_edge(paper, "author", author)
            b.add_edge(author, "paper", paper)
        b.add_edge(paper, "venue", "v1")
        b.add_edge("v1", "paper", paper)
    b.finish(name="academic", fingerprint="ac" * 8, source={"path": "test"})
    return str(Path(tmp_path / "academic"))


def step(when: str, *, times: int = 1, **reply: Any) -> dict[str, Any]:
    return {"when": when, "times": times, **reply}


def thought(step_no: int, text: str, *, times: int = 1, context: str = "") -> dict[str, Any]:
    return step(rf"\[stage: agent thought, step {step_no}\b{context}", times=times, content=text)


def action(step_no: int, *calls: tuple[str, dict[str, Any]], times: int = 1, context: str = "") -> dict[str, Any]:
    return step(rf"\[stage: agent action, step {step_no}\b{context}", times=times,
                tool_calls=[{"name": name, "args": args} for name, args in calls])
