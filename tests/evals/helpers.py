"""Scripted models and tiny datasets for the evaluation tests."""

from __future__ import annotations

import re
from typing import Any

from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.datasets import Dataset, Item
from tests import kgot_script as S


def both(*patterns: str) -> str:
    """A regex that matches when every pattern occurs somewhere in the prompt."""
    return "^" + "".join(f"(?=.*{p})" for p in patterns)


def kgot_direct_steps(answers: dict[str, str], *, fail: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """KGoT through its shortest route (vote RETRIEVE, solve directly, no math, parse) for each marker.

    ``answers`` maps a marker that occurs in a question to the answer; ``fail`` maps a marker to an error
    that the solve step raises once (before answering normally): a 401, a fault that stops the run (a
    transient one would only degrade its step).
    """
    steps: list[dict[str, Any]] = []
    for marker, message in (fail or {}).items():
        steps.append(S.step(both(S.DIRECT, re.escape(marker)), times=1, **{"raise": message, "status": 401}))
    steps += S.votes("RETRIEVE", 0)
    for marker, answer in answers.items():
        steps.append(S.step(both(S.DIRECT, re.escape(marker)), times=0, structured={"solution": answer}))
        steps.append(S.step(both(S.PARSE, re.escape(marker)), times=0, structured={"final_answer": answer}))
    steps += S.need_math(False, times=0)
    return steps


FAST = {"solve_mode": "direct", "num_next_steps_decision": 2, "max_final_solution_parsing": 1,
        "api_backoff_base_s": 0.001, "max_api_retries": 0}


def tiny_gaia(n: int = 4) -> Dataset:
    items = [Item(id=f"t{i}", question=f"Question Q{i}: what is {i} + {i}?", gold=str(2 * i),
                  group=f"Level {1 + i % 2}") for i in range(n)]
    return Dataset(name="tiny", split="validation", items=items, scorer="gaia", group_label="Level")


class GatedChatModel(ScriptedChatModel):
    """A scripted model whose calls matching ``block`` never return (until the test cancels the run)."""

    block: str | None = None
    blocked: int = 0

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[override]
        import asyncio

        from kgagents.core.scripted import _message_text

        prompt = "\n".join(_message_text(m) for m in messages)
        if self.block and re.search(self.block, prompt, re.DOTALL):
            self.blocked += 1
            await asyncio.Event().wait()
        return self._generate(messages, stop=stop, **kwargs)
