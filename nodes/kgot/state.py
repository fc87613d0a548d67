"""KGoT's state: the task, the votes, the tool calls, the KG writes, the solve operations and the solutions
(each an append-only log tagged with the iteration), and the tool calls' ``Send`` payload."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from kgagents.core.usage import Usage, merge_usage
from kgagents.nodes.state import Failure, append
from kgagents.tools.kg.base import KGSnapshot


class Vote(TypedDict):
    iteration: int
    sample: int
    query_type: Literal["RETRIEVE", "INSERT", "INVALID"]
    reason: str
    solve_operation: NotRequired[str]
    """A RETRIEVE vote's solve operation (appendix C.1): the read query (query mode) or the answer (direct mode)."""


class ToolCallRecord(TypedDict):
    iteration: int
    id: str
    name: str
    args: dict[str, Any]
    output: str
    ok: bool
    attempts: int
    cached: bool


#: What became of a KG write, of a query, of a Solve operation.
WriteStatus = Literal["applied", "fixed", "partial", "discarded", "skipped"]
QueryKind = Literal["initial", "fix", "regenerate"]
OperationKind = Literal["vote", "forced_retrieve", "forced_solution"]


class KGWrite(TypedDict):
    iteration: int
    tool_call_id: str
    status: WriteStatus
    code: str
    attempts: int
    errors: list[str]
    snapshot: KGSnapshot | None


class SolveAttempt(TypedDict):
    iteration: int
    query: str
    kind: QueryKind
    ok: bool
    empty: bool
    error: str | None
    result: str | None
    operation: NotRequired[int]
    """The index in ``solve_operations`` of the solve operation this query ran for."""


class SolveOperation(TypedDict):
    """One solve operation and what it gave (paper §4 step 7, appendices C.3.1 and D.5).

    ``vote``: a RETRIEVE vote's read query or answer (identical ones are one operation, ``votes`` names their
    samples); ``forced_retrieve``: a read query written at the iteration limit; ``forced_solution``: the solution
    stated from the whole KG when nothing else gave one."""

    iteration: int
    kind: OperationKind
    votes: list[int]
    operation: str
    """As proposed: the read query, or the answer; empty when the vote gave none (then the RETRIEVE or Direct
    Retrieval prompt wrote it)."""
    query: str | None
    """The read query that was last run (after fixes and regenerations); ``None`` without one."""
    partial_solution: str | None
    error: str | None
    """Why the operation gave no partial solution."""


class PartialSolution(TypedDict):
    """A partial solution on its way to the final answer: after the math step, with its calculation."""

    operation: int
    """Its index in ``solve_operations``."""
    weight: int
    """How many votes proposed its solve operation (at least 1): its parses count that many times."""
    text: str
    need_math: bool | None
    math_output: str | None


class KGoTState(TypedDict, total=False):
    # the task
    question: str
    attachments: list[str]
    # control
    iteration: int
    decision: Literal["ENHANCE", "SOLVE", "FORCED_SOLVE"]
    votes: Annotated[list[Vote], append]
    missing_information: str
    pending_tool_calls: list[dict[str, Any]]
    tool_calls: Annotated[list[ToolCallRecord], append]
    integrated: int
    # the task KG (whole, after the last write) and its history
    kg: KGSnapshot
    kg_writes: Annotated[list[KGWrite], append]
    noise_removals: Annotated[list[dict[str, Any]], append]  # clean-up passes before solving (kgagents.nodes.cleanup)
    # solving
    solve_attempts: Annotated[list[SolveAttempt], append]
    solve_operations: Annotated[list[SolveOperation], append]
    partial_solutions: list[PartialSolution]  # those of the current solve step, each parsed on its own
    partial_solution: str | None  # the one the final answer came from (before that: the first)
    need_math: bool
    math_output: str | None
    parsed_solutions: Annotated[list[dict[str, Any]], append]
    candidates: list[str]
    final_answer: str
    usage: Annotated[Usage, merge_usage]
    failures: Annotated[list[Failure], append]  # model calls that failed for good, and what was done instead
    run_key: str  # a run without a checkpointer only (kgagents.nodes.runtime.new_run_key)


class ToolTask(TypedDict):
    iteration: int
    call: dict[str, Any]
    cached: ToolCallRecord | None
    run_key: NotRequired[str]
    attachments: NotRequired[list[str]]
    """The task's attachments: the only local files, with the run's work dir, that file tools may read."""
