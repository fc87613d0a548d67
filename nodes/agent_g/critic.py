"""The critic: the validator's verdict, the router on it and the commentor's feedback."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from langgraph.runtime import Runtime

from kgagents.nodes import agent_g_oracle as O
from kgagents.nodes.agent_g.agent import describe_action
from kgagents.nodes.agent_g.answer import references_text
from kgagents.nodes.agent_g.context import ROLE, AgentGContext, Task, agent_g_context_of
from kgagents.nodes.agent_g.replies import CommentorReply
from kgagents.nodes.agent_g.state import Action, AgentGState, Iteration
from kgagents.nodes.critic import Verdict, verdict
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.nodes.retriever_bank import (
    Retrieval,
    describe_retrieval,
)
from kgagents.prompts import agent_g as P


def _yes(reply: str) -> bool:
    words = re.findall(r"[a-z]+", reply.lower())
    return bool(words) and words[0] == "yes"


async def validator(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """``C_val(q, ŷ_t, X_t)``: yes or no, with the task's validation context (§2.3): the retrieved references
    for an answer, the top document with its reasoning paths for a ranking (without them:
    ``validator_context`` off); or the oracle's judgement from the gold (``oracle_validator``)."""
    ctx = agent_g_context_of(runtime)
    retrieval = state.get("retrieval") or Retrieval()
    t = state.get("t", 1)
    answer = state.get("answer") or ""
    llm = LLMCaller(ctx, ROLE)
    if ctx.oracle_validator:
        accepted, reply = await _oracle_verdict(state, ctx, llm, answer)
    elif ctx.task == "retrieval":
        refs = retrieval.get("references") or []
        if not refs:
            accepted, reply = False, "(no document retrieved)"
        elif ctx.validator_context:
            context = refs[0]["text"] + "\nReasoning paths:\n" + ("\n".join(retrieval.get("paths") or [])
                                                                  or "(none: the text module)")
            reply = await _ask(llm, P.render(P.VALIDATOR_RETRIEVAL, iteration=t, question=state["question"],
                                             context=context))
            accepted = _yes(reply)
        else:
            reply = await _ask(llm, P.render(P.VALIDATOR_RETRIEVAL_BARE, iteration=t, question=state["question"],
                                             context=refs[0]["text"]))
            accepted = _yes(reply)
    elif ctx.validator_context:
        reply = await _ask(llm, P.render(P.VALIDATOR_GENERATION, iteration=t, context=references_text(retrieval, ctx),
                                         answer=answer, question=state["question"],
                                         query_time=state.get("query_time") or "(not given)"))
        accepted = _yes(reply)
    else:
        reply = await _ask(llm, P.render(P.VALIDATOR_GENERATION_BARE, iteration=t, answer=answer,
                                         question=state["question"],
                                         query_time=state.get("query_time") or "(not given)"))
        accepted = _yes(reply)
    record = Iteration(t=t, action=state.get("action") or Action(), retrieval=retrieval, answer=answer,
                       ranked_ids=list(state.get("ranked_ids") or []), accepted=accepted, validator_reply=reply[:500])
    return {**accounting(llm), "iterations": [record]}


async def _oracle_verdict(state: AgentGState, ctx: AgentGContext, llm: LLMCaller, answer: str) -> tuple[bool, str]:
    """The oracle validator (:mod:`kgagents.nodes.agent_g_oracle`): Hit@1 for a ranking; CRAG's rules, then the paper's
    evaluator with the run's model, for an answer."""
    oracle = state.get("oracle") or {}
    if ctx.task == "retrieval":
        correct = O.ranking_is_correct(list(state.get("ranked_ids") or []), oracle)
        return correct, f"(oracle: the first document {'is' if correct else 'is not'} an answer)"
    decided = O.answer_by_rules(answer, oracle)
    if decided is not None:
        return decided, f"(oracle: {'correct' if decided else 'not correct'} by CRAG's rules)"
    reply = await _ask(llm, O.evaluator_prompt(state["question"], answer, oracle))
    return O.judged_accurate(reply), f"(oracle, the evaluator: {reply[:200]})"


