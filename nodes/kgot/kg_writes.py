"""Step 6 of KGoT's loop (ENHANCE): the tool results written into the task KG, a failing write fixed."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from kgagents.nodes.kgot.common import language_of, problem_text, strip_fences
from kgagents.nodes.kgot.context import KGoTContext
from kgagents.nodes.kgot.env import context_of, open_task_kg
from kgagents.nodes.kgot.replies import Code
from kgagents.nodes.kgot.state import KGoTState, KGWrite, WriteStatus
from kgagents.nodes.kgot.tools import results_to_integrate
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.nodes.runtime import (
    for_run,
)
from kgagents.prompts import kgot as P
from kgagents.tools.kg.base import KGStore
from kgagents.tools.kg.cypher_text import split_statements


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
                          ctx: KGoTContext) -> tuple[WriteStatus, str, int, list[str]]:
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


async def integrate_new_information(state: KGoTState, runtime: Runtime[KGoTContext],
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
