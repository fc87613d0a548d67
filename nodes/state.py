"""State pieces shared by the workflows: usage, failures, the task KG, run bookkeeping."""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, TypedDict

from kgagents.usage import Usage, merge_usage
from tools.kg.base import KGSnapshot

__all__ = ["NO_SOLUTION", "Failure", "KGSnapshot", "Usage", "UsageState", "append", "merge_usage"]

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
