"""Steps 3–4 and 6–7: the model proposes an anchor (valid iff a head entity, eq. 2) and a relation of it
(valid iff an outgoing relation, eq. 6); an invalid candidate is shown its nearest alternatives."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime

from kgagents.nodes.ark.attempts import _attempt, _bump, _failed_attempt
from kgagents.nodes.ark.context import ROLE, ArkContext, ark_context_of
from kgagents.nodes.ark.kg import _embedder_for, graph_of
from kgagents.nodes.ark.replies import AnchorChoice, RelationChoice
from kgagents.nodes.ark.state import ArkState, CurrentStep
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.prompts import ark as P


def _exact_or_unquoted(text: str, valid: Any) -> str:
    """``text`` stripped; without surrounding quotes if only that form is valid (models often quote names)."""
    name = text.strip()
    bare = name.strip("\"'`").strip()
    return bare if bare != name and not valid(name) and (valid(bare) or not bare) else name


def _quoted(names: list[str]) -> str:
    return ", ".join(f'"{n}"' for n in names) if names else "(none)"


async def prompt_select_anchor(state: ArkState) -> dict[str, Any]:
    """Step 3: add the anchor-selection instruction (with why the previous candidate failed) to the
    context."""
    current = state.get("current") or CurrentStep()
    prompt = P.render(P.SELECT_ANCHOR, feedback=current.get("feedback", ""))
    return {"messages": [HumanMessage(prompt)], "current": {**current, "feedback": ""}}


async def select_anchor(state: ArkState, runtime: Runtime[ArkContext]) -> dict[str, Any]:
    """Step 4: the model proposes an anchor ``a^(k,c)``; valid iff it is a head entity (eq. 2)."""
    ctx = ark_context_of(runtime)
    graph = await graph_of(state, ctx)
    k = state.get("k", 0)
    gave_up = bool((state.get("current") or {}).get("gave_up"))
    current, c = _bump(state.get("current") or CurrentStep(), "anchor")
    stage = P.GAVE_UP_STAGE.format(k=k) if gave_up else P.ANCHOR_STAGE.format(k=k, attempt=c)
    llm = LLMCaller(ctx, ROLE)
    try:
        choice = await llm.structured(list(state.get("messages") or []), AnchorChoice, stage=stage)
    except LLMError as exc:
        outcome = _failed_attempt(llm, exc, "anchor")
        current.update({"anchor": None, "anchor_valid": False, "relations": [], "relation": None,
                        "gave_up": False, "feedback": P.render(P.REPLY_UNPARSED, error=exc.reason[:300])})
        return {"current": current, "stage": "anchor", **accounting(llm),
                "attempts": [_attempt(k, "anchor", c, None, False, outcome)],
                "messages": [AIMessage("(no usable anchor reply)")]}
    is_valid = graph.is_head if ctx.anchor_scope == "head" else graph.has_node
    candidate = _exact_or_unquoted(choice.anchor, is_valid)
    valid = is_valid(candidate)
    alternatives: list[str] = []
    feedback = ""
    if not valid:
        near = await asyncio.to_thread(graph.nearest_nodes, candidate, ctx.num_alternatives,
                                       heads_only=ctx.anchor_scope == "head", embedder=_embedder_for(ctx))
        alternatives = [name for name, _ in near]
        feedback = P.render(P.ANCHOR_NOT_HEAD, candidate=candidate, alternatives=_quoted(alternatives))
    current.update({"anchor": candidate, "anchor_valid": valid, "relations": [], "relation": None,
                    "relation_valid": False, "gave_up": False, "feedback": feedback})
    outcome = "valid" if valid else ("not a head entity" if ctx.anchor_scope == "head"
                                     else "not in the graph")
    return {"current": current, "stage": "anchor", "usage": llm.usage,
            "attempts": [_attempt(k, "anchor", c, candidate, valid, outcome, alternatives=alternatives,
                                  justification=choice.justification)],
            "messages": [AIMessage(f"Anchor: {candidate}\nJustification: {choice.justification}")]}


async def prompt_select_relation(state: ArkState) -> dict[str, Any]:
    """Step 6: add the relation-selection instruction (with why the previous candidate failed)."""
    current = state.get("current") or CurrentStep()
    prompt = P.render(P.SELECT_RELATION, anchor=current.get("anchor") or "",
                      feedback=current.get("feedback", ""))
    return {"messages": [HumanMessage(prompt)], "current": {**current, "feedback": ""}}


async def select_relation(state: ArkState, runtime: Runtime[ArkContext]) -> dict[str, Any]:
    """Step 7: the model proposes ``r^(k,c)``: empty = give up on the anchor; valid iff ``r ∈ R^(k)`` (eq.
    6)."""
    ctx = ark_context_of(runtime)
    graph = await graph_of(state, ctx)
    k = state.get("k", 0)
    current, c = _bump(state.get("current") or CurrentStep(), "relation")
    anchor = current.get("anchor") or ""
    relations = current.get("relations") or []
    llm = LLMCaller(ctx, ROLE)
    try:
        choice = await llm.structured(list(state.get("messages") or []), RelationChoice,
                                      stage=P.RELATION_STAGE.format(k=k, attempt=c))
    except LLMError as exc:
        outcome = _failed_attempt(llm, exc, "relation")
        current.update({"relation": None, "relation_valid": False, "gave_up": False,
                        "feedback": P.render(P.REPLY_UNPARSED, error=exc.reason[:300])})
        return {"current": current, "stage": "relation", **accounting(llm),
                "attempts": [_attempt(k, "relation", c, None, False, outcome)],
                "messages": [AIMessage("(no usable relation reply)")]}
    candidate = _exact_or_unquoted(choice.relation, lambda r: r in relations)
    messages: list[Any] = [AIMessage(f"Relation: {candidate or '(none: give up on this anchor)'}\n"
                                     f"Justification: {choice.justification}")]
    if not candidate:
        current.update({"relation": None, "relation_valid": False, "gave_up": True, "feedback": ""})
        messages.append(HumanMessage(P.render(P.GAVE_UP, anchor=anchor)))
        attempt = _attempt(k, "relation", c, "", False, "gave up on the anchor",
                           justification=choice.justification)
        return {"current": current, "stage": "relation", "usage": llm.usage, "attempts": [attempt],
                "messages": messages}
    valid = candidate in relations
    alternatives: list[str] = []
    feedback = ""
    if not valid:
        near = await asyncio.to_thread(graph.nearest_relations, candidate, ctx.num_alternatives,
                                       among=relations, embedder=_embedder_for(ctx))
        alternatives = [name for name, _ in near]
        feedback = P.render(P.RELATION_INVALID, candidate=candidate, anchor=anchor,
                            alternatives=_quoted(alternatives))
    current.update({"relation": candidate, "relation_valid": valid, "gave_up": False, "feedback": feedback})
    outcome = "valid" if valid else "not an outgoing relation of the anchor"
    return {"current": current, "stage": "relation", "usage": llm.usage, "messages": messages,
            "attempts": [_attempt(k, "relation", c, candidate, valid, outcome, alternatives=alternatives,
                                  justification=choice.justification)]}
