"""What KGoT's steps share: model calls that may fail, the KG's query language, how the task and the tool
calls read in a prompt."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel

from kgagents.nodes.kgot.state import ToolCallRecord
from kgagents.nodes.llm import LLMCaller, LLMError
from kgagents.nodes.state import Failure
from kgagents.prompts import kgot as P
from kgagents.prompts import kgot_cypher, kgot_sparql  # noqa: F401  (register the Cypher and SPARQL prompt parts)
from kgagents.tools.base import truncate
from kgagents.tools.kg.base import KGStore, ReadResult


async def ask[S: BaseModel](llm: LLMCaller, prompt: str, schema: type[S], outcome: str) -> S | None:
    """``llm.structured`` for a step that goes on without the reply (appendix B.4.1: log the error, bypass the
    failing query, continue): a call that fails for good, an API fault or replies that never parse, is noted
    in the state's failures with ``outcome`` (what the step does instead) and gives ``None``."""
    try:
        return await llm.structured(prompt, schema)
    except LLMError as exc:
        llm.failed(exc, outcome)
        return None


async def ask_samples[S: BaseModel](llm: LLMCaller, prompt: str, schema: type[S], n: int, config: RunnableConfig,
                                   outcome: str, *, first: int = 0) -> list[S | Failure]:
    """``n`` samples of one structured decision (:meth:`LLMCaller.structured_samples`), in order; a sample that
    failed for good is noted, as :func:`ask` notes it, with ``outcome`` (``{sample}``: its number, counted from
    ``first``) and stands as its :class:`Failure`."""
    replies = await llm.structured_samples(prompt, schema, n, config=config)
    return [llm.failed(reply, outcome.format(sample=first + i)) if isinstance(reply, LLMError) else reply
            for i, reply in enumerate(replies)]


def strip_fences(code: str) -> str:
    """Remove markdown code fences an LLM may wrap code in."""
    text = code.strip()
    match = re.match(r"^```[\w+-]*\s*\n(.*?)\n?```\s*$", text, re.DOTALL)
    return match.group(1) if match else text


def language_of(store: KGStore) -> P.QueryLanguage:
    """The prompt parts for the store's query language, as its server's dialect speaks it (Neo4j's Cypher is not
    FalkorDB's)."""
    try:
        language = P.LANGUAGES[store.query_language]
    except KeyError as exc:
        raise ValueError(f"no prompts for the query language {store.query_language!r}") from exc
    return language.for_dialect(getattr(store, "dialect", None))


def describe_tool_calls(calls: list[ToolCallRecord]) -> str:
    if not calls:
        return "No tool calls have been made yet."
    lines = []
    for call in calls:
        status = "ok" if call["ok"] else "FAILED"
        args = json.dumps(call["args"], ensure_ascii=False)
        lines.append(f"- iteration {call['iteration']}: {call['name']}({args}) -> {status}: "
                     f"{truncate(call['output'], 300)}")
    return "\n".join(lines)


def describe_attachments(paths: list[str] | None) -> str:
    return "\n".join(f"- {p}" for p in paths) if paths else "(none)"


def problem_text(state: Mapping[str, Any]) -> str:
    question = state.get("question", "")
    attachments = state.get("attachments") or []
    if attachments:
        question += "\n\nAttached files:\n" + describe_attachments(attachments)
    return question


def call_key(name: str, args: dict[str, Any]) -> str:
    return f"{name}:{json.dumps(args, sort_keys=True, ensure_ascii=False)}"


def normalise_answer(answer: str) -> str:
    return re.sub(r"\s+", " ", answer.strip().strip(".").lower())


def _result_text(result: ReadResult) -> str:
    value = result.result
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
