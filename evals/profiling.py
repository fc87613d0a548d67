"""Where a benchmark's CPU goes: cProfile on the process's CPU clock, summed by component (the batch
benchmarks' ``--profile``, :mod:`kgagents.evals.bench_batch` and :mod:`kgagents.evals.bench_workflows`)."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any

#: Where the process's CPU goes, by the file a function lives in (first match wins); ``--profile`` sums the
#: functions' own CPU time (cProfile with the process's CPU clock: Python 3.12's profiler sees every thread, so a
#: thread's own clock would mix them up) under these names.
COMPONENTS: list[tuple[str, tuple[str, ...]]] = [
    ("openai SDK (request building, response models)", ("/openai/",)),
    ("HTTP client (aiohttp, httpx, yarl)", ("/aiohttp/", "/httpx2/", "/httpcore2/", "/httpx/", "/httpcore/", "/yarl/",
                                           "/multidict/", "/aiohappyeyeballs/", "/anyio/", "/h11/")),
    ("langchain-openai (payload, message conversion)", ("/langchain_openai/",)),
    ("langchain-core (chat-model run, callbacks, messages)", ("/langchain_core/", "/langsmith/")),
    ("pydantic", ("/pydantic/", "/pydantic_core/")),
    ("LangGraph (supersteps, tasks, channels)", ("/langgraph/",)),
    ("our LLM layer (nodes/llm.py, retries, models)", ("/nodes/llm.py", "/kgagents/core/retry.py", "/nodes/models.py",
                                                      "/nodes/http_client.py", "/kgagents/core/usage.py")),
    ("KGoT nodes, tools, sandbox, KG", ("/nodes/", "/tools/", "/graphs/", "/prompts/", "/kgagents/", "/kg/")),
    ("evaluation runner, SQLite checkpoints", ("/evals/", "sqlite3")),
    ("embeddings, page parsing (torch, sentence-transformers, numpy, HTML)",
     ("/torch/", "/sentence_transformers/", "/transformers/", "/tokenizers/", "/numpy/", "/faiss/", "/bs4/",
      "/lxml/", "/html5lib/", "/trafilatura/", "/scipy/", "/sklearn/")),
    ("asyncio", ("/asyncio/", "/concurrent/")),
    ("json, typing, copy, other standard library", ("/json/", "/typing.py", "/copy.py", "/inspect.py", "/enum.py",
                                                    "/lib/python3", "<frozen")),
]


#: Components whose functions work for their callers: their CPU is counted where they were called from.
HELPERS = ("asyncio", "json, typing, copy, other standard library",
           "other built-ins (sockets, locks, regular expressions, ...)", "pydantic")


def component(filename: str, function: str) -> str:
    """The :data:`COMPONENTS` name of a profiled function (built-ins are named by what they are)."""
    text = filename if filename != "~" else function
    for name, needles in COMPONENTS:
        if any(needle in text for needle in needles):
            return name
    return "other built-ins (sockets, locks, regular expressions, ...)" if filename == "~" else "other"


def attribute(stats: dict[Any, Any]) -> dict[str, float]:
    """Own CPU time per component, a helper's (:data:`HELPERS`: the standard library, built-ins, pydantic) given
    to the components that called it, split as its callers' shares of its time (what ``typing`` does for the
    OpenAI SDK is the SDK's cost). Time whose callers are all helpers too stays with the first helper."""
    memo: dict[Any, dict[str, float]] = {}

    def owners(key: Any, depth: int = 0) -> dict[str, float]:
        """How the time of ``key`` divides among non-helper components (fractions summing to 1)."""
        if key in memo:
            return memo[key]
        name = component(key[0], key[2])
        callers = stats.get(key, (0, 0, 0, 0, {}))[4]
        total = sum(edge[3] for edge in callers.values()) if callers else 0.0
        if name not in HELPERS or depth > 20 or total <= 0:
            result = {name: 1.0}
        else:
            memo[key] = {name: 1.0}  # a cycle through this function ends here
            result = {}
            for caller, edge in callers.items():
                for owner, part in owners(caller, depth + 1).items():
                    result[owner] = result.get(owner, 0.0) + part * edge[3] / total
        memo[key] = result
        return result

    shares: dict[str, float] = {}
    for key, (_, _, own, _, _) in stats.items():
        for owner, part in owners(key).items():
            shares[owner] = shares.get(owner, 0.0) + own * part
    return shares


async def profiled[T](run: Awaitable[T]) -> tuple[T, dict[str, float]]:
    """``run``'s result and its CPU seconds by component (cProfile on the process's CPU clock, :func:`attribute`)."""
    import cProfile  # the profiler: only for this profiling run
    import pstats  # the profiler: only for this profiling run

    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    try:
        result = await run
    finally:
        profiler.disable()
    return result, attribute(pstats.Stats(profiler).stats)  # type: ignore[attr-defined]


def cpu_shares(shares: dict[str, float], n: int, concurrency: int, cpu_s: float) -> dict[str, Any]:
    """The profile of ``n`` items at ``concurrency``: CPU per item and each component's share of it."""
    total = sum(shares.values()) or 1.0
    return {"items": n, "concurrency": concurrency, "profiled_cpu_ms_per_item": total / n * 1000,
            "cpu_ms_per_item": cpu_s / n * 1000,
            "shares": dict(sorted(((k, v / total) for k, v in shares.items()), key=lambda kv: -kv[1]))}


def profile_markdown(p: dict[str, Any] | None) -> list[str]:
    """The lines of a profile's table (:func:`cpu_shares`; none without a profile)."""
    if not p:
        return []
    lines = ["", (f"Where the CPU goes at C = {p['concurrency']} ({p['items']} items in one process, "
                  f"{p['cpu_ms_per_item']:.1f} ms per item under cProfile):"), "",
             "| component | share |", "|---|---|"]
    return lines + [f"| {name} | {share * 100:.1f} % |" for name, share in p["shares"].items() if share >= 0.005]
