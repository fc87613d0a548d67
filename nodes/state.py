"""State pieces shared by the workflows: usage, the task KG, run bookkeeping."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from kgagents.usage import Usage, merge_usage
from tools.kg.base import KGSnapshot

__all__ = ["KGSnapshot", "Usage", "UsageState", "append", "merge_usage"]

#: Reducer for append-only logs (votes, tool calls, writes): nodes return the new entries only.
append = operator.add


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
