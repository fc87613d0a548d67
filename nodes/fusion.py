"""Fusion of KGoT variants (paper §5.1 and appendix D.2): one task, several backend × solve-mode variants.

Each variant is a whole KGoT run with a derived context (``backend``, ``solve_mode``, and ``kg_scope`` so that
its task KG is its own), run as a subgraph of the fusion run, concurrently with the others (one ``Send`` per
variant). The run's budget (``budget_usd`` / ``budget_tokens``) is shared equally by the variants: each ends at
its share as a KGoT run ends at its budget. The answers are combined by a majority over normalised answers; a tie
is judged by the LLM. Every variant's answer, partial solution and final KG stay in the state, and its failures
join the run's (``variant › node``). A variant that fails counts as no solution; only a fault that leaves no way forward
(:data:`kgagents.nodes.llm.FATAL_ERRORS`) stops the fusion run.

The variants come with the task or, for a batch evaluation, from the context (``--set variants=...``). The
paper's own fusion numbers are an *ideal* fusion (a task solved when any variant solved it); the evaluation
runner scores every variant's answer so that the report shows it beside this live combiner's accuracy.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Annotated, Any, NotRequired, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from kgagents.core.usage import Usage, merge_usage
from kgagents.nodes.context import caller, described
from kgagents.nodes.kgot import NO_SOLUTION, ChosenSolution, KGoTContext, context_of, normalise_answer
from kgagents.nodes.llm import FATAL_ERRORS, LLMCaller, LLMError, accounting
from kgagents.nodes.runtime import task_attachments
from kgagents.nodes.served import admit
from kgagents.nodes.state import Failure, append, final_state
from kgagents.prompts import kgot as P
from kgagents.tools.kg.base import KGSnapshot
from kgagents.tools.kg.stores import backend_names

SOLVE_MODES = ("query", "direct")
DEFAULT_VARIANTS = ["networkx:query", "networkx:direct"]


@described
@dataclasses.dataclass(kw_only=True)
class FusionContext(KGoTContext):
    """KGoT's context plus the variants to run when the task names none."""

    variants: str | None = caller(None)
    """Comma-separated ``backend:solve_mode`` variants, e.g. ``networkx:query,neo4j:query`` (default:
    NetworkX with query-based retrieval and with Direct Retrieval)."""


class VariantResult(TypedDict):
    variant: str
    backend: str
    solve_mode: str
    final_answer: str
    partial_solution: str | None
    iterations: int
    kg: KGSnapshot | None
    error: str | None
    budget_stop: NotRequired[str | None]
    """Set when the variant ended at its share of the run's budget."""


def joined(left: str | None, right: str | None) -> str | None:
    """Reducer of the run's ``budget_stop``: the reasons of every variant a budget ended, in the order they came."""
    return right if not left else left if not right else f"{left}; {right}"


class FusionState(TypedDict, total=False):
    question: str
    attachments: list[str]
    variants: list[str]
    results: Annotated[list[VariantResult], append]
    tally: dict[str, int]
    final_answer: str
    usage: Annotated[Usage, merge_usage]
    failures: Annotated[list[Failure], append]
    budget_stop: Annotated[str | None, joined]


class VariantTask(TypedDict):
    variant: str
    question: str
    attachments: list[str]
    variants: int
    """How many variants the run has (they share its budget equally)."""


def parse_variant(spec: str) -> tuple[str, str]:
    """``backend:solve_mode`` (solve mode defaults to ``query``); a clear error for unknown names."""
    backend, _, mode = spec.strip().partition(":")
    backend, mode = backend.strip(), (mode.strip() or "query")
    if backend not in backend_names():
        raise ValueError(f"fusion variant {spec!r}: unknown backend {backend!r}; available: "
                         f"{', '.join(backend_names())}")
    if mode not in SOLVE_MODES:
        raise ValueError(f"fusion variant {spec!r}: the solve mode is 'query' or 'direct', not {mode!r}")
    return backend, mode


def parse_variants(text: str | list[str]) -> list[str]:
    """``"networkx:query,falkordb:direct"`` (or a list) as canonical, distinct variant names."""
    items = text.split(",") if isinstance(text, str) else list(text)
    out: list[str] = []
    for item in items:
        if not item.strip():
            continue
        backend, mode = parse_variant(item)
        name = f"{backend}:{mode}"
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError("fusion needs at least one variant, e.g. networkx:query,networkx:direct")
    return out


async def receive_fusion_task(state: FusionState, runtime: Runtime[KGoTContext],
                              config: RunnableConfig) -> dict[str, Any]:
    """Validate the task and the variants: the task's, else the context's, else NetworkX with query-based and
    Direct Retrieval; attachments given as content are written into the run's folder (the variants read them
    there)."""
    question = (state.get("question") or "").strip()
    if not question:
        raise ValueError("the task has no question: give {'question': '...'}")
    ctx = context_of(runtime)
    variants = state.get("variants") or getattr(ctx, "variants", None) or DEFAULT_VARIANTS
    return {"question": question, "attachments": await task_attachments(state.get("attachments"), ctx, config),
            "variants": parse_variants(variants)}


