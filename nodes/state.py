"""State pieces shared by the workflows: usage, failures, the task KG, run bookkeeping."""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.runnables import RunnableConfig

from kgagents.core.usage import Usage, merge_usage
from kgagents.tools.kg.base import KGSnapshot

__all__ = ["NO_SOLUTION", "Failure", "KGSnapshot", "Usage", "UsageState", "append", "every_call_failed",
           "failure_summary", "merge_usage"]

#: Reducer for append-only logs (votes, tool calls, writes, failures): nodes return the new entries only.
append = operator.add

#: The answer of a run that found none (KGoT's wording, appendix B.3).
NO_SOLUTION = "No solution found"


class Failure(TypedDict):
    """A model call that failed for good (after its retries and re-asks), and what the workflow did instead.

    Every workflow's state logs them in a ``failures`` channel (reducer :data:`append`); ``kgagents show``
    prints them. KGoT's error handling (appendix B.4) is the model: log the error, skip or count the failing
    step, go on.
    """

    node: str
    """The graph node that made the call (``variant › node`` for a fusion variant's)."""
    role: str
    kind: Literal["api", "parse", "error"]
    """``api``: the API kept failing; ``parse``: the replies never fit the schema; ``error``: anything else."""
    error: str
    outcome: str
    """What the workflow did instead (the vote counts as invalid, the write is discarded, ...)."""


def failure_summary(failures: list[Failure] | None) -> dict[str, Any]:
    """How many model calls of a run failed for good, and of which kinds: ``{"count": 3, "kinds": {"api": 2,
    "parse": 1}}`` (``{"count": 0, "kinds": {}}`` for a clean run)."""
    kinds: dict[str, int] = {}
    for failure in failures or []:
        kind = str(failure.get("kind") or "error")
        kinds[kind] = kinds.get(kind, 0) + 1
    return {"count": sum(kinds.values()), "kinds": dict(sorted(kinds.items()))}


def every_call_failed(state: dict[str, Any]) -> bool:
    """Whether a finished run's model calls all failed for good: it logged failures and no call answered (a
    run that answered "No solution found" because of that is a failed run, not a wrong answer)."""
    calls = sum(int(u.get("calls", 0)) for u in (state.get("usage") or {}).values())
    return bool(state.get("failures")) and calls == 0


class UsageState(TypedDict, total=False):
    """Token usage and cost per model (reducer: summed), in every workflow's state."""

    usage: Annotated[Usage, merge_usage]


def jsonable(value: Any) -> Any:
    """A JSON-safe copy of a tool argument or result (for the state)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    return str(value)


def state_keys(graph: Any) -> list[str]:
    """The channels of a compiled workflow graph's state schema and of its output schema (what ``invoke``
    returned before the graph had an output schema, and the output fields)."""
    builder = graph.builder
    keys = [*builder.schemas[builder.state_schema], *builder.schemas[builder.output_schema]]
    return [key for key in dict.fromkeys(keys) if key in graph.channels]


async def final_state(
    graph: Any, input: Any, config: RunnableConfig | None = None, **kwargs: Any
) -> dict[str, Any]:
    """Run a compiled workflow graph to its end and return its whole final state, not its output schema (for
    Python callers that read the run's details, checkpointed or not)."""
    return await graph.ainvoke(input, config, output_keys=state_keys(graph), **kwargs)
