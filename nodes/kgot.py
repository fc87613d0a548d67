"""The nodes of the KGoT workflow (paper §4, Figure 2; appendix B.2).

Each node is ``(state, runtime, config) -> partial state``; the state type is :class:`KGoTState`.
The tool calls are LangGraph ``Send`` tasks (payload :class:`ToolTask`), each its own step with its own
checkpointed result. The samples of one decision (the next-step votes, the solution parses) are concurrent
model calls inside one node: they share one prompt, finish together and are saved together, and a step per
sample would cost LangGraph's per-task work for each (see docs/evals.md). Every result lands in an
append-only log tagged with the iteration.

A model call that fails for good (after its API retries and parse re-asks) never ends the run (appendix B.3–B.4:
log the error, skip the failing query, go on): a vote counts as invalid, a step makes no tool calls, a write is
discarded, a failed query-based solve falls back to the forced solution, math is skipped, a parse is no
candidate. Each such failure is logged in the state's ``failures``. Only a fault that leaves no way forward
(:data:`kgagents.nodes.llm.FATAL_ERRORS`) stops the run, resumable from its last checkpoint.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from kgagents.core.usage import Usage, merge_usage
from kgagents.nodes.context import Context
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.nodes.runtime import (
    atool_env,
    context_of,
    for_run,
    gather_bounded,
    new_run_key,
    open_task_kg,
    release_task_kg,
    run_work_dir,
    served_attachments,
    task_attachments,
)
from kgagents.nodes.state import NO_SOLUTION, Failure, append, jsonable
from kgagents.prompts import kgot as P
from kgagents.prompts import kgot_cypher, kgot_sparql  # noqa: F401  (register the Cypher and SPARQL prompt parts)
from kgagents.tools.base import run_tool_with_retry, truncate
from kgagents.tools.kg.base import KGSnapshot, KGStore, ReadResult, empty_snapshot, render_snapshot
from kgagents.tools.kg.cypher_text import split_statements
from kgagents.tools.manager import ToolManager, registered_names


# --------------------------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------------------------
# Structured replies
# --------------------------------------------------------------------------------------------------------------
class NextStep(BaseModel):
    """Decide whether the KG suffices (RETRIEVE) or needs more information (INSERT)."""

    query_type: Literal["RETRIEVE", "INSERT"] = Field(description="RETRIEVE to solve now, INSERT to gather more")
    reason: str = Field(description="For RETRIEVE, why the data suffices; for INSERT, what is missing and why")
    solve_operation: str = Field(default="", description="For RETRIEVE, the solve operation the instructions ask "
                                                         "for (a read query or the answer); empty for INSERT")


class MissingInformation(BaseModel):
    """One coherent description of the information that is missing."""

    missing_information: str


class Code(BaseModel):
    """Code (or a query) for the knowledge graph; empty when there is nothing to do."""

    code: str = Field(description="The complete code or query, without markdown fences")


class DirectSolution(BaseModel):
    """The solution derived from the knowledge graph."""

    solution: str


class NeedForMath(BaseModel):
    """Whether the partial solution still needs calculations."""

    need_math: bool
    reason: str = ""


class ParsedSolution(BaseModel):
    """The final answer, formatted as the problem asks (empty if the partial solution has none)."""

    final_answer: str


class ChosenSolution(BaseModel):
    """Index of the chosen candidate."""

    index: int


# --------------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------------
async def ask[S: BaseModel](llm: LLMCaller, prompt: str, schema: type[S], outcome: str) -> S | None:
    """``llm.structured`` for a step that goes on without the reply (appendix B.4.1: log the error, bypass the
    failing query, continue): a call that fails for good, an API fault or replies that never parse, is noted
    in the state's failures with ``outcome`` (what the step does instead) and gives ``None``."""
    try:
        return await llm.structured(prompt, schema)
    except LLMError as exc:
        llm.failed(exc, outcome)
        return None


async def ask_samples[S: BaseModel](llm: LLMCaller, prompt: str, schema: type[S], n: int, config: RunnableConfig,
                                   outcome: str, *, first: int = 0) -> list[S | Failure]:
    """``n`` samples of one structured decision (:meth:`LLMCaller.structured_samples`), in order; a sample that
    failed for good is noted, as :func:`ask` notes it, with ``outcome`` (``{sample}``: its number, counted from
    ``first``) and stands as its :class:`Failure`."""
    replies = await llm.structured_samples(prompt, schema, n, config=config)
    return [llm.failed(reply, outcome.format(sample=first + i)) if isinstance(reply, LLMError) else reply
            for i, reply in enumerate(replies)]


