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
(:data:`nodes.llm.FATAL_ERRORS`) stops the run, resumable from its last checkpoint.
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

from kgagents.usage import Usage, merge_usage
from nodes.context import Context
from nodes.llm import LLMCaller, LLMError, accounting
from nodes.runtime import (
    atool_env,
    context_of,
    for_run,
    gather_bounded,
    new_run_key,
    open_task_kg,
    run_work_dir,
)
from nodes.state import NO_SOLUTION, Failure, append, jsonable
from prompts import kgot as P
from prompts import kgot_cypher, kgot_sparql  # noqa: F401  (register the Cypher and SPARQL prompt parts)
from tools.base import run_tool_with_retry, truncate
from tools.kg.base import KGSnapshot, KGStore, ReadResult, empty_snapshot, render_snapshot
from tools.kg.cypher import split_statements
from tools.manager import ToolManager, registered_names


# --------------------------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------------------------
class Vote(TypedDict):
    iteration: int
    sample: int
    query_type: Literal["RETRIEVE", "INSERT", "INVALID"]
    reason: str


class ToolCallRecord(TypedDict):
    iteration: int
    id: str
    name: str
    args: dict[str, Any]
    output: str
    ok: bool
    attempts: int
    cached: bool


class KGWrite(TypedDict):
    iteration: int
    tool_call_id: str
    status: Literal["applied", "fixed", "partial", "discarded", "skipped"]
    code: str
    attempts: int
    errors: list[str]
    snapshot: KGSnapshot | None


class SolveAttempt(TypedDict):
    iteration: int
    query: str
    kind: Literal["initial", "fix", "regenerate"]
    ok: bool
    empty: bool
    error: str | None
    result: str | None


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
    noise_removals: Annotated[list[dict[str, Any]], append]  # clean-up passes before solving (nodes.cleanup)
    # solving
    solve_attempts: Annotated[list[SolveAttempt], append]
    partial_solution: str | None
    need_math: bool
    math_output: str | None
    parsed_solutions: Annotated[list[dict[str, Any]], append]
    candidates: list[str]
    final_answer: str
    usage: Annotated[Usage, merge_usage]
    failures: Annotated[list[Failure], append]  # model calls that failed for good, and what was done instead
    run_key: str  # a run without a checkpointer only (nodes.runtime.new_run_key)


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
    reason: str = Field(description="For RETRIEVE, the answer the data supports; for INSERT, what is missing and why")


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


def problem_text(state: KGoTState) -> str:
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
    out: dict[str, Any] = {"question": question, "attachments": [str(p) for p in state.get("attachments") or []]}
    if "iteration" not in state:
        out.update(iteration=0, integrated=0, kg=empty_snapshot())
    if "run_key" not in state:
        out.update(new_run_key(config))
    return out


def iteration_limit_reached(state: KGoTState, ctx: Context) -> bool:
    """At ``max_iterations`` the run stops gathering and solves with what the KG holds (forced solve)."""
    return state.get("iteration", 0) >= ctx.max_iterations


# --------------------------------------------------------------------------------------------------------------
# 3. Majority vote
# --------------------------------------------------------------------------------------------------------------
async def _sample_next_step(llm: LLMCaller, prompt: str, iteration: int, sample: int) -> Vote:
    try:
        step = await llm.structured(prompt, NextStep)
    except LLMError as exc:
        llm.failed(exc, f"vote {sample} counts as INVALID")
        return Vote(iteration=iteration, sample=sample, query_type="INVALID", reason=str(exc))
    return Vote(iteration=iteration, sample=sample, query_type=step.query_type, reason=step.reason)


def tally(votes: list[Vote]) -> Literal["ENHANCE", "SOLVE"]:
    """Majority of RETRIEVE over INSERT means SOLVE; a tie (or no valid vote) means ENHANCE."""
    retrieve = sum(v["query_type"] == "RETRIEVE" for v in votes)
    insert = sum(v["query_type"] == "INSERT" for v in votes)
    return "SOLVE" if retrieve > insert else "ENHANCE"


