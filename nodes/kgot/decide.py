"""Steps 1–3 of KGoT's loop: the task's arrival, the iteration check and the majority vote (ENHANCE or
SOLVE)."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from kgagents.nodes.kgot.common import describe_tool_calls, language_of, problem_text, strip_fences
from kgagents.nodes.kgot.context import KGoTContext
from kgagents.nodes.kgot.env import context_of, open_task_kg
from kgagents.nodes.kgot.replies import NextStep
from kgagents.nodes.kgot.state import KGoTState, Vote
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.nodes.runtime import (
    for_run,
    new_run_key,
    task_attachments,
)
from kgagents.prompts import kgot as P
from kgagents.tools.kg.base import empty_snapshot, render_snapshot


async def receive_task(state: KGoTState, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
    """Validate the task and start with an empty KG (a resumed thread keeps its own); a run without a checkpointer
    gets its own key (its work dir and KG scope)."""
    question = (state.get("question") or "").strip()
    if not question:
        raise ValueError("the task has no question: give {'question': '...'}")
    out: dict[str, Any] = {"question": question}
    if "iteration" not in state:
        out.update(iteration=0, integrated=0, kg=empty_snapshot())
    if "run_key" not in state:
        out.update(new_run_key(config))
    out["attachments"] = await task_attachments(state.get("attachments"), context_of(runtime),
                                                for_run(config, {**state, **out}))
    return out


def iteration_limit_reached(state: KGoTState, ctx: KGoTContext) -> bool:
    """At ``max_iterations`` the run stops gathering and solves with what the KG holds (forced solve)."""
    return state.get("iteration", 0) >= ctx.max_iterations


def _vote(llm: LLMCaller, step: NextStep | LLMError, iteration: int, sample: int) -> Vote:
    if isinstance(step, LLMError):
        llm.failed(step, f"vote {sample} counts as INVALID")
        return Vote(iteration=iteration, sample=sample, query_type="INVALID", reason=str(step))
    operation = strip_fences(step.solve_operation) if step.query_type == "RETRIEVE" else ""
    return Vote(iteration=iteration, sample=sample, query_type=step.query_type, reason=step.reason,
                solve_operation=operation)


async def sample_votes(llm: LLMCaller, prompt: str, iteration: int, n: int, config: RunnableConfig) -> list[Vote]:
    """``n`` samples of the next-step prompt (:meth:`LLMCaller.structured_samples`), as votes; a sample that
    failed for good counts as INVALID."""
    steps = await llm.structured_samples(prompt, NextStep, n, config=config)
    return [_vote(llm, step, iteration, i) for i, step in enumerate(steps)]


def tally(votes: list[Vote]) -> Literal["ENHANCE", "SOLVE"]:
    """Majority of RETRIEVE over INSERT means SOLVE; a tie (or no valid vote) means ENHANCE."""
    retrieve = sum(v["query_type"] == "RETRIEVE" for v in votes)
    insert = sum(v["query_type"] == "INSERT" for v in votes)
    return "SOLVE" if retrieve > insert else "ENHANCE"


async def decide_next_step(state: KGoTState, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
    """``num_next_steps_decision`` samples of the next-step decision, concurrently, then the majority vote.

    A RETRIEVE vote brings its solve operation (appendix C.1): in query mode the read query, in Direct Retrieval
    the answer; the solve step executes them (:func:`solve_with_query`, :func:`solve_directly`)."""
    ctx = context_of(runtime)
    llm = LLMCaller(ctx, "graph_executor")
    iteration = state.get("iteration", 0)
    if ctx.solve_mode == "direct":
        mode = P.NEXT_STEP_DIRECT
    else:
        mode = P.next_step_query_mode(language_of(await open_task_kg(ctx, for_run(config, state), state.get("kg"))))
    prompt = P.render(P.NEXT_STEP, problem=problem_text(state),
                      existing_data=render_snapshot(state.get("kg") or empty_snapshot()),
                      tool_calls_made=describe_tool_calls(state.get("tool_calls") or []), **mode)
    votes = await sample_votes(llm, prompt, iteration, ctx.num_next_steps_decision, config)
    return {"votes": votes, "decision": tally(votes), **accounting(llm)}
