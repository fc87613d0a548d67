"""Builders for scripted-model steps that drive the ARK-V1 graph, one per stage of the workflow.

Every call is named by its stage (``reasoning step 2, select relation, attempt 1``; prompts/ark.py), which the
scripted model reads from the call's metadata as a ``[stage: ...]`` line before the prompt: each builder's ``when``
matches that line, and ``context`` (a regex) anywhere in the prompt after it.
"""

from __future__ import annotations

import re
from typing import Any

ANCHOR = r"^\[stage: reasoning step \d+, (?:select anchor, attempt \d+|back to anchor selection)\]"
RELATION = r"^\[stage: reasoning step \d+, select relation, attempt \d+\]"
REASONING = r"^\[stage: reasoning step \d+, reasoning, attempt \d+\]"
FINAL = r"^\[stage: final answer\]"


def step(when: str, *, times: int = 1, **reply: Any) -> dict[str, Any]:
    return {"when": when, "times": times, **reply}


def _with(stage: str, context: str | None) -> str:
    """``stage``, additionally requiring ``context`` (a regex) somewhere in the prompt."""
    return stage if context is None else f"{stage}.*{context}"


def anchor(name: str, *, context: str | None = None, times: int = 1, why: str = "scripted") -> list[dict[str, Any]]:
    return [step(_with(ANCHOR, context), times=times, structured={"justification": why, "anchor": name})]


def relation(name: str, *, context: str | None = None, times: int = 1, why: str = "scripted") -> list[dict[str, Any]]:
    return [step(_with(RELATION, context), times=times, structured={"justification": why, "relation": name})]


def give_up(*, times: int = 1, why: str = "nothing useful here") -> list[dict[str, Any]]:
    return relation("", times=times, why=why)


def reasoning(keys: list[str], implication: str, cont: bool, *, context: str | None = None,
              times: int = 1) -> list[dict[str, Any]]:
    return [step(_with(REASONING, context), times=times, structured={
        "triple_keys": keys, "implication": implication, "continue_exploration": cont})]


def final(answer: Any, *, why: str = "scripted", times: int = 1) -> list[dict[str, Any]]:
    return [step(FINAL, times=times, structured={"justification": why, "answer": answer})]


def quoted(name: str) -> str:
    """A regex for ``"name"`` as prompts quote it."""
    return re.escape(f'"{name}"')


def yui_run(graph_edges: list[Any]) -> list[dict[str, Any]]:
    """The ARK-V1 example's two steps over its graph (Yui Yuigahama -has pet-> Sablé -animal breed-> dachshund),
    then the answer False."""
    from kgagents.tools.pgraph import graph_from_edges

    g = graph_from_edges(graph_edges)
    return [*anchor("Yui Yuigahama"), *relation("has pet"),
            *reasoning([g.triples("Yui Yuigahama", "has pet")[0].key], "Her pet is Sablé.", True),
            *anchor("Sablé"), *relation("animal breed"),
            *reasoning([g.triples("Sablé", "animal breed")[0].key], "A dachshund.", False), *final(False)]
