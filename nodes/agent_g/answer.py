"""The generator (an answer from the references) and the run's final output."""

from __future__ import annotations

import json
import re
from typing import Any

from langgraph.runtime import Runtime

from kgagents.nodes.agent_g.context import IDK, ROLE, AgentGContext, agent_g_context_of
from kgagents.nodes.agent_g.state import Action, AgentGState, Iteration
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.nodes.retriever_bank import (
    Retrieval,
    render_references,
)
from kgagents.prompts import agent_g as P

#: Characters a page's name and a reference's number add to the page text the generator reads.
PAGE_NAME_CHARS = 400
#: Characters of a document or a reasoning path the generator reads (documents are cut to this by the
#: retriever).
DOCUMENT_CHARS = 2000


def select_references(retrieval: Retrieval, ctx: AgentGContext) -> Retrieval:
    """The references the generator and the validator read: the top ``top_k`` paths or documents and the whole
    batch of pages (``batch_size``), each part kept whole — the Text + Graph RAG baseline hands over both,
    graph paths first, and many paths must not push the pages out."""
    refs = list(retrieval.get("references") or [])
    pages = [n for n, r in enumerate(refs) if r.get("kind") == "page"][: ctx.batch_size]
    others = [n for n, r in enumerate(refs) if r.get("kind") != "page"][: ctx.top_k]
    return {**retrieval, "references": [refs[n] for n in sorted(pages + others)]}


def references_budget(ctx: AgentGContext) -> int:
    """The characters of references the generator and the validator read, derived from what a retrieval can
    hand over: a whole batch of pages (``batch_size`` × ``page_chars`` and their names) and ``top_k`` paths or
    documents."""
    return ctx.batch_size * (ctx.page_chars + PAGE_NAME_CHARS) + ctx.top_k * DOCUMENT_CHARS


def references_text(retrieval: Retrieval, ctx: AgentGContext) -> str:
    """The selected references as the generator and the validator read them."""
    return render_references(select_references(retrieval, ctx), max_chars=references_budget(ctx))


_FINAL = re.compile(r"final answer\s*[:\uff1a]\s*(.+)", re.IGNORECASE)


def final_answer_of(reply: str) -> str:
    """The text after the last ``Final answer:``; the reply's last line when there is none."""
    matches = list(_FINAL.finditer(reply))
    text = matches[-1].group(1) if matches else (reply.strip().splitlines() or [""])[-1]
    return text.strip().strip("*`").strip() or IDK


async def generator(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """``ŷ_t = Generator(q, X_t)``: an answer from the top-K references with chain-of-thought (generation
    task); the retrieval task's output is the ranked list itself."""
    ctx = agent_g_context_of(runtime)
    retrieval = state.get("retrieval") or Retrieval()
    if ctx.task == "retrieval":
        ranked = list(retrieval.get("ranked_ids") or [])[: ctx.ranked_k]
        return {"answer": ranked[0] if ranked else "", "ranked_ids": ranked}
    action = state.get("action") or Action()
    prompt = P.render(P.GENERATOR, iteration=state.get("t", 1), example=P.GENERATOR_EXAMPLE,
                      idk_instruction=P.GENERATOR_IDK if ctx.generator_idk else "",
                      source="knowledge graph" if retrieval.get("module") == "graph" else "text documents",
                      references=references_text(retrieval, ctx), question=state["question"],
                      query_time=state.get("query_time") or "(not given)",
                      question_type=action.get("question_type") or "(unknown)",
                      dynamism=action.get("dynamism") or "(unknown)", domain=action.get("domain") or "(unknown)")
    llm = LLMCaller(ctx, ROLE)
    try:
        reply = await llm.text(prompt)
    except LLMError as exc:
        llm.failed(exc, f"the answer is {IDK!r}")
        return {"answer": IDK, **accounting(llm), "ranked_ids": [],
                "feedback": f"(the generator failed: {str(exc)[:200]})"}
    return {"answer": final_answer_of(reply), "usage": llm.usage, "ranked_ids": [], "reasoning": reply}


async def finish(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """The answer: the accepted one, or the last one after T iterations (line 12)."""
    ctx = agent_g_context_of(runtime)
    iterations = state.get("iterations") or []
    last = iterations[-1] if iterations else Iteration()
    accepted = bool(last.get("accepted"))
    reason = f"accepted at iteration {last.get('t')}" if accepted else \
        f"{ctx.max_iterations} iteration(s) without an accepted answer: the last answer"
    if state.get("budget_stop") and not accepted:  # kgagents.nodes.budget: the run stopped at its budget
        reason = f"{state['budget_stop']}: the answer of iteration {last.get('t')}"
    cut = [{"t": i.get("t"), "entities": list((i.get("retrieval") or {}).get("truncated") or [])}
           for i in iterations if (i.get("retrieval") or {}).get("truncated")]
    extra: dict[str, Any] = {"truncated_egos": cut}
    if ctx.iteration_metrics:
        extra["curve"] = output_curve(iterations, ctx)
    if ctx.task == "retrieval":
        ranked = list(last.get("ranked_ids") or [])
        return {"ranked_ids": ranked, "final_answer": json.dumps(ranked), "exit_reason": reason, **extra}
    answer = str(last.get("answer") or IDK)
    return {"final_answer": answer, "exit_reason": reason, **extra}


def output_curve(iterations: list[Iteration], ctx: AgentGContext) -> list[Any]:
    """The output the run would have returned with T = 1 … ``max_iterations``: the first accepted one up to T,
    else iteration T's (the last one when the run stopped earlier): Figure 5's points from one run."""
    out: list[Any] = []
    kept: Iteration | None = None
    for t in range(1, ctx.max_iterations + 1):
        chosen = kept or next((i for i in iterations if i.get("t") == t), None) or \
            (iterations[-1] if iterations else Iteration())
        if chosen.get("accepted"):
            kept = chosen
        out.append(list(chosen.get("ranked_ids") or []) if ctx.task == "retrieval"
                   else str(chosen.get("answer") or IDK))
    return out