def variant_tasks(state: FusionState) -> list[VariantTask]:
    """One task per variant that has no result yet (a resumed run does not redo finished variants)."""
    done = {r["variant"] for r in state.get("results") or []}
    variants = state.get("variants") or []
    return [VariantTask(variant=v, question=state["question"], attachments=state.get("attachments") or [],
                        variants=len(variants)) for v in variants if v not in done]


def variant_budget(ctx: KGoTContext, variants: int) -> dict[str, Any]:
    """A variant's share of the run's budget: the run's budget divided equally among its variants (they run at
    once, so one shared purse would let the fastest spend the others' share, differently from run to run)."""
    share: dict[str, Any] = {}
    if ctx.budget_usd is not None:
        share["budget_usd"] = ctx.budget_usd / max(1, variants)
    if ctx.budget_tokens is not None:
        share["budget_tokens"] = max(1, ctx.budget_tokens // max(1, variants))
    return share


def make_run_variant(kgot_graph: Any) -> Callable[..., Any]:
    """The node that runs one variant: the compiled KGoT graph as a subgraph with a derived context."""

    async def run_variant(task: VariantTask, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
        """One KGoT run of the task with this variant's backend and solve mode, in its own task KG."""
        ctx = context_of(runtime)
        backend, mode = parse_variant(task["variant"])
        variant_ctx = admit(dataclasses.replace(ctx, backend=backend, solve_mode=mode,  # type: ignore[arg-type]
                                                kg_scope=f"{ctx.kg_scope}/{task['variant']}" if ctx.kg_scope
                                                else task["variant"], **variant_budget(ctx, task.get("variants", 1))))
        result = VariantResult(variant=task["variant"], backend=backend, solve_mode=mode, final_answer=NO_SOLUTION,
                               partial_solution=None, iterations=0, kg=None, error=None)
        out: dict[str, Any] = {}
        try:
            final = await final_state(kgot_graph,
                                      {"question": task["question"], "attachments": task["attachments"]},
                                             config, context=variant_ctx)
        except FATAL_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001 - one failing variant does not stop the others
            error = f"{type(exc).__name__}: {exc}"
            result["error"] = error
            out["failures"] = [Failure(node=task["variant"], role="", kind="error", error=error[:1000],
                                       outcome=f"the variant counts as {NO_SOLUTION!r}")]
        else:
            result.update({"final_answer": final.get("final_answer") or NO_SOLUTION,
                           "partial_solution": final.get("partial_solution"), "iterations": final.get("iteration", 0),
                           "kg": final.get("kg")})
            if final.get("usage"):
                out["usage"] = final["usage"]
            if final.get("budget_stop"):
                result["budget_stop"] = final["budget_stop"]
                out["budget_stop"] = f"{task['variant']}: {final['budget_stop']}"
            if final.get("failures"):
                out["failures"] = [{**f, "node": f"{task['variant']} › {f['node']}"} for f in final["failures"]]
        out["results"] = [result]
        return out

    return run_variant


async def combine_answers(state: FusionState, runtime: Runtime[KGoTContext]) -> dict[str, Any]:
    """Majority over the variants' normalised answers; the LLM chooses among tied answers."""
    results = [r for r in state.get("results") or [] if r["variant"] in (state.get("variants") or [])]
    answers = [r for r in results if r["final_answer"] and r["final_answer"] != NO_SOLUTION]
    if not answers:
        return {"tally": {}, "final_answer": NO_SOLUTION}
    counts = Counter(normalise_answer(r["final_answer"]) for r in answers)
    first_form: dict[str, str] = {}
    for r in sorted(answers, key=lambda r: state["variants"].index(r["variant"])):
        first_form.setdefault(normalise_answer(r["final_answer"]), r["final_answer"])
    tally = {first_form[k]: v for k, v in counts.most_common()}
    best = max(counts.values())
    top = [k for k, v in counts.items() if v == best]
    if len(top) == 1:
        return {"tally": tally, "final_answer": first_form[top[0]]}
    ctx = context_of(runtime)
    llm = LLMCaller(ctx, "graph_executor")
    options = [first_form[k] for k in top]
    partial = "\n".join(f"- variant {r['variant']}: answer {r['final_answer']!r}; partial solution: "
                        f"{(r['partial_solution'] or '')[:1500]}" for r in answers)
    listing = "\n".join(f"{i}: {o}" for i, o in enumerate(options))
    try:
        chosen = await llm.structured(P.render(P.CHOOSE_SOLUTION, problem=state["question"], partial_solution=partial,
                                               candidates=listing), ChosenSolution)
        answer = options[chosen.index] if 0 <= chosen.index < len(options) else options[0]
    except LLMError as exc:
        llm.failed(exc, "the first of the tied answers is the answer")
        answer = options[0]
    return {"tally": tally, "final_answer": answer, **accounting(llm)}
