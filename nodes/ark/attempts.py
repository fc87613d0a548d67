"""The attempts of a stage (anchor, relation, reasoning): their counters within a reasoning step, their
records, and a model call that failed for good counted as a failed attempt."""

from __future__ import annotations

from kgagents.nodes.ark.state import Attempt, CurrentStep, Stage
from kgagents.nodes.llm import LLMCaller, LLMError, StructuredOutputError


def _counter(current: CurrentStep, stage: Stage) -> int:
    return int((current.get("c") or {}).get(stage, 0))


def _bump(current: CurrentStep, stage: Stage) -> tuple[CurrentStep, int]:
    counters = dict(current.get("c") or {})
    counters[stage] = counters.get(stage, 0) + 1
    return CurrentStep(**{**current, "c": counters}), counters[stage]


def _failed_attempt(llm: LLMCaller, exc: LLMError, stage: str) -> str:
    """Note a stage's model call that failed for good (the attempt counts as failed; ``C_max`` bounds them);
    returns the attempt's outcome."""
    llm.failed(exc, f"the {stage} attempt counts as failed")
    what = "unparseable reply" if isinstance(exc, StructuredOutputError) else "no reply"
    return f"{what}: {exc.reason[:300]}"


def _attempt(k: int, stage: Stage, c: int, candidate: str | None, valid: bool, outcome: str, *,
             keys: list[str] | None = None, alternatives: list[str] | None = None,
             justification: str = "") -> Attempt:
    return Attempt(k=k, stage=stage, c=c, candidate=candidate, keys=keys or [], valid=valid, outcome=outcome,
                   alternatives=alternatives or [], justification=justification)
