"""Token usage and cost, kept in the graph state through a reducer so that it survives checkpoints.

``usage`` in a workflow's state maps a model name to ``{"calls", "input_tokens", "output_tokens", "cost_usd"}``.
Nodes return only the *delta* of the calls they made; :func:`merge_usage` adds it up.
Prices (USD per million tokens) come from :data:`DEFAULT_PRICES`, extended by a JSON file named in
``KGAGENTS_PRICES_FILE`` (``{"model-name": {"input": 0.15, "output": 0.6}}``) or by :func:`register_price`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypedDict

from kgagents.config import load_env


class ModelUsage(TypedDict):
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


Usage = dict[str, ModelUsage]

#: USD per 1M tokens (input, output), as published by the providers. Extend it with a prices file.
DEFAULT_PRICES: dict[str, dict[str, float]] = {
    "gpt-4o-mini": {"input": 0.15, "output": 0.60},
    "gpt-4o": {"input": 2.50, "output": 10.00},
    "gpt-4.1": {"input": 2.00, "output": 8.00},
    "gpt-4.1-mini": {"input": 0.40, "output": 1.60},
    "gpt-4.1-nano": {"input": 0.10, "output": 0.40},
    "gpt-5": {"input": 1.25, "output": 10.00},
    "gpt-5-mini": {"input": 0.25, "output": 2.00},
    "gpt-5-nano": {"input": 0.05, "output": 0.40},
    "o3-mini": {"input": 1.10, "output": 4.40},
    "o4-mini": {"input": 1.10, "output": 4.40},
    "claude-sonnet-4-5": {"input": 3.00, "output": 15.00},
    "claude-haiku-4-5": {"input": 1.00, "output": 5.00},
    "claude-opus-4-1": {"input": 15.00, "output": 75.00},
}

_extra_prices: dict[str, dict[str, float]] = {}


def register_price(model: str, input_per_million: float, output_per_million: float) -> None:
    """Add or override the price of ``model`` (USD per million tokens) for this process."""
    _extra_prices[model] = {"input": float(input_per_million), "output": float(output_per_million)}


_file_cache: dict[str, dict[str, dict[str, float]]] = {}


def _file_prices() -> dict[str, dict[str, float]]:
    """The prices file's table, read once per process and path (so accounting inside a graph does no I/O).

    Only its one variable is read (every model call comes here), the same way :func:`get_settings` reads it.
    """
    load_env()
    path = (os.environ.get("KGAGENTS_PRICES_FILE") or "").strip()
    if not path:
        return {}
    if str(path) not in _file_cache:
        _file_cache[str(path)] = _read_prices(Path(path))
    return _file_cache[str(path)]


def _read_prices(path: Path) -> dict[str, dict[str, float]]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the price table {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"the price table {path} must be a JSON object of model -> {{input, output}}")
    prices: dict[str, dict[str, float]] = {}
    for model, price in data.items():
        try:
            prices[str(model)] = {"input": float(price["input"]), "output": float(price["output"])}
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"the price table {path}: {model!r} needs numbers for both \"input\" and "
                             f"\"output\" (USD per million tokens), got {price!r}") from exc
    return prices


def price_table() -> dict[str, dict[str, float]]:
    """The price table in force: defaults, then the prices file, then :func:`register_price` entries."""
    return {**DEFAULT_PRICES, **_file_prices(), **_extra_prices}


def price_for(model: str, table: dict[str, dict[str, float]] | None = None) -> dict[str, float] | None:
    """Price of ``model``; a dated release (``gpt-4o-mini-2024-07-18``) falls back to its family."""
    table = price_table() if table is None else table
    if model in table:
        return table[model]
    base = model.split("/")[-1]
    candidates = [name for name in table if base.startswith(name)]
    return table[max(candidates, key=len)] if candidates else None


def cost_of(model: str, input_tokens: int, output_tokens: int,
            table: dict[str, dict[str, float]] | None = None) -> float:
    """Cost in USD of one call; unknown models cost 0 (and show as such in reports)."""
    price = price_for(model, table)
    if not price:
        return 0.0
    return (input_tokens * price["input"] + output_tokens * price["output"]) / 1_000_000


def usage_entry(model: str, input_tokens: int, output_tokens: int, calls: int = 1) -> Usage:
    """A one-model usage delta with its cost."""
    return {
        model: {
            "calls": calls,
            "input_tokens": int(input_tokens),
            "output_tokens": int(output_tokens),
            "cost_usd": round(cost_of(model, input_tokens, output_tokens), 10),  # as merge_usage rounds
        }
    }


def merge_usage(left: Usage | None, right: Usage | None) -> Usage:
    """Reducer: add two usage maps model by model."""
    out: Usage = {k: dict(v) for k, v in (left or {}).items()}  # type: ignore[misc]
    for model, u in (right or {}).items():
        cur = out.setdefault(model, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0})
        cur["calls"] += int(u.get("calls", 0))
        cur["input_tokens"] += int(u.get("input_tokens", 0))
        cur["output_tokens"] += int(u.get("output_tokens", 0))
        cur["cost_usd"] = round(cur["cost_usd"] + float(u.get("cost_usd", 0.0)), 10)
    return out


def total_cost(usage: Usage | None) -> float:
    """Total cost in USD over every model."""
    return round(sum(u.get("cost_usd", 0.0) for u in (usage or {}).values()), 10)


def total_tokens(usage: Usage | None) -> dict[str, Any]:
    """Total input/output tokens and calls over every model."""
    usage = usage or {}
    return {
        "calls": sum(u.get("calls", 0) for u in usage.values()),
        "input_tokens": sum(u.get("input_tokens", 0) for u in usage.values()),
        "output_tokens": sum(u.get("output_tokens", 0) for u in usage.values()),
    }
