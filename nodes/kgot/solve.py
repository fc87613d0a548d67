"""Step 7 of KGoT's loop (SOLVE): the vote's solve operations (read queries or the whole KG), forced
retrieval and the forced solution."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from kgagents.nodes.kgot.common import _result_text, ask, ask_samples, language_of, problem_text, strip_fences
from kgagents.nodes.kgot.context import KGoTContext
from kgagents.nodes.kgot.env import context_of, open_task_kg
from kgagents.nodes.kgot.replies import Code, DirectSolution
from kgagents.nodes.kgot.state import KGoTState, OperationKind, PartialSolution, QueryKind, SolveAttempt, SolveOperation
from kgagents.nodes.llm import LLMCaller, accounting
from kgagents.nodes.runtime import (
    for_run,
)
from kgagents.nodes.state import NO_SOLUTION
from kgagents.prompts import kgot as P
from kgagents.tools.kg.base import KGStore, ReadResult, empty_snapshot, render_snapshot


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
    async def open(cls, state: KGoTState, ctx: KGoTContext, config: RunnableConfig) -> _Reader:
        store = await open_task_kg(ctx, for_run(config, state), state.get("kg"))
        return cls(store, await store.render(), problem_text(state))

    def prompt(self, template: str) -> str:
        """A query-writing prompt (RETRIEVE, FORCED_RETRIEVE) for this KG."""
        return P.render(template, language_name=self.lang.name, language_guide=self.lang.read_guide,
                        examples=self.lang.read_examples, problem=self.problem, existing_data=self.existing)


async def run_read_query(reader: _Reader, query: str, ctx: KGoTContext, llm: LLMCaller,
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


async def solve_with_query(state: KGoTState, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
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


async def solve_directly(state: KGoTState, runtime: Runtime[KGoTContext]) -> dict[str, Any]:
    """Direct Retrieval: each RETRIEVE vote's answer is a partial solution (appendix C.1); votes that gave none
    share one answer from the Direct Retrieval prompt (the whole KG goes to the LLM, which states the solution)."""
    llm = LLMCaller(context_of(runtime), "graph_executor")
    solving = _Solving(state, llm)
    for operation, samples in vote_operations(state):
        answer = operation or await _solve_from_kg(state, llm, P.DIRECT_RETRIEVAL,
                                                   "the RETRIEVE votes without an answer give no partial solution")
        solving.record("vote", samples, operation, partial=answer)
    return solving.update()


async def solve_forced(state: KGoTState, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
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


async def generate_forced_solution(state: KGoTState, runtime: Runtime[KGoTContext]) -> dict[str, Any]:
    """Appendix D.5, "generate forced solution": when no solve operation gave a partial solution, or none of
    their parses gave an answer, the LLM states the best solution the whole KG supports. Asked once per solve;
    when even this gives nothing, the answer is "No solution found"."""
    llm = LLMCaller(context_of(runtime), "graph_executor")
    solving = _Solving(state, llm)
    solving.record("forced_solution", [], "", partial=await _solve_from_kg(
        state, llm, P.FORCED_SOLUTION, f"no partial solution: the answer is {NO_SOLUTION!r}"))
    return solving.update()
