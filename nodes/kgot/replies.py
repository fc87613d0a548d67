"""The structured replies of KGoT's graph and tool executors."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class NextStep(BaseModel):
    """Decide whether the KG suffices (RETRIEVE) or needs more information (INSERT)."""

    query_type: Literal["RETRIEVE", "INSERT"] = Field(description="RETRIEVE to solve now, INSERT to gather more")
    reason: str = Field(description="For RETRIEVE, why the data suffices; for INSERT, what is missing and why")
    solve_operation: str = Field(default="", description="For RETRIEVE, the solve operation the instructions ask "
                                                         "for (a read query or the answer); empty for INSERT")


class MissingInformation(BaseModel):
    """One coherent description of the information that is missing."""

    missing_information: str


class Code(BaseModel):
    """Code (or a query) for the knowledge graph; empty when there is nothing to do."""

    code: str = Field(description="The complete code or query, without markdown fences")


class DirectSolution(BaseModel):
    """The solution derived from the knowledge graph."""

    solution: str


class NeedForMath(BaseModel):
    """Whether the partial solution still needs calculations."""

    need_math: bool
    reason: str = ""


class ParsedSolution(BaseModel):
    """The final answer, formatted as the problem asks (empty if the partial solution has none)."""

    final_answer: str


class ChosenSolution(BaseModel):
    """Index of the chosen candidate."""

    index: int
