"""The baselines of Agent-G's experiments (paper 004, §4, appendix A.2.3) on the same retriever bank, generator
and runner: CoT (the LLM alone), text RAG, graph RAG, text + graph RAG (references concatenated), Corrective RAG
(the text module, a retrieval evaluator, the graph module when the references are not judged correct) and
ReAct (thought → action over the two modules and entity extraction → observation, for a few iterations).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Literal

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, field_validator

from kgagents.nodes.agent_g.agent import _vocabulary, agent, describe_action
from kgagents.nodes.agent_g.context import IDK, ROLE, AgentGContext, agent_g_context_of
from kgagents.nodes.agent_g.replies import EntityChoice, parse_entities
from kgagents.nodes.agent_g.retrieval import retriever_bank
from kgagents.nodes.agent_g.state import Action, AgentGState, Iteration
from kgagents.nodes.llm import LLMCaller, LLMError, accounting, metered
from kgagents.nodes.retriever_bank import Retrieval, TopicEntity, render_references
from kgagents.prompts import agent_g as P


def fixed_action(module: Literal["text", "none"]):
    """A node that sets the action without the agent: the text module's first batch, or no retrieval (CoT)."""

    async def set_action(state: AgentGState) -> dict[str, Any]:
        action = Action(module="text", batch=0, entities=[], relations=[]) if module == "text" else \
            Action(entities=[], relations=[])
        update: dict[str, Any] = {"t": 1, "action": action}
        if module == "none":
            update["retrieval"] = Retrieval(module="none", references=[], ranked_ids=[], paths=[], linked={},
                                            batch=0, notes=["no retrieval: the model alone"])
        return update

    set_action.__name__ = "text_action" if module == "text" else "no_retrieval"
    return set_action


