"""Step 11: the final answer from the summaries — True / False / None (abstain) for a yes/no question, a list
of entities otherwise — and why the run reached it."""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel

from kgagents.nodes.ark.attempts import _counter
from kgagents.nodes.ark.context import ROLE, ArkContext, ark_context_of
from kgagents.nodes.ark.messages import summarise
from kgagents.nodes.ark.replies import EntityListAnswer, YesNoAnswer
from kgagents.nodes.ark.state import ArkState, CurrentStep, QuestionType
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.prompts import ark as P

_AUXILIARIES = ("is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "will", "would",
                "shall", "should", "may", "might", "must", "has", "have", "had")


def infer_question_type(question: str) -> QuestionType:
    """Yes/no for questions that open with an auxiliary verb and for claims (statements); else an entity
    list."""
    text = question.strip()
    first = re.split(r"\W+", text.lower(), maxsplit=1)[0] if text else ""
    if not text.endswith("?") or first in _AUXILIARIES:
        return "yes_no"
    return "entity_list"


def exit_reason(state: ArkState, ctx: ArkContext) -> str:
    """Why the run reached the final answer (mirrors the routers)."""
    if state.get("budget_stop"):  # kgagents.nodes.budget: the routers stopped the run at its budget
        return str(state["budget_stop"])
    stage = state.get("stage")
    current = state.get("current") or CurrentStep()
    if stage == "cleanup":
        steps = state.get("steps") or []
        if state.get("k", 0) >= ctx.k_max:
            return f"K_max reached ({ctx.k_max} reasoning steps)"
        if steps and not steps[-1]["continue_exploration"]:
            return "the model stopped exploring"
    for name in ("anchor", "relation", "reasoning"):
        if stage == name and _counter(current, name) >= ctx.c_max:
            return (f"C_max reached in {name} selection ({ctx.c_max} attempts in reasoning step "
                    f"{state.get('k', 0)})")
    return f"ended after {stage}"


def format_answer(answer: bool | list[str] | None) -> str:
    """``True`` / ``False`` / ``None`` for yes/no answers, ``a; b`` for entity lists (``None`` if empty)."""
    if isinstance(answer, list):
        return "; ".join(answer) if answer else "None"
    return str(answer)


async def final_answer(state: ArkState, runtime: Runtime[ArkContext]) -> dict[str, Any]:
    """Step 11: the answer from the summaries: True / False / None (abstain), or a list of entities."""
    ctx = ark_context_of(runtime)
    qtype: QuestionType = state.get("question_type") or infer_question_type(state.get("question", ""))
    steps_text = summarise(state.get("steps") or [])
    if qtype == "yes_no":
        rules = P.ANSWER_YES_NO_LAST_RESORT if ctx.abstention == "last_resort" else P.ANSWER_YES_NO
    else:
        rules = P.ANSWER_ENTITY_LIST
    prompt = HumanMessage(P.render(P.FINAL_ANSWER, question=state.get("question", ""), steps=steps_text,
                                   answer_rules=rules))
    schema: type[BaseModel] = YesNoAnswer if qtype == "yes_no" else EntityListAnswer
    llm = LLMCaller(ctx, ROLE)
    reason = exit_reason(state, ctx)
    try:
        reply: Any = await llm.structured([*(state.get("messages") or []), prompt], schema,
                                          stage=P.FINAL_STAGE)
        answer = reply.answer
        justification = reply.justification
    except LLMError as exc:  # no answer of the agent: a failed run (evaluations leave it out), no abstention
        llm.failed(exc, "no answer: the run failed (not an abstention)")
        answer = None if qtype == "yes_no" else []
        justification = f"no final answer: the call failed for good ({exc.reason[:300]})"
    if isinstance(answer, list):
        answer = [str(a).strip() for a in answer if str(a).strip()]
    text = format_answer(answer)
    return {"answer": answer, "final_answer": text, "justification": justification, "exit_reason": reason,
            "stage": "final", **accounting(llm),
            "messages": [prompt, AIMessage(f"Answer: {text}\nJustification: {justification}")]}