def strip_fences(code: str) -> str:
    """Remove markdown code fences an LLM may wrap code in."""
    text = code.strip()
    match = re.match(r"^```[\w+-]*\s*\n(.*?)\n?```\s*$", text, re.DOTALL)
    return match.group(1) if match else text


def language_of(store: KGStore) -> P.QueryLanguage:
    """The prompt parts for the store's query language, as its server's dialect speaks it (Neo4j's Cypher is not
    FalkorDB's)."""
    try:
        language = P.LANGUAGES[store.query_language]
    except KeyError as exc:
        raise ValueError(f"no prompts for the query language {store.query_language!r}") from exc
    return language.for_dialect(getattr(store, "dialect", None))


def describe_tool_calls(calls: list[ToolCallRecord]) -> str:
    if not calls:
        return "No tool calls have been made yet."
    lines = []
    for call in calls:
        status = "ok" if call["ok"] else "FAILED"
        args = json.dumps(call["args"], ensure_ascii=False)
        lines.append(f"- iteration {call['iteration']}: {call['name']}({args}) -> {status}: "
                     f"{truncate(call['output'], 300)}")
    return "\n".join(lines)


def describe_attachments(paths: list[str] | None) -> str:
    return "\n".join(f"- {p}" for p in paths) if paths else "(none)"


def problem_text(state: Mapping[str, Any]) -> str:
    question = state.get("question", "")
    attachments = state.get("attachments") or []
    if attachments:
        question += "\n\nAttached files:\n" + describe_attachments(attachments)
    return question


def call_key(name: str, args: dict[str, Any]) -> str:
    return f"{name}:{json.dumps(args, sort_keys=True, ensure_ascii=False)}"


def normalise_answer(answer: str) -> str:
    return re.sub(r"\s+", " ", answer.strip().strip(".").lower())


def _result_text(result: ReadResult) -> str:
    value = result.result
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