async def decide_next_step(state: KGoTState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    """``num_next_steps_decision`` samples of the next-step decision, concurrently, then the majority vote."""
    ctx = context_of(runtime)
    llm = LLMCaller(ctx, "graph_executor")
    iteration = state.get("iteration", 0)
    prompt = P.render(P.NEXT_STEP, problem=problem_text(state),
                      existing_data=render_snapshot(state.get("kg") or empty_snapshot()),
                      tool_calls_made=describe_tool_calls(state.get("tool_calls") or []))
    votes = await gather_bounded(config, [_sample_next_step(llm, prompt, iteration, i)
                                          for i in range(ctx.num_next_steps_decision)])
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
    try:
        merged = await llm.structured(P.render(P.MERGE_REASONS, problem=problem_text(state), reasons=listing),
                                      MissingInformation)
    except LLMError as exc:
        llm.failed(exc, "the INSERT reasons are listed unmerged")
        return listing
    return merged.missing_information


async def tool_manager(ctx: Context, config: RunnableConfig | None, only: str | None = None, *,
                       attachments: Sequence[str] = ()) -> ToolManager:
    """The run's tools, or just the tool ``only`` if the run has it (none otherwise); built on the event loop once
    the run's work dir is prepared (tool factories do no I/O). Their file tools may read the task's
    ``attachments`` and the work dir only."""
    work_dir = await run_work_dir(ctx, config)
    names = ctx.tools
    if only is not None:
        names = [only] if only in (ctx.tools if ctx.tools is not None else registered_names()) else []
    return ToolManager(await atool_env(ctx, work_dir / "tools", attachments), names)


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
        reply = await llm.message(prompt, tools=manager.get_tools())
    except LLMError as exc:
        llm.failed(exc, "no tool calls in this iteration")
        return {"missing_information": missing, "pending_tool_calls": [], **accounting(merging, llm)}
    known = {t.name for t in manager.get_tools()}
    pending, seen = [], set()
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
    key = {"run_key": state["run_key"]} if state.get("run_key") else {}
    files = {"attachments": list(state["attachments"])} if state.get("attachments") else {}
    return [ToolTask(iteration=state.get("iteration", 0), call=call,
                     cached=done.get(call_key(call["name"], call["args"])), **key, **files)
            for call in state.get("pending_tool_calls") or []]


async def run_tool_call(task: ToolTask, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    """Run one tool call with bounded retries and backoff (run concurrently with the other calls)."""
    ctx = context_of(runtime)
    call = task["call"]
    base = dict(iteration=task["iteration"], id=call["id"], name=call["name"], args=call["args"])
    if task["cached"] is not None:
        cached = task["cached"]
        return {"tool_calls": [ToolCallRecord(**base, output=cached["output"], ok=True, attempts=0, cached=True)]}
    manager = await tool_manager(ctx, for_run(config, task), only=call["name"],
                                 attachments=task.get("attachments") or ())
    tool = manager.get(call["name"])
    if tool is None:
        unavailable = {s.name: s.reason for s in manager.unavailable()}
        why = unavailable.get(call["name"], "no such tool")
        return {"tool_calls": [ToolCallRecord(**base, output=f"Error: tool {call['name']!r} is not available ({why})",
                                              ok=False, attempts=0, cached=False)]}
    run = await run_tool_with_retry(tool, call["args"], max_retries=ctx.max_tool_retries,
                                    backoff_base_s=ctx.tool_backoff_base_s, backoff_max_s=ctx.tool_backoff_max_s,
                                    max_output_chars=ctx.tool_output_chars)
    return {"tool_calls": [ToolCallRecord(**base, output=run.output, ok=run.ok, attempts=run.attempts, cached=False)],
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


async def write_with_fixes(store: KGStore, code: str, llm: LLMCaller, ctx: Context) -> tuple[str, str, int, list[str]]:
    """Execute a KG write statement by statement (:func:`write_statements`); a failing statement goes back to the
    LLM with its error, up to ``max_cypher_fixing_retry`` times, and is discarded alone if it still fails (paper
    §4 step 6, appendix B.4; a fix call that fails for good discards the rest of the write).

    Returns ``(status, final code, attempts, errors)``: ``applied`` (every statement ran at once), ``fixed`` (every
    statement ran, some after fixes), ``partial`` (some statements were discarded) or ``discarded`` (none ran).
    """
    lang = language_of(store)
    errors: list[str] = []
    final: list[str] = []
    attempts = applied = fixed = 0
    statements = write_statements(store, code)
    for number, statement in enumerate(statements):
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
                llm.failed(exc, "the KG write's remaining statements are discarded")
                errors.append(str(exc))
                final += [statement, *statements[number + 1:]]
                return ("partial" if applied else "discarded"), ";\n".join(final), attempts, errors
            statement = strip_fences(reply.code)
        final.append(statement)
    if applied == len(statements):
        status = "fixed" if fixed else "applied"
    else:
        status = "partial" if applied else "discarded"
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
            code, status, attempts, errors = "", "discarded", 0, [str(exc)]
        else:
            if code.strip():
                status, code, attempts, errors = await write_with_fixes(store, code, llm, ctx)
            else:
                status, attempts, errors = "skipped", 0, []
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
# 7. Solve: query-based retrieval, Direct Retrieval, forced solution
# --------------------------------------------------------------------------------------------------------------
async def solve_with_query(state: KGoTState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    """Query-based retrieval: the LLM writes a read query; errors are fixed, errors or empty results
    make it regenerate the query from scratch, up to ``max_retrieve_query_retry`` times. When a model call fails
    for good on the way, the forced solution answers from the KG instead."""
    ctx = context_of(runtime)
    llm = LLMCaller(ctx, "graph_executor")
    attempts: list[SolveAttempt] = []
    try:
        partial = await _query_the_kg(state, ctx, config, llm, attempts)
    except LLMError as exc:
        llm.failed(exc, "query-based retrieval gave up: the forced solution answers from the KG")
        return {"solve_attempts": attempts, "decision": "FORCED_SOLVE",
                "partial_solution": await _solve_from_kg(state, llm, P.FORCED_SOLUTION), **accounting(llm)}
    return {"solve_attempts": attempts, "partial_solution": partial, **accounting(llm)}


async def _query_the_kg(state: KGoTState, ctx: Context, config: RunnableConfig, llm: LLMCaller,
                        attempts: list[SolveAttempt]) -> str | None:
    """The loop of :func:`solve_with_query`: the partial solution (``None`` if no query found one); every query
    run is logged in ``attempts``."""
    store = await open_task_kg(ctx, for_run(config, state), state.get("kg"))
    lang = language_of(store)
    existing = await store.render()
    problem = problem_text(state)
    iteration = state.get("iteration", 0)

    def log(query: str, kind: str, result: ReadResult) -> None:
        attempts.append(SolveAttempt(iteration=iteration, query=query, kind=kind, ok=result.ok, empty=result.empty,
                                     error=result.error, result=None if not result.ok else _result_text(result)))

    query = strip_fences((await llm.structured(
        P.render(P.RETRIEVE, language_name=lang.name, language_guide=lang.read_guide, examples=lang.read_examples,
                 problem=problem, existing_data=existing), Code)).code)
    partial: str | None = None
    for round_ in range(ctx.max_retrieve_query_retry + 1):
        result = await store.read(query)
        log(query, "initial" if round_ == 0 else "regenerate", result)
        fixes = 0
        while not result.ok and fixes < ctx.max_cypher_fixing_retry:
            fixes += 1
            query = strip_fences((await llm.structured(
                P.render(P.FIX_CODE, language_name=lang.name, language_guide=lang.read_guide, code=query,
                         error=result.error or ""), Code)).code)
            result = await store.read(query)
            log(query, "fix", result)
        if result.ok and not result.empty:
            partial = _result_text(result)
            break
        if round_ == ctx.max_retrieve_query_retry:
            break
        error = result.error or "the query returned an empty result"
        query = strip_fences((await llm.structured(
            P.render(P.REGENERATE_QUERY, language_name=lang.name, language_guide=lang.read_guide,
                     examples=lang.read_examples, problem=problem, existing_data=existing, wrong_query=query,
                     error=error), Code)).code)
    return f"Query:\n{query}\nResult:\n{partial}" if partial is not None else None


async def _solve_from_kg(state: KGoTState, llm: LLMCaller, template: str) -> str | None:
    """The solution the LLM states from the whole KG (``None`` when it states none or its call fails)."""
    try:
        reply = await llm.structured(P.render(template, problem=problem_text(state),
                                              existing_data=render_snapshot(state.get("kg") or empty_snapshot())),
                                     DirectSolution)
    except LLMError as exc:
        llm.failed(exc, f"no partial solution: the answer is {NO_SOLUTION!r}")
        return None
    return reply.solution.strip() or None


async def solve_directly(state: KGoTState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Direct Retrieval: the whole KG goes to the LLM, which states the solution."""
    llm = LLMCaller(context_of(runtime), "graph_executor")
    return {"partial_solution": await _solve_from_kg(state, llm, P.DIRECT_RETRIEVAL), **accounting(llm)}


async def solve_forced(state: KGoTState, runtime: Runtime[Context]) -> dict[str, Any]:
    """At the iteration limit: the best solution the KG supports, as it is."""
    llm = LLMCaller(context_of(runtime), "graph_executor")
    return {"partial_solution": await _solve_from_kg(state, llm, P.FORCED_SOLUTION), "decision": "FORCED_SOLVE",
            **accounting(llm)}


# --------------------------------------------------------------------------------------------------------------
# 8. Need for math, math with the Python tool
# --------------------------------------------------------------------------------------------------------------
async def process_math(state: KGoTState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    """Paper step 8, the potential mathematical processing: does the partial solution still need calculations?
    If so, the LLM writes Python for them, it runs in the sandbox, and errors go back to be fixed."""
    ctx = context_of(runtime)
    llm = LLMCaller(ctx, "graph_executor")
    try:
        reply = await llm.structured(P.render(P.NEED_FOR_MATH, problem=problem_text(state),
                                              partial_solution=state.get("partial_solution") or ""), NeedForMath)
    except LLMError as exc:
        llm.failed(exc, "no calculation: the partial solution is parsed as it is")
        return {"need_math": False, **accounting(llm)}
    if not reply.need_math:
        return {"need_math": False, **accounting(llm)}
    return {"need_math": True, **await compute_math(state, ctx, config, llm)}


async def compute_math(state: KGoTState, ctx: Context, config: RunnableConfig, llm: LLMCaller) -> dict[str, Any]:
    """The calculation with the Python tool: ``math_output``, the extended ``partial_solution`` and the
    accounting of ``llm`` (a model call that fails for good skips the calculation or ends its fixing)."""
    manager = await tool_manager(ctx, for_run(config, state), only="run_python_code")
    python = manager.get("run_python_code")
    if python is None:
        return {"math_output": "The Python tool is not available; the calculation was not done.", **accounting(llm)}
    try:
        reply = await llm.message(P.render(P.MATH_WITH_PYTHON, problem=problem_text(state),
                                           partial_solution=state.get("partial_solution") or ""),
                                  tools=[python], tool_choice="run_python_code")
    except LLMError as exc:
        llm.failed(exc, "no calculation: the partial solution is parsed as it is")
        return {"math_output": None, **accounting(llm)}
    calls = [c for c in reply.tool_calls if c["name"] == "run_python_code"]
    if not calls:
        return {"math_output": None, **accounting(llm)}
    code = strip_fences(str(calls[0]["args"].get("code", "")))
    output = ""
    for attempt in range(ctx.max_cypher_fixing_retry + 1):
        output = await python.ainvoke({"code": code})
        if not output.startswith("Error:"):
            break
        if attempt == ctx.max_cypher_fixing_retry:
            break
        try:
            fixed = await llm.structured(P.render(P.FIX_CODE, language_name="Python", code=code, error=output,
                                                  language_guide="Print the final answer."), Code)
        except LLMError as exc:
            llm.failed(exc, "the calculation's error is kept as its output")
            break
        code = strip_fences(fixed.code)
    partial = (state.get("partial_solution") or "") + f"\n\nCalculation (Python):\n{code}\nOutput:\n{output}"
    return {"math_output": output, "partial_solution": partial, **accounting(llm)}


# --------------------------------------------------------------------------------------------------------------
# 9. Parse the final solution (several samples), choose one
# --------------------------------------------------------------------------------------------------------------
async def _parse_once(llm: LLMCaller, prompt: str, sample: int) -> dict[str, Any]:
    try:
        parsed = await llm.structured(prompt, ParsedSolution)
    except LLMError as exc:
        llm.failed(exc, f"parse {sample} gives no candidate")
        return {"sample": sample, "answer": "", "error": str(exc)}
    return {"sample": sample, "answer": parsed.final_answer.strip(), "error": None}


async def parse_solution(state: KGoTState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    """``max_final_solution_parsing`` parses of the partial solution with the chosen formatter, concurrently;
    then the majority over the normalised answers, the LLM judging a tie; no candidate: "No solution found"."""
    ctx = context_of(runtime)
    partial = state.get("partial_solution")
    if not partial:
        return {"candidates": [], "final_answer": NO_SOLUTION}
    llm = LLMCaller(ctx, "graph_executor")
    prompt = P.render(P.PARSE_SOLUTION, format_rules=P.FORMATTERS[ctx.answer_formatter],
                      problem=problem_text(state), partial_solution=partial)
    parsed = await gather_bounded(config, [_parse_once(llm, prompt, i)
                                           for i in range(ctx.max_final_solution_parsing)])
    candidates = [p["answer"] for p in parsed if p["answer"]]
    answer = await choose_solution(state, llm, candidates) if candidates else NO_SOLUTION
    return {"parsed_solutions": parsed, "candidates": candidates, "final_answer": answer, **accounting(llm)}


async def choose_solution(state: KGoTState, llm: LLMCaller, candidates: list[str]) -> str:
    """The most frequent candidate (normalised); on a tie, the one the LLM picks (the first if it cannot)."""
    counts = Counter(normalise_answer(c) for c in candidates)
    ranked = counts.most_common()
    top = [norm for norm, count in ranked if count == ranked[0][1]]
    first_form: dict[str, str] = {}
    for c in candidates:
        first_form.setdefault(normalise_answer(c), c)
    options = [first_form[t] for t in top]
    if len(options) == 1:
        return options[0]
    listing = "\n".join(f"{i}: {o}" for i, o in enumerate(options))
    try:
        chosen = await llm.structured(P.render(P.CHOOSE_SOLUTION, problem=problem_text(state),
                                               partial_solution=state.get("partial_solution") or "",
                                               candidates=listing), ChosenSolution)
    except LLMError as exc:
        llm.failed(exc, "the first of the tied candidates is the answer")
        return options[0]
    return options[chosen.index] if 0 <= chosen.index < len(options) else options[0]