async def extract(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """The agent's extraction (domain, entities, relations) with the graph module selected, whatever the agent
    would have chosen: graph RAG uses the graph."""
    update = await agent(state, runtime)
    update["action"] = {**update["action"], "module": "graph"}
    return update


@metered  # the retriever bank's embeddings
async def retrieve_both(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """Text + graph RAG: both modules, their references concatenated (graph first)."""
    graph = (await retriever_bank({**state, "action": {**(state.get("action") or {}), "module": "graph"}},
                                     runtime))["retrieval"]
    text = (await retriever_bank({**state, "action": {**(state.get("action") or {}), "module": "text",
                                                          "batch": 0}}, runtime))["retrieval"]
    merged = Retrieval(module="graph", references=[*(graph.get("references") or []), *(text.get("references") or [])],
                       ranked_ids=[*(graph.get("ranked_ids") or []), *(text.get("ranked_ids") or [])],
                       paths=list(graph.get("paths") or []), linked=dict(graph.get("linked") or {}), batch=0,
                       notes=[*(graph.get("notes") or []), *(text.get("notes") or [])])
    return {"retrieval": merged}


async def record(state: AgentGState) -> dict[str, Any]:
    """One iteration's record (the baselines have no critic): the action, references and answer."""
    return {"iterations": [Iteration(t=state.get("t", 1), action=state.get("action") or Action(),
                                        retrieval=state.get("retrieval") or Retrieval(), answer=state.get("answer", ""),
                                        ranked_ids=list(state.get("ranked_ids") or []), accepted=True)]}


# --------------------------------------------------------------------------------------------------------------
# Corrective RAG
# --------------------------------------------------------------------------------------------------------------
class RetrievalJudgement(BaseModel):
    """Whether the references are relevant and sufficient."""

    judgement: Literal["correct", "ambiguous", "incorrect"] = Field(description="correct, ambiguous or incorrect")

    @field_validator("judgement", mode="before")
    @classmethod
    def _word(cls, value: Any) -> Any:
        words = re.findall(r"[a-z]+", str(value).lower())
        return next((w for w in words if w in ("correct", "ambiguous", "incorrect")), value)


async def evaluate_retrieval(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """Corrective RAG's retrieval evaluator (a pre-trained LLM, as the paper's version): correct, ambiguous or
    incorrect; anything but correct switches to the graph module."""
    ctx = agent_g_context_of(runtime)
    llm = LLMCaller(ctx, ROLE)
    prompt = P.render(P.CORRECTIVE_EVALUATOR, question=state["question"],
                      references=render_references(state.get("retrieval") or Retrieval()))
    try:
        judgement = (await llm.structured(prompt, RetrievalJudgement)).judgement
    except LLMError as exc:
        llm.failed(exc, "the references count as ambiguous")
        judgement = "ambiguous"
    return {**accounting(llm), "feedback": f"retrieval evaluator: {judgement}"}


def corrective_route(state: AgentGState) -> Literal["generator", "extract"]:
    return "generator" if str(state.get("feedback", "")).endswith(": correct") else "extract"


# --------------------------------------------------------------------------------------------------------------
# ReAct
# --------------------------------------------------------------------------------------------------------------
class ReactStep(BaseModel):
    """One ReAct step: a thought and an action."""

    thought: str = Field("", description="What to do next and why")
    action: Literal["search_web", "search_kg", "extract", "finish"] = Field(description="The action")
    domain: str = Field("", description="extract: the question's domain")
    entities: list[EntityChoice] = Field(default_factory=list, description="extract: topic entities with types")
    relations: list[str] = Field(default_factory=list, description="extract: useful relations")
    answer: str = Field("", description="finish: the answer")

    @field_validator("entities", mode="before")
    @classmethod
    def _entities(cls, value: Any) -> Any:
        return parse_entities(value)


@metered  # the retriever bank's embeddings
async def react_step(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """Thought and action, then the action's observation (the retriever bank, or the extraction)."""
    ctx = agent_g_context_of(runtime)
    t = state.get("t", 0) + 1
    entity_types, relation_types = await _vocabulary(state, ctx)
    scratchpad = "\n".join(f"Thought {i['t']}: {i.get('reasoning', '')}\nAction {i['t']}: {i.get('error_type', '')}\n"
                           f"Observation {i['t']}: {i.get('feedback', '')}" for i in state.get("iterations") or [])
    llm = LLMCaller(ctx, ROLE)
    prompt = P.render(P.REACT_STEP, step=t, examples=await asyncio.to_thread(ctx.examples, "react"),
                      entity_types=", ".join(entity_types) or "(any)",
                      relation_types=", ".join(relation_types[:400]) or "(any)", question=state["question"],
                      query_time=state.get("query_time") or "(not given)", scratchpad=scratchpad or "(none)")
    action: dict[str, Any] = dict(state.get("action") or Action(entities=[], relations=[]))
    try:
        step = await llm.structured(prompt, ReactStep)
    except LLMError as exc:
        llm.failed(exc, "the step searches the web")
        step = ReactStep(thought=f"(no usable step: {str(exc)[:120]})", action="search_web")
    retrieval = state.get("retrieval") or Retrieval()
    update: dict[str, Any] = {"t": t, **accounting(llm)}
    if step.action == "extract":
        action.update(domain=step.domain, entities=[TopicEntity(name=e.name, type=e.type) for e in step.entities],
                      relations=step.relations)
        observation = f"extracted: {describe_action(Action(**action))}"  # type: ignore[typeddict-item]
    elif step.action in ("search_web", "search_kg"):
        if step.action == "search_web":
            # the next batch after the last one read, whatever search_kg did since (a detour keeps the place)
            action.update(module="text", batch=int(action["batch"]) + 1 if "batch" in action else 0)
        else:
            action["module"] = "graph"
        retrieval = (await retriever_bank({**state, "action": action}, runtime))["retrieval"]  # type: ignore[typeddict-item]
        observation = render_references(retrieval, max_chars=2000)
    else:
        observation = f"finish: {step.answer}"
        update["answer"] = step.answer.strip() or IDK
    update.update(action=action, retrieval=retrieval,
                  iterations=[Iteration(t=t, action=Action(**action), retrieval=retrieval,  # type: ignore[typeddict-item]
                                           reasoning=step.thought, error_type=step.action, feedback=observation[:3000],
                                           accepted=step.action == "finish", answer=update.get("answer", ""))])
    return update


def react_route(state: AgentGState, ctx: AgentGContext) -> Literal["react_step", "generator", "finish"]:
    """Finish when the model finished; after ``react_steps`` steps (the paper's four), answer from the last
    references."""
    last = (state.get("iterations") or [{}])[-1]
    if last.get("accepted"):
        return "finish"
    return "react_step" if state.get("t", 0) < ctx.react_steps else "generator"
