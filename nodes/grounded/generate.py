"""Candidate steps: one branch per (kept unfinished state, candidate), each a thought grounded by the run's
interaction method (the agent's graph functions, or graph exploration), sampled with its own seed."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from kgagents.nodes.grounded.agent import _agent_actions, _agent_thought
from kgagents.nodes.grounded.chains import chain_of, task_of
from kgagents.nodes.grounded.context import ROLE, GroundedContext, grounded_context_of
from kgagents.nodes.grounded.explore import _explore_search, _search_thought
from kgagents.nodes.grounded.initialise import graph_for
from kgagents.nodes.grounded.state import GroundedState, StepTask, Thought
from kgagents.nodes.llm import LLMCaller, LLMError, accounting, metered
from kgagents.nodes.models import derived_seed
from kgagents.tools.pgraph import StaticKG


def step_tasks(state: GroundedState, ctx: GroundedContext) -> list[StepTask]:
    """One task per (kept unfinished state, candidate): the next depth's branches."""
    k, _ = ctx.width
    thoughts = state.get("thoughts") or {}
    depth = state.get("depth", 0) + 1
    tasks = []
    for parent in state.get("frontier") or []:
        if thoughts.get(parent, {}).get("finished"):
            continue
        chain = chain_of(thoughts, parent)
        tasks += [task_of(state, f"{parent}.{j}", depth, [parent], chain) for j in range(1, k + 1)]
    return tasks


@metered  # node search's embeddings
async def generate_step(task: StepTask, runtime: Runtime[GroundedContext]) -> dict[str, Any]:
    """One candidate next step of a state: its thought, grounded by the run's interaction method. The
    candidate (the thought, and the agent's action) is sampled at the candidate temperature; exploration's
    decisions (entity extraction, pruning, End?) at the context's temperature."""
    ctx = grounded_context_of(runtime)
    llm = LLMCaller(ctx, ROLE, temperature=_branch_temperature(ctx, task), seed=candidate_seed(ctx, task))
    decider = LLMCaller(ctx, ROLE)
    record = Thought(id=task["id"], depth=task["depth"], parents=list(task["parents"]), kind="step",
                     finished=False, answer=None, error=None)
    try:
        graph = await graph_for(task["graph_ref"])
        think = _agent_thought if ctx.interaction == "agent" else _search_thought
        record["thought"] = await think(task, ctx, llm)
        await ground(task, ctx, llm, decider, graph, record)
    except LLMError as exc:  # the step is recorded as failed; the evaluator and the other branches go on
        llm.failed(exc, f"candidate step {record['id']} fails; the other candidates go on")
        record["error"] = str(exc)[:500]
        record.setdefault("thought", "")
    return {"thoughts": {record["id"]: record}, **accounting(llm, decider)}


async def ground(task: StepTask, ctx: GroundedContext, llm: LLMCaller, decider: LLMCaller, graph: StaticKG,
                 record: Thought) -> None:
    """Ground the thought in ``record`` (the next step of ``task["chain"]``): the agent's action(s) and their
    observations (asked of ``llm``), or automatic graph exploration (its decisions asked of ``decider``)."""
    if ctx.interaction == "agent":
        await _agent_actions(task, ctx, llm, graph, record)
    else:
        await _explore_search(task, ctx, decider, graph, record)


def candidate_seed(ctx: GroundedContext, task: StepTask) -> int | None:
    """The sampling seed of a candidate step: with a run seed S, candidate j of a state is sampled with
    :func:`derived_seed` (S, j), so the k candidates of one state (whose requests are otherwise identical) are
    k different samples, and runs seeded S and S + 1 (an evaluation's runs) share none of them; CoT's one
    chain and a run without a seed use the context's (``None``)."""
    if ctx.seed is None or ctx.strategy == "cot" or len(task["parents"]) != 1:
        return None
    index = task["id"].rsplit(".", 1)[-1]
    return derived_seed(ctx.seed, "candidate", int(index)) if index.isdigit() else None


def _branch_temperature(ctx: GroundedContext, task: StepTask) -> float | None:
    """CoT steps use the context's temperature; ToT / GoT candidates are sampled at
    ``candidate_temperature``."""
    if ctx.strategy == "cot" or ctx.candidate_temperature is None:
        return ctx.temperature
    return ctx.candidate_temperature
