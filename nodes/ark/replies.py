"""The structured replies ARK-V1 asks of its model: an anchor, a relation, a reasoning step, the final answer
(yes / no / abstain, or a list of entities), read leniently where a model writes a list or a boolean as
text."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field, field_validator


class AnchorChoice(BaseModel):
    """The anchor entity to explore next."""

    justification: str = Field("", description="Why this entity helps to answer the question")
    anchor: str = Field(description="The exact name of one entity of the knowledge graph")


class RelationChoice(BaseModel):
    """The relation of the anchor to follow, or an empty string to give up on the anchor."""

    justification: str = Field("", description=("Why this relation helps, or why no relation of the anchor "
                                                 "does"))
    relation: str = Field(description=("The exact name of one outgoing relation of the anchor; empty to "
                                       "give up"))


class ReasoningReply(BaseModel):
    """The triples used, what they imply, and whether to continue exploring."""

    triple_keys: list[str] = Field(default_factory=list, description="Keys of the triples the reasoning uses")
    implication: str = Field(description="What the selected triples imply for the question")
    continue_exploration: bool = Field(description="True if facts needed for the answer are still missing")

    @field_validator("triple_keys", mode="before")
    @classmethod
    def _keys_as_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [k for k in re.split(r"[\s,;]+", value.strip("[] ")) if k]
        return value


_TRUE = {"true", "yes", "y", "1"}
_FALSE = {"false", "no", "n", "0"}
_NONE = {"none", "null", "unknown", "abstain", "n/a", ""}


class YesNoAnswer(BaseModel):
    """The final answer to a yes/no question (or claim): true, false, or null to abstain."""

    justification: str = Field("", description="A short justification from the reasoning steps")
    answer: bool | None = Field(description="true, false, or null to abstain")

    @field_validator("answer", mode="before")
    @classmethod
    def _lenient(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip().strip(".").lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            if text in _NONE:
                return None
        return value


class EntityListAnswer(BaseModel):
    """The final answer as a list of entity names (empty to abstain)."""

    justification: str = Field("", description="A short justification from the reasoning steps")
    answer: list[str] = Field(default_factory=list, description="The entities that answer the question")