# --------------------------------------------------------------------------------------------------------------
# 1-2. Task arrival and the iteration check
# --------------------------------------------------------------------------------------------------------------
async def receive_task(state: KGoTState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
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


def iteration_limit_reached(state: KGoTState, ctx: Context) -> bool:
    """At ``max_iterations`` the run stops gathering and solves with what the KG holds (forced solve)."""
    return state.get("iteration", 0) >= ctx.max_iterations


# --------------------------------------------------------------------------------------------------------------
# 3. Majority vote
# --------------------------------------------------------------------------------------------------------------
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


async def decide_next_step(state: KGoTState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
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


# --------------------------------------------------------------------------------------------------------------
# 4-6. Enhance: missing information, tool calls, KG writes
# --------------------------------------------------------------------------------------------------------------
async def merge_missing_information(state: KGoTState, llm: LLMCaller) -> str:
    """The INSERT votes' reasons merged into one "missing information" text (an LLM call when there are several;
    if it fails, the reasons listed as they are)."""
    reasons = [v["reason"] for v in state.get("votes", [])
               if v["iteration"] == state.get("iteration", 0) and v["query_type"] == "INSERT"]
    if len(reasons) <= 1:
        return reasons[0] if reasons else "The knowledge graph lacks the information needed to solve the problem."
    listing = "\n".join(f"{i + 1}. {r}" for i, r in enumerate(reasons))
    merged = await ask(llm, P.render(P.MERGE_REASONS, problem=problem_text(state), reasons=listing),
                       MissingInformation, "the INSERT reasons are listed unmerged")
    return listing if merged is None else merged.missing_information


async def tool_manager(ctx: Context, config: RunnableConfig | None, only: str | None = None, *,
                       attachments: Sequence[str] = ()) -> ToolManager:
    """The run's tools, or just the tool ``only`` if the run has it (none otherwise); built on the event loop once
    the run's work dir is prepared (tool factories do no I/O). Their file tools may read the task's
    ``attachments`` and the work dir only."""
    work_dir = await run_work_dir(ctx, config)
    names = ctx.tools
    if only is not None:
        names = [only] if only in (ctx.tools if ctx.tools is not None else registered_names()) else []
    return ToolManager(await atool_env(ctx, work_dir / "tools", served_attachments(attachments, work_dir)), names)


async def define_tool_calls(state: KGoTState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    """Paper step 4, determining the tools: the INSERT reasons merged into the missing information, then the
    tool executor (an LLM bound to the tools) picks tool calls for it."""
    ctx = context_of(runtime)
    merging = LLMCaller(ctx, "graph_executor")
    missing = await merge_missing_information(state, merging)
    manager = await tool_manager(ctx, for_run(config, state), attachments=state.get("attachments") or ())
    llm = LLMCaller(ctx, "tool_executor")
    prompt = P.render(P.DEFINE_TOOL_CALLS, problem=state["question"],
                      attachments=describe_attachments(state.get("attachments")),
                      existing_data=render_snapshot(state.get("kg") or empty_snapshot()),
                      missing_information=missing,
                      tool_calls_made=describe_tool_calls(state.get("tool_calls") or []))
    try:
        # Forced to call a tool, as the authors bind the tool executor (a reply in prose would be lost). "any" is
        # LangChain's portable spelling: OpenAI-compatible clients send "required", Anthropic's {"type": "any"}.
        reply = await llm.message(prompt, tools=manager.get_tools(), tool_choice="any")
    except LLMError as exc:
        llm.failed(exc, "no tool calls in this iteration")
        return {"missing_information": missing, "pending_tool_calls": [], **accounting(merging, llm)}
    known = {t.name for t in manager.get_tools()}
    pending: list[dict[str, Any]] = []
    seen: set[str] = set()
    for call in reply.tool_calls:
        key = call_key(call["name"], call.get("args") or {})
        if key in seen:
            continue  # uniqueness of tool calls within one turn
        seen.add(key)
        pending.append({"id": call.get("id") or f"call_{len(pending)}", "name": call["name"],
                        "args": jsonable(call.get("args") or {}), "known": call["name"] in known})
    return {"missing_information": missing, "pending_tool_calls": pending, **accounting(merging, llm)}


def tool_tasks(state: Mapping[str, Any]) -> list[ToolTask]:
    """One task per pending tool call (of KGoT or the RAG baseline); a call made before in this run reuses its
    result (per-run cache)."""
    done = {call_key(c["name"], c["args"]): c for c in state.get("tool_calls", []) if c["ok"]}
    tasks = []
    for call in state.get("pending_tool_calls") or []:
        task = ToolTask(iteration=state.get("iteration", 0), call=call,
                        cached=done.get(call_key(call["name"], call["args"])))
        if state.get("run_key"):
            task["run_key"] = state["run_key"]
        if state.get("attachments"):
            task["attachments"] = list(state["attachments"])
        tasks.append(task)
    return tasks


async def run_tool_call(task: ToolTask, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    """Run one tool call with bounded retries and backoff (run concurrently with the other calls)."""
    ctx = context_of(runtime)
    call = task["call"]

    def record(output: str, ok: bool, attempts: int, cached: bool) -> ToolCallRecord:
        return ToolCallRecord(iteration=task["iteration"], id=call["id"], name=call["name"], args=call["args"],
                              output=output, ok=ok, attempts=attempts, cached=cached)

    if task["cached"] is not None:
        cached = task["cached"]
        return {"tool_calls": [record(cached["output"], True, 0, True)]}
    manager = await tool_manager(ctx, for_run(config, task), only=call["name"],
                                 attachments=task.get("attachments") or ())
    tool = manager.get(call["name"])
    if tool is None:
        unavailable = {s.name: s.reason for s in manager.unavailable()}
        why = unavailable.get(call["name"], "no such tool")
        return {"tool_calls": [record(f"Error: tool {call['name']!r} is not available ({why})", False, 0, False)]}
    run = await run_tool_with_retry(tool, call["args"], max_retries=ctx.max_tool_retries,
                                    backoff_base_s=ctx.tool_backoff_base_s, backoff_max_s=ctx.tool_backoff_max_s,
                                    max_output_chars=ctx.tool_output_chars)
    return {"tool_calls": [record(run.output, run.ok, run.attempts, False)],
            "usage": manager.env.usage}


def results_to_integrate(state: KGoTState) -> list[ToolCallRecord]:
    return list(state.get("tool_calls") or [])[state.get("integrated", 0):]


def write_statements(store: KGStore, code: str) -> list[str]:
    """The parts of LLM-written KG code that run, and are fixed, one at a time: Cypher queries separated by `;`
    (the authors' Neo4j controller runs each insert query on its own); Python and SPARQL code is one part."""
    if store.query_language != "cypher":
        return [code]
    try:
        return split_statements(code) or [code]
    except ValueError:  # an unterminated string or comment: the server's error goes to the fix loop
        return [code]


async def write_with_fixes(store: KGStore, code: str, llm: LLMCaller,
                          ctx: Context) -> tuple[WriteStatus, str, int, list[str]]:
    """Execute a KG write statement by statement (:func:`write_statements`); a failing statement goes back to the
    LLM with its error, up to ``max_cypher_fixing_retry`` times, and is discarded alone if it still fails (paper
    §4 step 6, appendix B.4; a fix call that fails for good discards that statement alone, appendix B.4.1).

    Returns ``(status, final code, attempts, errors)``: ``applied`` (every statement ran at once), ``fixed`` (every
    statement ran, some after fixes), ``partial`` (some statements were discarded) or ``discarded`` (none ran).
    """
    lang = language_of(store)
    errors: list[str] = []
    final: list[str] = []
    attempts = applied = fixed = 0
    statements = write_statements(store, code)
    for statement in statements:
        for attempt in range(ctx.max_cypher_fixing_retry + 1):
            attempts += 1
            result = await store.write(statement)
            if result.ok:
                applied += 1
                fixed += attempt > 0
                break
            errors.append(result.error or "unknown error")
            if attempt == ctx.max_cypher_fixing_retry:
                break
            try:
                reply = await llm.structured(P.render(P.FIX_CODE, language_name=lang.name,
                                                      language_guide=lang.write_guide, code=statement,
                                                      error=errors[-1]), Code)
            except LLMError as exc:
                llm.failed(exc, "the failing statement of the KG write is discarded; the others run")
                errors.append(str(exc))
                break
            statement = strip_fences(reply.code)
        final.append(statement)
    done: WriteStatus = "fixed" if fixed else "applied"
    status: WriteStatus = done if applied == len(statements) else ("partial" if applied else "discarded")
    return status, ";\n".join(final), attempts, errors


async def integrate_new_information(state: KGoTState, runtime: Runtime[Context],
                                    config: RunnableConfig) -> dict[str, Any]:
    """Write the next tool result into the KG (one result per step, so each write is its own checkpoint).

    When the last result of the iteration is in (or there was none), the iteration counter goes up.
    """
    ctx = context_of(runtime)
    pending = results_to_integrate(state)
    out: dict[str, Any] = {}
    if pending:
        call = pending[0]
        store = await open_task_kg(ctx, for_run(config, state), state.get("kg"))
        lang = language_of(store)
        llm = LLMCaller(ctx, "graph_executor")
        new_info = (f"Tool call: {call['name']}({json.dumps(call['args'], ensure_ascii=False)})\n"
                    f"Result:\n{call['output']}")
        prompt = P.render(P.WRITE_KG, language_name=lang.name, language_guide=lang.write_guide,
                          examples=lang.write_examples, problem=problem_text(state),
                          existing_data=await store.render(),
                          missing_information=state.get("missing_information", ""), new_information=new_info)
        try:
            code = strip_fences((await llm.structured(prompt, Code)).code)
        except LLMError as exc:
            llm.failed(exc, "the tool result is not written into the KG")
            status: WriteStatus = "discarded"
            code, attempts, errors = "", 0, [str(exc)]
        else:
            if code.strip():
                status, code, attempts, errors = await write_with_fixes(store, code, llm, ctx)
            else:
                status = "skipped"
                attempts, errors = 0, []
        snapshot = await store.snapshot() if status in {"applied", "fixed", "partial"} else None
        out["kg_writes"] = [KGWrite(iteration=state.get("iteration", 0), tool_call_id=call["id"], status=status,
                                    code=code, attempts=attempts, errors=errors, snapshot=snapshot)]
        if snapshot is not None:
            out["kg"] = snapshot
        out["integrated"] = state.get("integrated", 0) + 1
        out.update(accounting(llm))
    if len(pending) <= 1:
        out["iteration"] = state.get("iteration", 0) + 1
        out["pending_tool_calls"] = []
    return out


# --------------------------------------------------------------------------------------------------------------
# 7. Solve: the solve operations of the vote, forced retrieval, forced solution
# --------------------------------------------------------------------------------------------------------------
def vote_operations(state: KGoTState) -> list[tuple[str, list[int]]]:
    """The solve operations of this iteration's RETRIEVE votes, in vote order, each with the samples that proposed
    it; identical operations (up to whitespace) are one, executed once (a read query gives the same result every
    time) and weighted by their votes when the answers are counted."""
    iteration = state.get("iteration", 0)
    groups: dict[str, tuple[str, list[int]]] = {}
    for vote in state.get("votes") or []:
        if vote["iteration"] == iteration and vote["query_type"] == "RETRIEVE":
            operation = (vote.get("solve_operation") or "").strip()
            groups.setdefault(" ".join(operation.split()), (operation, []))[1].append(vote["sample"])
    return list(groups.values())


def solutions_update(partials: list[PartialSolution]) -> dict[str, Any]:
    """The state update of a solve step: its partial solutions (replacing those of an earlier one)."""
    return {"partial_solutions": partials, "partial_solution": partials[0]["text"] if partials else None}


def current_partials(state: KGoTState) -> list[PartialSolution]:
    """The partial solutions to compute and parse (a thread checkpointed before they were a list has one)."""
    if "partial_solutions" in state:
        return list(state["partial_solutions"] or [])
    text = state.get("partial_solution")
    return [PartialSolution(operation=-1, weight=1, text=text, need_math=None, math_output=None)] if text else []


def forced_solution_tried(state: KGoTState) -> bool:
    """Whether this iteration's solve has already asked for the forced solution (it is asked at most once)."""
    iteration = state.get("iteration", 0)
    return any(op["kind"] == "forced_solution" and op["iteration"] == iteration
               for op in state.get("solve_operations") or [])


def needs_forced_solution(state: KGoTState) -> bool:
    """Appendix D.5: no solve operation gave a partial solution, or no parse of them gave an answer, and the
    forced solution has not been asked for yet."""
    return not state.get("candidates") and not forced_solution_tried(state)


class _Solving:
    """The records of one solve step: its solve operations, the queries they ran, their partial solutions."""

    def __init__(self, state: KGoTState, llm: LLMCaller) -> None:
        self.state = state
        self.llm = llm
        self.iteration = state.get("iteration", 0)
        self.base = len(state.get("solve_operations") or [])
        self.operations: list[SolveOperation] = []
        self.attempts: list[SolveAttempt] = []
        self.partials: list[PartialSolution] = []

    @property
    def index(self) -> int:
        """The ``solve_operations`` index of the operation being recorded next."""
        return self.base + len(self.operations)

    def log_query(self, query: str, kind: QueryKind, result: ReadResult) -> None:
        self.attempts.append(SolveAttempt(iteration=self.iteration, query=query, kind=kind, ok=result.ok,
                                          empty=result.empty, error=result.error,
                                          result=None if not result.ok else _result_text(result),
                                          operation=self.index))

    def record(self, kind: OperationKind, samples: list[int], operation: str, *, query: str | None = None,
               partial: str | None = None, error: str | None = None) -> None:
        if partial:
            self.partials.append(PartialSolution(operation=self.index, weight=max(1, len(samples)), text=partial,
                                                 need_math=None, math_output=None))
        self.operations.append(SolveOperation(iteration=self.iteration, kind=kind, votes=samples,
                                              operation=operation, query=query, partial_solution=partial or None,
                                              error=None if partial else (error or "no partial solution")))

    def update(self, *callers: LLMCaller) -> dict[str, Any]:
        out: dict[str, Any] = {"solve_operations": self.operations, **solutions_update(self.partials),
                               "candidates": [], **accounting(*(callers or (self.llm,)))}
        if self.attempts:
            out["solve_attempts"] = self.attempts
        return out


class _Reader:
    """The task KG opened for reading, with its language and the rendering its query prompts show."""

    def __init__(self, store: KGStore, existing: str, problem: str) -> None:
        self.store = store
        self.lang = language_of(store)
        self.existing = existing
        self.problem = problem

    @classmethod
    async def open(cls, state: KGoTState, ctx: Context, config: RunnableConfig) -> _Reader:
        store = await open_task_kg(ctx, for_run(config, state), state.get("kg"))
        return cls(store, await store.render(), problem_text(state))

    def prompt(self, template: str) -> str:
        """A query-writing prompt (RETRIEVE, FORCED_RETRIEVE) for this KG."""
        return P.render(template, language_name=self.lang.name, language_guide=self.lang.read_guide,
                        examples=self.lang.read_examples, problem=self.problem, existing_data=self.existing)


async def run_read_query(reader: _Reader, query: str, ctx: Context, llm: LLMCaller,
                         solving: _Solving) -> tuple[str | None, str, str | None]:
    """Run one read query (paper §4 step 7): an error goes back to the LLM to fix, up to
    ``max_cypher_fixing_retry`` times; an error that stays, or an empty result, makes the LLM regenerate the query
    from scratch, up to ``max_retrieve_query_retry`` times. A fix or regeneration whose reply fails for good is
    bypassed (the fixing stops; no more regeneration). Returns ``(partial solution or None, last query, why
    none)``; every query run is logged."""
    error: str | None = None
    for round_ in range(ctx.max_retrieve_query_retry + 1):
        result = await reader.store.read(query)
        solving.log_query(query, "initial" if round_ == 0 else "regenerate", result)
        fixes = 0
        while not result.ok and fixes < ctx.max_cypher_fixing_retry:
            fixes += 1
            reply = await ask(llm, P.render(P.FIX_CODE, language_name=reader.lang.name,
                                            language_guide=reader.lang.read_guide, code=query,
                                            error=result.error or ""), Code,
                              "the read query is not fixed further")
            if reply is None:
                break
            query = strip_fences(reply.code)
            result = await reader.store.read(query)
            solving.log_query(query, "fix", result)
        if result.ok and not result.empty:
            return f"Query:\n{query}\nResult:\n{_result_text(result)}", query, None
        error = result.error or "the query returned an empty result"
        if round_ == ctx.max_retrieve_query_retry:
            break
        reply = await ask(llm, P.render(P.REGENERATE_QUERY, language_name=reader.lang.name,
                                        language_guide=reader.lang.read_guide, examples=reader.lang.read_examples,
                                        problem=reader.problem, existing_data=reader.existing, wrong_query=query,
                                        error=error), Code,
                          "the read query is bypassed: its solve operation gives no partial solution")
        if reply is None:
            break
        query = strip_fences(reply.code)
    return None, query, error


async def solve_with_query(state: KGoTState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    """Query-based retrieval (appendix C.3.1): the read queries of the RETRIEVE votes run one after the other,
    each with the fix / regenerate loop of :func:`run_read_query`; each result is a partial solution. A vote that
    gave no query gets one from the RETRIEVE prompt; one that fails for good is bypassed."""
    ctx = context_of(runtime)
    llm = LLMCaller(ctx, "graph_executor")
    solving = _Solving(state, llm)
    reader = await _Reader.open(state, ctx, config)
    for operation, samples in vote_operations(state):
        query = operation
        if not query:
            reply = await ask(llm, reader.prompt(P.RETRIEVE), Code,
                              "a RETRIEVE vote without a read query is bypassed")
            query = strip_fences(reply.code) if reply is not None else ""
        if not query.strip():
            solving.record("vote", samples, operation, error="no read query")
            continue
        partial, last, error = await run_read_query(reader, query, ctx, llm, solving)
        solving.record("vote", samples, operation, query=last, partial=partial, error=error)
    return solving.update()


async def _solve_from_kg(state: KGoTState, llm: LLMCaller, template: str, outcome: str) -> str | None:
    """The solution the LLM states from the whole KG (``None`` when it states none or its call fails)."""
    reply = await ask(llm, P.render(template, problem=problem_text(state),
                                    existing_data=render_snapshot(state.get("kg") or empty_snapshot())),
                      DirectSolution, outcome)
    return (reply.solution.strip() or None) if reply is not None else None


async def solve_directly(state: KGoTState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Direct Retrieval: each RETRIEVE vote's answer is a partial solution (appendix C.1); votes that gave none
    share one answer from the Direct Retrieval prompt (the whole KG goes to the LLM, which states the solution)."""
    llm = LLMCaller(context_of(runtime), "graph_executor")
    solving = _Solving(state, llm)
    for operation, samples in vote_operations(state):
        answer = operation or await _solve_from_kg(state, llm, P.DIRECT_RETRIEVAL,
                                                   "the RETRIEVE votes without an answer give no partial solution")
        solving.record("vote", samples, operation, partial=answer)
    return solving.update()


async def solve_forced(state: KGoTState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    """At the iteration limit (appendix D.5): in query mode, ``num_next_steps_decision`` forced retrieve queries
    are written concurrently and run like the votes' queries; in Direct Retrieval, the forced solution states the
    best answer the KG supports. When none gives a partial solution, the forced solution follows
    (:func:`generate_forced_solution`)."""
    ctx = context_of(runtime)
    llm = LLMCaller(ctx, "graph_executor")
    solving = _Solving(state, llm)
    if ctx.solve_mode == "direct":
        solving.record("forced_solution", [], "", partial=await _solve_from_kg(
            state, llm, P.FORCED_SOLUTION, f"no partial solution: the answer is {NO_SOLUTION!r}"))
        return {**solving.update(), "decision": "FORCED_SOLVE"}
    reader = await _Reader.open(state, ctx, config)
    prompt = reader.prompt(P.FORCED_RETRIEVE)
    replies = await ask_samples(llm, prompt, Code, max(1, ctx.num_next_steps_decision), config,
                                "forced retrieve query {sample} is not written")
    queries = [strip_fences(reply.code) if isinstance(reply, Code) else "" for reply in replies]
    groups: dict[str, tuple[str, list[int]]] = {}
    for sample, query in enumerate(queries):
        groups.setdefault(" ".join(query.split()), (query, []))[1].append(sample)
    for query, samples in groups.values():
        if not query.strip():
            solving.record("forced_retrieve", samples, "", error="no forced retrieve query")
            continue
        partial, last, error = await run_read_query(reader, query, ctx, llm, solving)
        solving.record("forced_retrieve", samples, query, query=last, partial=partial, error=error)
    return {**solving.update(), "decision": "FORCED_SOLVE"}


async def generate_forced_solution(state: KGoTState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Appendix D.5, "generate forced solution": when no solve operation gave a partial solution, or none of
    their parses gave an answer, the LLM states the best solution the whole KG supports. Asked once per solve;
    when even this gives nothing, the answer is "No solution found"."""
    llm = LLMCaller(context_of(runtime), "graph_executor")
    solving = _Solving(state, llm)
    solving.record("forced_solution", [], "", partial=await _solve_from_kg(
        state, llm, P.FORCED_SOLUTION, f"no partial solution: the answer is {NO_SOLUTION!r}"))
    return solving.update()


# --------------------------------------------------------------------------------------------------------------
# 8. Need for math, math with the Python tool
# --------------------------------------------------------------------------------------------------------------
async def process_math(state: KGoTState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    """Paper step 8, the potential mathematical processing, for each partial solution (concurrently): does it
    still need calculations? If so, the LLM writes Python for them, it runs in the sandbox, and errors go back to
    be fixed; the calculation and its output extend that partial solution."""
    ctx = context_of(runtime)
    llm = LLMCaller(ctx, "graph_executor")
    partials = current_partials(state)
    done = await gather_bounded(config, [_math_for(state, ctx, config, llm, p["text"]) for p in partials])
    updated = [PartialSolution(operation=p["operation"], weight=p["weight"], text=text, need_math=need,
                               math_output=output) for p, (need, output, text) in zip(partials, done, strict=True)]
    outputs = [p["math_output"] for p in updated if p["math_output"] is not None]
    return {"partial_solutions": updated, "partial_solution": updated[0]["text"] if updated else None,
            "need_math": any(p["need_math"] for p in updated), "math_output": outputs[0] if outputs else None,
            **accounting(llm)}


async def _math_for(state: KGoTState, ctx: Context, config: RunnableConfig, llm: LLMCaller,
                    partial: str) -> tuple[bool, str | None, str]:
    """``(need for math, calculation output, partial solution with the calculation)`` of one partial solution."""
    reply = await ask(llm, P.render(P.NEED_FOR_MATH, problem=problem_text(state), partial_solution=partial),
                      NeedForMath, "no calculation: the partial solution is parsed as it is")
    if reply is None or not reply.need_math:
        return False, None, partial
    output, extended = await compute_math(state, ctx, config, llm, partial)
    return True, output, extended


async def compute_math(state: KGoTState, ctx: Context, config: RunnableConfig, llm: LLMCaller,
                       partial: str) -> tuple[str | None, str]:
    """The calculation with the Python tool: ``(its output, the partial solution extended with it)`` (a model
    call that fails for good skips the calculation or ends its fixing)."""
    manager = await tool_manager(ctx, for_run(config, state), only="run_python_code")
    python = manager.get("run_python_code")
    if python is None:
        return "The Python tool is not available; the calculation was not done.", partial
    try:
        reply = await llm.message(P.render(P.MATH_WITH_PYTHON, problem=problem_text(state), partial_solution=partial),
                                  tools=[python], tool_choice="run_python_code")
    except LLMError as exc:
        llm.failed(exc, "no calculation: the partial solution is parsed as it is")
        return None, partial
    calls = [c for c in reply.tool_calls if c["name"] == "run_python_code"]
    if not calls:
        return None, partial
    code = strip_fences(str(calls[0]["args"].get("code", "")))
    output = ""
    for attempt in range(ctx.max_cypher_fixing_retry + 1):
        output = await python.ainvoke({"code": code})
        if not output.startswith("Error:") or attempt == ctx.max_cypher_fixing_retry:
            break
        fixed = await ask(llm, P.render(P.FIX_CODE, language_name="Python", code=code, error=output,
                                        language_guide="Print the final answer."), Code,
                          "the calculation's error is kept as its output")
        if fixed is None:
            break
        code = strip_fences(fixed.code)
    return output, partial + f"\n\nCalculation (Python):\n{code}\nOutput:\n{output}"


# --------------------------------------------------------------------------------------------------------------
# 9. Parse the final solution (several samples per partial solution), choose one
# --------------------------------------------------------------------------------------------------------------
async def _parses(llm: LLMCaller, prompt: str, first: int, partial: int, n: int,
                  config: RunnableConfig) -> list[dict[str, Any]]:
    """The ``n`` parses of one partial solution (samples ``first``, ``first + 1``, ...)."""
    replies = await ask_samples(llm, prompt, ParsedSolution, n, config, "parse {sample} gives no candidate",
                                first=first)
    return [{"sample": first + i, "partial": partial, "answer": reply.final_answer.strip(), "error": None}
            if isinstance(reply, ParsedSolution) else
            {"sample": first + i, "partial": partial, "answer": "", "error": reply["error"]}
            for i, reply in enumerate(replies)]


async def parse_solution(state: KGoTState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    """``max_final_solution_parsing`` parses of each partial solution with the chosen formatter, all concurrently;
    then the majority over the normalised answers (each parse counting once per vote of its solve operation), the
    LLM judging a tie. No candidate: the forced solution, if not yet tried, else "No solution found". When the
    run ends here, its task KG's server is released (a single-tenant Bolt server serves the next run at once)."""
    out = await _parse_solution(state, runtime, config)
    if not needs_forced_solution({**state, **out}):  # type: ignore[typeddict-item]
        await release_task_kg(context_of(runtime), for_run(config, state))
    return out


async def _parse_solution(state: KGoTState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    ctx = context_of(runtime)
    partials = current_partials(state)
    if not partials:
        return {"candidates": [], "final_answer": NO_SOLUTION}
    llm = LLMCaller(ctx, "graph_executor")
    jobs = []
    for number, partial in enumerate(partials):
        prompt = P.render(P.PARSE_SOLUTION, format_rules=P.FORMATTERS[ctx.answer_formatter],
                          problem=problem_text(state), partial_solution=partial["text"])
        jobs.append(_parses(llm, prompt, number * ctx.max_final_solution_parsing, number,
                            ctx.max_final_solution_parsing, config))
    parsed = [p for group in await gather_bounded(config, jobs) for p in group]
    answered = [p for p in parsed if p["answer"]]
    out: dict[str, Any] = {"parsed_solutions": parsed, "candidates": [p["answer"] for p in answered]}
    if not answered:
        return {**out, "final_answer": NO_SOLUTION, **accounting(llm)}
    answer = await choose_solution(state, llm, [(p["answer"], partials[p["partial"]]["weight"]) for p in answered],
                                   partials)
    source = next((partials[p["partial"]] for p in answered
                   if normalise_answer(p["answer"]) == normalise_answer(answer)), partials[0])
    return {**out, "final_answer": answer, "partial_solution": source["text"], **accounting(llm)}


def _listing(partials: Sequence[PartialSolution]) -> str:
    if len(partials) == 1:
        return partials[0]["text"]
    return "\n\n".join(f"Partial solution {i + 1}:\n{p['text']}" for i, p in enumerate(partials))


async def choose_solution(state: KGoTState, llm: LLMCaller, candidates: Sequence[tuple[str, int]],
                          partials: Sequence[PartialSolution] = ()) -> str:
    """The most frequent candidate (normalised; each ``(answer, weight)`` counts ``weight`` times); on a tie, the
    one the LLM picks (the first if it cannot)."""
    counts: Counter[str] = Counter()
    first_form: dict[str, str] = {}
    for answer, weight in candidates:
        norm = normalise_answer(answer)
        counts[norm] += weight
        first_form.setdefault(norm, answer)
    ranked = counts.most_common()
    options = [first_form[norm] for norm, count in ranked if count == ranked[0][1]]
    if len(options) == 1:
        return options[0]
    listing = "\n".join(f"{i}: {o}" for i, o in enumerate(options))
    chosen = await ask(llm, P.render(P.CHOOSE_SOLUTION, problem=problem_text(state),
                                     partial_solution=_listing(partials) if partials else "",
                                     candidates=listing), ChosenSolution,
                       "the first of the tied candidates is the answer")
    if chosen is None:
        return options[0]
    return options[chosen.index] if 0 <= chosen.index < len(options) else options[0]
