"""The nodes of the KGoT workflow (paper §4, Figure 2; appendix B.2).

Each node is ``(state, runtime, config) -> partial state``; the state type is :class:`KGoTState`.
The tool calls are LangGraph ``Send`` tasks (payload :class:`ToolTask`), each its own step with its own
checkpointed result. The samples of one decision (the next-step votes, the solution parses) are concurrent
model calls inside one node: they share one prompt, finish together and are saved together, and a step per
sample would cost LangGraph's per-task work for each (see docs/evals.md). Every result lands in an
append-only log tagged with the iteration.

A model call that fails for good (after its API retries and parse re-asks) never ends the run (appendix
B.3–B.4: log the error, skip the failing query, go on): a vote counts as invalid, a step makes no tool calls,
a write is discarded, a failed query-based solve falls back to the forced solution, math is skipped, a parse
is no candidate. Each such failure is logged in the state's ``failures``. Only a fault that leaves no way
forward (:data:`kgagents.nodes.llm.FATAL_ERRORS`) stops the run, resumable from its last checkpoint.

The package holds one part each: :mod:`.context` (:class:`KGoTContext`), :mod:`.env` (the run's context, its
task KG and its tools' environment), :mod:`.state`, :mod:`.replies` (the executors' structured replies),
:mod:`.common` (what the steps share), :mod:`.decide` (arrival, iteration check, vote), :mod:`.tools` (the
tool calls), :mod:`.kg_writes` (the KG writes), :mod:`.solve` (the solve operations) and :mod:`.answer` (math,
the solution parse).
"""

from kgagents.nodes.kgot.answer import choose_solution, compute_math, parse_solution, process_math
from kgagents.nodes.kgot.common import (
    ask,
    ask_samples,
    call_key,
    describe_attachments,
    describe_tool_calls,
    language_of,
    normalise_answer,
    problem_text,
    strip_fences,
)
from kgagents.nodes.kgot.context import AnswerFormatter, KGoTContext, SolveMode
from kgagents.nodes.kgot.decide import (
    decide_next_step,
    iteration_limit_reached,
    receive_task,
    sample_votes,
    tally,
)
from kgagents.nodes.kgot.env import (
    allow_weak,
    atool_env,
    context_of,
    open_task_kg,
    release_task_kg,
    sandbox_limits,
    sandbox_quota,
    tool_env,
)
from kgagents.nodes.kgot.kg_writes import integrate_new_information, write_statements, write_with_fixes
from kgagents.nodes.kgot.replies import (
    ChosenSolution,
    Code,
    DirectSolution,
    MissingInformation,
    NeedForMath,
    NextStep,
    ParsedSolution,
)
from kgagents.nodes.kgot.solve import (
    current_partials,
    forced_solution_tried,
    generate_forced_solution,
    needs_forced_solution,
    solve_directly,
    solve_forced,
    solve_with_query,
    vote_operations,
)
from kgagents.nodes.kgot.state import (
    KGoTState,
    KGWrite,
    PartialSolution,
    SolveAttempt,
    SolveOperation,
    ToolCallRecord,
    ToolTask,
    Vote,
)
from kgagents.nodes.kgot.tools import (
    define_tool_calls,
    merge_missing_information,
    results_to_integrate,
    run_tool_call,
    tool_manager,
    tool_tasks,
)
from kgagents.nodes.state import NO_SOLUTION

__all__ = [
    "NO_SOLUTION", "AnswerFormatter", "ChosenSolution", "Code", "DirectSolution", "KGWrite", "KGoTContext",
    "KGoTState", "MissingInformation", "NeedForMath", "NextStep", "ParsedSolution", "PartialSolution",
    "SolveAttempt", "SolveMode", "SolveOperation", "ToolCallRecord", "ToolTask", "Vote", "allow_weak", "ask",
    "ask_samples", "atool_env", "call_key", "choose_solution", "compute_math", "context_of",
    "current_partials", "decide_next_step", "define_tool_calls", "describe_attachments",
    "describe_tool_calls", "forced_solution_tried", "generate_forced_solution", "integrate_new_information",
    "iteration_limit_reached", "language_of", "merge_missing_information", "needs_forced_solution",
    "normalise_answer", "open_task_kg", "parse_solution", "problem_text", "process_math", "receive_task",
    "release_task_kg", "results_to_integrate", "run_tool_call", "sample_votes", "sandbox_limits",
    "sandbox_quota", "solve_directly", "solve_forced", "solve_with_query", "strip_fences", "tally",
    "tool_env", "tool_manager", "tool_tasks", "vote_operations", "write_statements", "write_with_fixes",
]