async def _ask(llm: LLMCaller, prompt: str) -> str:
    """A text reply; a call that fails for good counts as a rejection (the loop goes on)."""
    try:
        return await llm.text(prompt)
    except LLMError as exc:
        llm.failed(exc, "the validator rejects")
        return f"(no reply: {str(exc)[:200]})"


def route_verdict(state: AgentGState, ctx: AgentGContext) -> Verdict:
    """Algorithm 1, lines 7–12: accept a validated answer; after a rejection reflect while iterations are left."""
    last = (state.get("iterations") or [{}])[-1]
    return verdict(bool(last.get("accepted")), int(state.get("t", 0)), ctx.max_iterations, limit_first=False)


async def commentor(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """``f_t = C_com(q, a_t)``: the error in the action, from the task's error taxonomy (Table 3), as
    corrective feedback; in-context examples of (action, feedback) pairs; no ground truth is used (except by
    the oracle commentor of the ablations, ``oracle_commentor``)."""
    ctx = agent_g_context_of(runtime)
    taxonomy = P.ERROR_TYPES_GENERATION if ctx.task == "generation" else P.ERROR_TYPES_RETRIEVAL
    retrieval = state.get("retrieval") or Retrieval()
    action = state.get("action") or Action()
    if ctx.oracle_commentor:
        oracle = state.get("oracle") or {}
        error = O.retrieval_error(action, retrieval, oracle) if ctx.task == "retrieval" else \
            O.generation_error(action, oracle)
        feedback = taxonomy[error]
        return {"feedback": feedback, "iterations": [Iteration(t=state.get("t", 1), error_type=error,
                                                                feedback=feedback)]}
    examples = await asyncio.to_thread(ctx.examples, "commentor")
    llm = LLMCaller(ctx, ROLE)
    prompt = P.render(P.COMMENTOR, iteration=state.get("t", 1), error_types="\n".join(f"- {k}" for k in taxonomy),
                      examples=examples, question=state["question"],
                      query_time=state.get("query_time") or "(not given)", action=describe_action(action),
                      retrieval=describe_retrieval(retrieval) + (f"\nanswer: {state.get('answer')}"
                                                                 if ctx.task == "generation" else ""))
    try:
        reply = await llm.structured(prompt, CommentorReply)
        error = _match_error(reply.error_type, taxonomy) or default_error(action, retrieval, ctx.task)
        reason = reply.reason
    except LLMError as exc:
        llm.failed(exc, "the feedback is the error the retrieval notes suggest")
        error, reason = default_error(action, retrieval, ctx.task), f"(commentor unavailable: {str(exc)[:160]})"
    feedback = taxonomy[error] + (f" ({reason})" if reason else "")
    return {"feedback": feedback, **accounting(llm),
            "iterations": [Iteration(t=state.get("t", 1), error_type=error, feedback=feedback)]}


def _match_error(text: str, taxonomy: dict[str, str]) -> str | None:
    """The error type a commentor's reply names: the type itself (case, punctuation and quotes aside), else
    the one type whose full name the reply contains; ``None`` for a reply that names none, or more than one —
    a short reply such as "no" or "incorrect" is no error type, however many type names it occurs in."""
    key = " ".join(re.sub(r"[^a-z/ ]+", " ", text.lower()).split())
    if key in taxonomy:
        return key
    named = [name for name in taxonomy if re.search(rf"(?<![a-z]){re.escape(name)}(?![a-z])", key)]
    named = [n for n in named if not any(n != other and n in other for other in named)]  # the longest names
    return named[0] if len(named) == 1 else None


def default_error(action: Action, retrieval: Retrieval, task: Task) -> str:
    """The error a rejection most likely came from when the commentor gives none: what the retrieval notes say."""
    notes = " ".join(retrieval.get("notes") or [])
    if task == "retrieval":
        if "no intersection between" in notes and not retrieval.get("truncated"):
            return "no intersection"
        if action.get("module") == "text":
            return "incorrect document"
        if len(action.get("entities") or []) == 1:
            return "missing entity"
        return "incorrect entity/relation"
    if action.get("module") == "text":
        return "incorrect retrieval module"
    return "incorrect entity and relation"
