"""The answer: the state that ended the search (each depth's kept states ranked within their own cohort), and
its Finish answer or the model's answer from its chain."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from kgagents.nodes.grounded.chains import chain_of, render_chain
from kgagents.nodes.grounded.context import ROLE, GroundedContext, grounded_context_of
from kgagents.nodes.grounded.replies import FinalAnswer, _structured
from kgagents.nodes.grounded.state import ROOT, GroundedState
from kgagents.nodes.llm import LLMCaller, accounting
from kgagents.nodes.state import NO_SOLUTION
from kgagents.prompts import grounded as P


def best_state(state: GroundedState) -> tuple[str, str]:
    """The state the answer comes from, and why the search ended.

    Each depth's kept states are ranked within their own cohort (by its vote or its scores); ranks of
    different depths are never compared. The answer's state is the best-ranked final of the last depth that
    had finals — the state that ended the search when one did (the best kept state finished, or every kept
    state did) — else the best state kept at the last depth that survived (the step limit, or a depth whose
    every candidate failed)."""
    thoughts = state.get("thoughts") or {}
    failed = state.get("failed_depth")
    why = "finished"
    if failed:
        source = f"depth {failed - 1}" if failed > 1 else "the question alone"
        why = f"a step failed: every candidate at depth {failed} failed, so the answer comes from {source}"
    for selection in reversed(state.get("selections") or []):
        finished = [k for k in selection.get("kept") or [] if thoughts.get(k, {}).get("finished")]
        if finished:
            return finished[0], why
    frontier = state.get("frontier") or []
    if frontier and frontier != [ROOT]:
        return frontier[0], why if failed else "reached the step limit"
    return ROOT, why


async def answer(state: GroundedState, runtime: Runtime[GroundedContext]) -> dict[str, Any]:
    """The final answer: Finish's answer of the state that ended the search, else the LLM's answer from its
    chain (none at the step limit when ``answer_at_limit`` is off). ``answer`` is the answer as given (empty
    for none), ``final_answer`` says "No solution found" then."""
    ctx = grounded_context_of(runtime)
    best, why = best_state(state)
    at_limit = why == "reached the step limit"
    # the budget ended the search (kgagents.nodes.budget): as the step limit does
    if state.get("budget_stop"):
        why, at_limit = str(state["budget_stop"]), True
    thoughts = state.get("thoughts") or {}
    record = thoughts.get(best, {})
    llm = LLMCaller(ctx, ROLE)
    if record.get("answer"):
        text = str(record["answer"])
    elif at_limit and not ctx.answer_at_limit:
        text = ""
        why += " (no answer: answer_at_limit is off)"
    else:
        reply = await _structured(llm, P.render(P.FINAL_ANSWER, question=state["question"],
                                                chain=render_chain(chain_of(thoughts, best))), FinalAnswer,
                                  f"the answer is {NO_SOLUTION!r}")
        text = reply.answer.strip() if reply else ""
        if llm.failures:
            why += f"; the final answer failed: {llm.failures[-1]['error'][:200]}"
    return {"best": best, "answer": text, "final_answer": text or NO_SOLUTION, "exit_reason": why,
            **accounting(llm)}
