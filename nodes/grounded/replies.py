"""The structured replies grounded reasoning asks of its model, read leniently (a list written as one string,
a choice number inside a sentence, yes / no for a boolean), and :func:`_structured`: a reply, or ``None`` when
the call failed for good."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from kgagents.nodes.llm import LLMCaller, LLMError


def _as_list(value: Any) -> Any:
    """A list given as text (``[a, b]``, ``a; b``, one per line) as a list."""
    if isinstance(value, str):
        text = value.strip().strip("[]")
        return [p.strip().strip("\"'") for p in re.split(r"[;,\n]", text) if p.strip().strip("\"'")]
    return value


class _Lenient(BaseModel):
    """Lists the model wrote as one string are split (``"a, b"`` → ``["a", "b"]``)."""

    @model_validator(mode="before")
    @classmethod
    def _lists(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for name, info in cls.model_fields.items():
                if info.annotation == list[str] and name in data:
                    data[name] = _as_list(data[name])
        return data


class EntityList(_Lenient):
    """Entities named in a text, exactly as written."""

    entities: list[str] = Field(default_factory=list, description="The entities, exactly as written")


class RelationChoice(_Lenient):
    """The relations that are relevant to the question."""

    relations: list[str] = Field(default_factory=list, description="Relevant relations, exactly as listed")


class EntityChoice(_Lenient):
    """The tail entities that help to answer the question."""

    entities: list[str] = Field(default_factory=list, description="Relevant tail entities, exactly as listed")


class AttributeChoice(_Lenient):
    """The attributes that are relevant to the question."""

    attributes: list[str] = Field(default_factory=list,
                                  description="Relevant attribute names, exactly as listed")


class EndDecision(BaseModel):
    """Whether the thoughts and triples suffice to answer the question."""

    reason: str = Field("", description="Why, in one sentence")
    sufficient: bool = Field(description="true (yes) if the question can be answered now, else false (no)")

    @field_validator("sufficient", mode="before")
    @classmethod
    def _yes_no(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip().strip("[]().").lower() in {"yes", "true", "y", "1"}
        return value


def _choice_numbers(value: Any) -> Any:
    """Choice numbers as a model may write them: ``3``, ``"The best choice is 3"``, ``[2, "1"]``."""
    if isinstance(value, int):
        return [value]
    if isinstance(value, str):
        return [int(m) for m in re.findall(r"\d+", value)]
    return [int(m) for v in value for m in re.findall(r"\d+", str(v))[:1]]


class SelectionVote(BaseModel):
    """The most promising choices, best first."""

    analysis: str = Field("", description="A short analysis of each choice")
    best: list[int] = Field(description="The ids of the most promising choices, best first")

    _ints = field_validator("best", mode="before")(_choice_numbers)


class BestChoice(BaseModel):
    """The one most promising choice ("the best choice is s")."""

    analysis: str = Field("", description="A short analysis of each choice")
    best: int = Field(description="The number of the best choice")

    @field_validator("best", mode="before")
    @classmethod
    def _int(cls, value: Any) -> Any:
        numbers = _choice_numbers(value) if isinstance(value, (int, str, list)) else []
        if not numbers:
            return value
        return numbers[-1] if isinstance(value, str) else numbers[0]  # a sentence ends with its conclusion


class ScoreVote(BaseModel):
    """The probability that the chain leads to the correct answer."""

    score: float = Field(description="A number between 0 and 1")

    @field_validator("score", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, str):
            found = re.findall(r"\d*\.?\d+", value)
            return float(found[0]) if found else value
        return value


class FinalAnswer(BaseModel):
    """The answer to the question."""

    answer: str = Field(description="The answer: names, titles or values, never node IDs")


async def _structured(llm: LLMCaller, prompt: str, schema: type[BaseModel],
                      outcome: str = "the decision is skipped") -> Any:
    """A structured reply, or ``None`` when the call failed for good (noted with what is done instead)."""
    try:
        return await llm.structured(prompt, schema)
    except LLMError as exc:
        llm.failed(exc, outcome)
        return None
