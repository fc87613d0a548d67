"""Steps 9–10: the model selects triples by key, states their implication and whether to continue (eq. 9); the
step is recorded, all steps summarised and the context reset."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime

from kgagents.nodes.ark.attempts import _attempt, _bump, _failed_attempt
from kgagents.nodes.ark.context import ROLE, ArkContext, ark_context_of
from kgagents.nodes.ark.messages import _context_reset, summarise
from kgagents.nodes.ark.replies import ReasoningReply
from kgagents.nodes.ark.state import ArkState, CurrentStep, ReasoningStep
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.prompts import ark as P


async def reasoning_step(state: ArkState, runtime: Runtime[ArkContext]) -> dict[str, Any]:
    """Step 9: the model selects triples by key, states the implication and whether to continue (eq. 9)."""
    ctx = ark_context_of(runtime)
    k = state.get("k", 0)
    current, c = _bump(state.get("current") or CurrentStep(), "reasoning")
    retrieved = current.get("retrieved") or []
    allowed = [t["key"] for t in retrieved]
    prompt = HumanMessage(P.render(P.REASONING, keys=", ".join(allowed) or "(none)",
                                   feedback=current.get("feedback", "")))
    llm = LLMCaller(ctx, ROLE)
    try:
        reply = await llm.structured([*(state.get("messages") or []), prompt], ReasoningReply,
                                     stage=P.REASONING_STAGE.format(k=k, attempt=c))
    except LLMError as exc:
        outcome = _failed_attempt(llm, exc, "reasoning")
        current.update({"reasoning_valid": False, "reply": {},
                        "feedback": P.render(P.REPLY_UNPARSED, error=exc.reason[:300])})
        return {"current": current, "stage": "reasoning", **accounting(llm),
                "attempts": [_attempt(k, "reasoning", c, None, False, outcome)],
                "messages": [prompt, AIMessage("(no usable reasoning reply)")]}
    keys = [key.strip().strip("[]") for key in reply.triple_keys]
    invalid = [key for key in keys if key not in allowed]
    valid = not invalid
    current.update({"reasoning_valid": valid, "reply": reply.model_dump(),
                    "feedback": "" if valid else P.render(P.KEYS_INVALID, invalid=", ".join(invalid))})
    outcome = "valid" if valid else f"keys not retrieved: {', '.join(invalid)}"
    answer = (f"Triple keys: {', '.join(keys) or '(none)'}\nImplication: {reply.implication}\n"
              f"Continue exploration: {reply.continue_exploration}")
    return {"current": current, "stage": "reasoning", "usage": llm.usage,
            "attempts": [_attempt(k, "reasoning", c, ", ".join(keys), valid, outcome, keys=keys,
                                  justification=reply.implication)],
            "messages": [prompt, AIMessage(answer)]}


async def clean_up(state: ArkState) -> dict[str, Any]:
    """Step 10: record the step, summarise all steps, reset the context to system prompt + question +
    summary."""
    current = state.get("current") or CurrentStep()
    reply = current.get("reply") or {}
    retrieved = current.get("retrieved") or []
    by_key = {t["key"]: t for t in retrieved}
    keys = [key.strip().strip("[]") for key in reply.get("triple_keys", [])]
    selected = [by_key[key] for key in dict.fromkeys(keys) if key in by_key]
    step = ReasoningStep(k=state.get("k", 0), anchor=current.get("anchor") or "",
                         relation=current.get("relation") or "", relations=current.get("relations") or [],
                         retrieved=retrieved, selected=selected, implication=reply.get("implication", ""),
                         continue_exploration=bool(reply.get("continue_exploration")),
                         attempts=dict(current.get("c") or {}))
    steps = [*(state.get("steps") or []), step]
    summary = P.render(P.SUMMARY, count=len(steps), steps=summarise(steps))
    return {"steps": [step], "summary": summary, "stage": "cleanup",
            "messages": _context_reset(state, summary)}
