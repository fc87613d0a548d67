"""The structured replies of Agent-G's agent and commentor."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator


class EntityChoice(BaseModel):
    name: str = Field(description="The entity as written in the question")
    type: str = Field("", description="Its type, one of the entity types")


def parse_entities(value: Any) -> Any:
    """Entities written as text (``"maroon 5 (band); adele (artist)"``) as ``{name, type}`` objects."""
    if isinstance(value, str):
        value = [v for v in re.split(r"[;\n]", value) if v.strip()]
    out = []
    for item in value or []:
        if isinstance(item, str):
            match = re.match(r"\s*(.+?)\s*\(([^()]*)\)\s*$", item)
            out.append({"name": match.group(1), "type": match.group(2)} if match else {"name": item.strip()})
        else:
            out.append(item)
    return out


class AgentDecision(BaseModel):
    """The agent's action."""

    domain: str = Field("", description="The question's domain (generation task)")
    question_type: str = Field("", description="The question's type (generation task)")
    dynamism: str = Field("", description="The question's dynamism (generation task)")
    entities: list[EntityChoice] = Field(default_factory=list, description="Topic entities with their types")
    relations: list[str] = Field(default_factory=list, description="Useful relations, from the relation types")
    source: Literal["knowledge graph", "text documents"] = Field(description="The reference source")
    next_batch: bool = Field(False, description="Text documents: read the next batch instead of the same one")

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, value: Any) -> Any:
        text = str(value).strip().lower()
        if "graph" in text or text in ("kg", "graph"):
            return "knowledge graph"
        if "text" in text or "document" in text or "web" in text:
            return "text documents"
        return value

    @field_validator("entities", mode="before")
    @classmethod
    def _entities(cls, value: Any) -> Any:
        return parse_entities(value)

    @field_validator("relations", mode="before")
    @classmethod
    def _relations(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [v.strip() for v in re.split(r"[;,\n]", value) if v.strip()]
        return value


class CommentorReply(BaseModel):
    """The error in the action, as one of the error types."""

    error_type: str = Field(description="Exactly one of the error types")
    reason: str = Field("", description="What was wrong, in one sentence")
