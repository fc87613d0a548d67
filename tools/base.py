"""Running a tool the way every workflow does: bounded retries with backoff, output cut to fit a prompt,
and a clear error string instead of an exception that would end the run (KGoT paper, appendix B.4.2)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool

from kgagents.core.errors import KGAgentsError
from kgagents.core.retry import ModelUnavailableError


class ToolFailure(KGAgentsError, RuntimeError):
    """Raised by a tool for a failure that retrying will not fix (bad arguments, missing file)."""


@dataclass
class ToolRun:
    """What running one tool call gave."""

    output: str
    ok: bool
    attempts: int
    error: str | None = None


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters, saying how much was left out."""
    if limit <= 0 or len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut ...]"


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    content = getattr(value, "content", None)
    if isinstance(content, str):
        return content
    return str(value)


async def run_tool_with_retry(tool: BaseTool, args: dict[str, Any], *, max_retries: int = 6,
                              backoff_base_s: float = 1.0, backoff_max_s: float = 60.0,
                              max_output_chars: int = 12_000) -> ToolRun:
    """Invoke ``tool`` with ``args``; retry failures (not :class:`ToolFailure`) up to ``max_retries`` times."""
    attempt = 0
    while True:
        attempt += 1
        try:
            value = await tool.ainvoke(args)
            return ToolRun(truncate(_as_text(value), max_output_chars), True, attempt)
        except ToolFailure as exc:
            return ToolRun(f"Error: {tool.name} failed: {exc}", False, attempt, str(exc))
        except ModelUnavailableError:
            raise  # the tools' model cannot be used at all: the run stops, as for the controller's
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error string
            error = f"{type(exc).__name__}: {exc}"
            if attempt >= max_retries:
                return ToolRun(f"Error: {tool.name} failed after {attempt} attempt(s): {error}", False,
                               attempt, error)
            await asyncio.sleep(random.uniform(0, min(backoff_max_s, backoff_base_s * 2 ** (attempt - 1))))
