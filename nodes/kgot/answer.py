"""Steps 8–9 of KGoT's loop: the need for math and math with the Python tool, then the solution parsed
(several samples per partial solution) and one chosen."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from kgagents.nodes.kgot.common import ask, ask_samples, normalise_answer, problem_text, strip_fences
from kgagents.nodes.kgot.context import KGoTContext
from kgagents.nodes.kgot.env import context_of, release_task_kg
from kgagents.nodes.kgot.replies import ChosenSolution, Code, NeedForMath, ParsedSolution
from kgagents.nodes.kgot.solve import current_partials, needs_forced_solution
from kgagents.nodes.kgot.state import KGoTState, PartialSolution
from kgagents.nodes.kgot.tools import tool_manager
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.nodes.runtime import (
    for_run,
    gather_bounded,
)
from kgagents.nodes.state import NO_SOLUTION
from kgagents.prompts import kgot as P


async def process_math(state: KGoTState, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
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


async def _math_for(state: KGoTState, ctx: KGoTContext, config: RunnableConfig, llm: LLMCaller,
                    partial: str) -> tuple[bool, str | None, str]:
    """``(need for math, calculation output, partial solution with the calculation)`` of one partial solution."""
    reply = await ask(llm, P.render(P.NEED_FOR_MATH, problem=problem_text(state), partial_solution=partial),
                      NeedForMath, "no calculation: the partial solution is parsed as it is")
    if reply is None or not reply.need_math:
        return False, None, partial
    output, extended = await compute_math(state, ctx, config, llm, partial)
    return True, output, extended


async def compute_math(state: KGoTState, ctx: KGoTContext, config: RunnableConfig, llm: LLMCaller,
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


async def _parses(llm: LLMCaller, prompt: str, first: int, partial: int, n: int,
                  config: RunnableConfig) -> list[dict[str, Any]]:
    """The ``n`` parses of one partial solution (samples ``first``, ``first + 1``, ...)."""
    replies = await ask_samples(llm, prompt, ParsedSolution, n, config, "parse {sample} gives no candidate",
                                first=first)
    return [{"sample": first + i, "partial": partial, "answer": reply.final_answer.strip(), "error": None}
            if isinstance(reply, ParsedSolution) else
            {"sample": first + i, "partial": partial, "answer": "", "error": reply["error"]}
            for i, reply in enumerate(replies)]


async def parse_solution(state: KGoTState, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
    """``max_final_solution_parsing`` parses of each partial solution with the chosen formatter, all concurrently;
    then the majority over the normalised answers (each parse counting once per vote of its solve operation), the
    LLM judging a tie. No candidate: the forced solution, if not yet tried, else "No solution found". When the
    run ends here, its task KG's server is released (a single-tenant Bolt server serves the next run at once)."""
    out = await _parse_solution(state, runtime, config)
    if not needs_forced_solution({**state, **out}):  # type: ignore[typeddict-item]
        await release_task_kg(context_of(runtime), for_run(config, state))
    return out


async def _parse_solution(state: KGoTState, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
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
