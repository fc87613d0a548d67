"""Builders for scripted-model steps that drive the KGoT graph, one per prompt of the workflow.

Each builder matches its prompt by a phrase only that prompt contains (see prompts/kgot.py).
"""

from __future__ import annotations

from typing import Any

VOTE = "Can you solve the initial problem"
MERGE = "<list_of_reasons>"
DEFINE_TOOLS = "information retriever"
WRITE = "<new_information>"
FIX = "The given code failed"
RETRIEVE = r"retrieves from the graph the\s+information"
REGENERATE = "<wrong_query>"
DIRECT = "Solve the initial problem using only the data"
FORCED = "budget for collecting more information is spent"
FORCED_RETRIEVE = "No more information will be collected"
NEED_MATH = "need_math"
MATH = "math and Python expert"
PARSE = "formatter and extractor"
CHOOSE = "<candidates>"


def step(when: str, *, unless: str | None = None, times: int = 1, **reply: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"when": when, "times": times, **reply}
    if unless:
        s["unless"] = unless
    return s


def votes(query_type: str, n: int, *, reason: str = "", when_extra: str = "", unless: str | None = None,
          solve: str | None = None):
    """``n`` votes of ``query_type``; ``solve`` is a RETRIEVE vote's solve operation (the read query or the
    answer; without it the vote brings none, and the RETRIEVE / Direct Retrieval prompt writes it)."""
    reason = reason or ("The data answers it." if query_type == "RETRIEVE" else "The needed facts are missing.")
    when = VOTE + (f".*{when_extra}" if when_extra else "")
    reply = {"query_type": query_type, "reason": reason, **({"solve_operation": solve} if solve is not None else {})}
    return [step(when, unless=unless, times=n, structured=reply)]


def merge(text: str = "The facts are missing.", times: int = 1):
    return [step(MERGE, times=times, structured={"missing_information": text})]


def tool_calls(*calls: tuple[str, dict[str, Any]], times: int = 1, when_extra: str = ""):
    when = DEFINE_TOOLS + (f".*{when_extra}" if when_extra else "")
    return [step(when, times=times, tool_calls=[{"name": n, "args": a} for n, a in calls])]


def write(code: str, times: int = 1, when_extra: str = ""):
    return [step(WRITE + (f".*{when_extra}" if when_extra else ""), times=times, structured={"code": code})]


def fix(code: str, times: int = 1):
    return [step(FIX, times=times, structured={"code": code})]


def retrieve(code: str):
    return [step(RETRIEVE, structured={"code": code})]


def regenerate(code: str, times: int = 1):
    return [step(REGENERATE, times=times, structured={"code": code})]


def direct(solution: str):
    return [step(DIRECT, structured={"solution": solution})]


def forced(solution: str):
    return [step(FORCED, structured={"solution": solution})]


def forced_retrieve(code: str, times: int = 1):
    return [step(FORCED_RETRIEVE, times=times, structured={"code": code})]


def unparseable(when: str, times: int = 0):
    """A reply for the prompt ``when`` that never fits its schema (every re-ask gets it again)."""
    return [step(when, times=times, structured={"wrong_field": 1})]


def need_math(needed: bool, times: int = 1):
    return [step(NEED_MATH, times=times, structured={"need_math": needed, "reason": "scripted"})]


def math(code: str):
    return [step(MATH, tool_calls=[{"name": "run_python_code", "args": {"code": code}}])]


def parse(*answers: str):
    return [step(PARSE, structured={"final_answer": a}) for a in answers]


def choose(index: int):
    return [step(CHOOSE, structured={"index": index})]
