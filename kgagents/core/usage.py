"""Token usage and cost, kept in the graph state through a reducer so that it survives checkpoints.

``usage`` in a workflow's state maps a model name to ``{"calls", "input_tokens", "output_tokens", "cost_usd"}``
(plus ``audio_seconds`` for a transcription model priced by the minute). Nodes return only the *delta* of the
calls they made; :func:`merge_usage` adds it up.
Prices (USD per million tokens, or per minute of audio) come from :data:`DEFAULT_PRICES`, extended by a JSON file
named in ``KGAGENTS_PRICES_FILE`` (``{"model-name": {"input": 0.15, "output": 0.6}}``, ``{"per_minute": 0.006}``)
or by :func:`register_price`. A model missing from the table has an **unknown** cost, ``None``, never 0: its
calls and tokens are counted, and every total that includes it says that it is incomplete (:class:`CostTotal`,
:func:`format_cost`).
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from kgagents.core.config import load_env


class ModelUsage(TypedDict):
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    """``None`` when the model has no price: the cost is unknown."""
    audio_seconds: NotRequired[float]
    """Audio sent to a transcription model (priced per minute, e.g. ``whisper-1``)."""
    unmeasured_calls: NotRequired[int]
    """Calls whose reply reported no token usage: their tokens are not in the counts and their cost is
    unknown."""
    estimated_tokens: NotRequired[int]
    """The tokens of the unmeasured calls as counted here (:func:`estimate_tokens` of what was sent and
    received): what a token budget counts for them; never in ``input_tokens`` / ``output_tokens``."""


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
    # embeddings (kgagents.tools.pgraph.embeddings.OpenAIEmbedder): input tokens only
    "text-embedding-ada-002": {"input": 0.10, "output": 0.0},
    "text-embedding-3-small": {"input": 0.02, "output": 0.0},
    "text-embedding-3-large": {"input": 0.13, "output": 0.0},
    # audio transcription (kgagents.tools.files.media): whisper-1 by the minute of audio; the gpt-4o transcribers by
    # token, with "input" at the audio-input price (their text prompt, usually empty, counts at it too)
    "whisper-1": {"per_minute": 0.006},
    "gpt-4o-transcribe": {"input": 6.00, "output": 10.00},
    "gpt-4o-mini-transcribe": {"input": 3.00, "output": 5.00},
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
            if isinstance(price, dict) and set(price) == {"per_minute"}:
                prices[str(model)] = {"per_minute": float(price["per_minute"])}
            else:
                prices[str(model)] = {"input": float(price["input"]), "output": float(price["output"])}
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"the price table {path}: {model!r} needs numbers for both \"input\" and "
                             f"\"output\" (USD per million tokens), or a \"per_minute\" price of audio, "
                             f"got {price!r}") from exc
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
            table: dict[str, dict[str, float]] | None = None, *, audio_seconds: float = 0.0) -> float | None:
    """Cost in USD of one call; ``None`` (unknown) when the table has no price for what the call used."""
    price = price_for(model, table)
    if not price:
        return None
    cost = 0.0
    if input_tokens or output_tokens or not audio_seconds:
        if "input" not in price or "output" not in price:
            return None
        cost += (input_tokens * price["input"] + output_tokens * price["output"]) / 1_000_000
    if audio_seconds:
        if "per_minute" not in price:
            return None
        cost += audio_seconds / 60 * price["per_minute"]
    return cost


#: Characters per token of the local count (:func:`estimate_tokens`) for ASCII text: OpenAI's rule of thumb for
#: English ("one token generally corresponds to ~4 characters").
CHARS_PER_TOKEN = 4
#: UTF-8 bytes per token of the local count for every other character. Tokenizers split text outside ASCII
#: into more tokens per character: a CJK character (3 bytes) is about 0.6-1.5 tokens, a Cyrillic or Greek one
#: (2 bytes) about 0.3-0.7, depending on the tokenizer. A third of a token per byte counts 1 token per CJK
#: character and 2/3 per Cyrillic one: near the middle for CJK, above most tokenizers for alphabets, so a token
#: budget errs towards stopping early rather than late.
BYTES_PER_TOKEN = 3


def estimate_tokens(text: str) -> int:
    """The tokens of ``text`` as counted locally when a server reports none: its ASCII characters over
    :data:`CHARS_PER_TOKEN` plus the UTF-8 bytes of its other characters over :data:`BYTES_PER_TOKEN`, rounded
    up. No tokenizer: the model behind an OpenAI-compatible server is unknown, and the tokenizers that ship
    with Python packages (tiktoken) download their tables on first use."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    other_bytes = len(text.encode("utf-8", "surrogatepass")) - ascii_chars
    units = ascii_chars * BYTES_PER_TOKEN + other_bytes * CHARS_PER_TOKEN  # in 1/(CHARS * BYTES) of a token
    return -(-units // (CHARS_PER_TOKEN * BYTES_PER_TOKEN))


def definition_text(definition: Any) -> str:
    """What a request sends beside its messages (a tool's definition, the output format), as the JSON it is
    sent as."""
    if isinstance(definition, str):
        return definition
    return json.dumps(definition, default=str, ensure_ascii=False, separators=(",", ":"))


def message_text(message: Any) -> str:
    """What a chat message carries that a model reads or writes: its text (every text part of a list) and its
    tool calls' names and arguments."""
    content = getattr(message, "content", message)
    if isinstance(content, str):
        parts = [content]
    else:
        parts = [part if isinstance(part, str) else str(part.get("text") or "") if isinstance(part, Mapping)
                 else "" for part in (content or [])]
    for call in getattr(message, "tool_calls", None) or []:
        parts.append(f"{call.get('name', '')} {json.dumps(call.get('args', {}), default=str)}")
    return "".join(parts)


def usage_entry(model: str, input_tokens: int, output_tokens: int, calls: int = 1, *, audio_seconds: float = 0.0,
                measured: bool = True, estimated_tokens: int = 0) -> Usage:
    """A one-model usage delta with its cost.

    ``measured=False`` records calls whose usage the provider did not report: they count, their cost is unknown,
    and ``estimated_tokens`` is their local token count (what a token budget counts).
    """
    cost = cost_of(model, input_tokens, output_tokens, audio_seconds=audio_seconds) if measured else None
    entry: ModelUsage = {
        "calls": calls,
        "input_tokens": int(input_tokens),
        "output_tokens": int(output_tokens),
        "cost_usd": None if cost is None else round(cost, 10),  # as merge_usage rounds
    }
    if audio_seconds:
        entry["audio_seconds"] = float(audio_seconds)
    if not measured:
        entry["unmeasured_calls"] = calls
        if estimated_tokens:
            entry["estimated_tokens"] = int(estimated_tokens)
    return {model: entry}


def reply_usage(message: Any, model: str, sent: Iterable[Any] = (), definitions: Iterable[Any] = ()) -> Usage:
    """The usage of one chat-model reply (an ``AIMessage``), under its model name (``response_metadata``'s,
    else ``model``): its tokens and cost, or — when the reply reports no usage — one call with unknown tokens
    and an unknown cost (never a known $0), its tokens counted locally (:func:`estimate_tokens`) from ``sent``
    (the messages of the request), ``definitions`` (what the request sent beside them: the bound tools'
    definitions, the output format; :func:`definition_text`) and the reply."""
    name = str((getattr(message, "response_metadata", None) or {}).get("model_name") or model)
    meta = getattr(message, "usage_metadata", None)
    if not meta:
        return unreported_usage(name, sent, definitions, message)
    return usage_entry(name, meta.get("input_tokens", 0), meta.get("output_tokens", 0))


def unreported_usage(model: str, sent: Iterable[Any] = (), definitions: Iterable[Any] = (),
                     reply: Any = None) -> Usage:
    """One call whose usage is unknown (its server reported none, or the reply was lost), counted locally from
    what it sent (messages and ``definitions``) and, when known, its ``reply``."""
    text = "".join(message_text(m) for m in sent) + "".join(definition_text(d) for d in definitions)
    if reply is not None:
        text += message_text(reply)
    return usage_entry(model, 0, 0, measured=False, estimated_tokens=estimate_tokens(text))


# -- calls made below a node's own code (an embeddings model inside a retriever) ------------------------------
@dataclass
class Meter:
    """What the paid calls made inside one graph node, below its own code (OpenAI embeddings inside a retriever,
    in worker threads), report to: their usage, which the node adds to its state update, and the run's budget
    (``admit`` raises when a call may not start, ``record`` counts one for the step's other calls). Set by
    :func:`kgagents.nodes.llm.metered` for the node's task; worker threads started with ``asyncio.to_thread``
    see it (the task's context is copied into them)."""

    admit: Callable[[], None] | None = None
    record: Callable[[Usage], None] | None = None
    usage: Usage = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


_meter: ContextVar[Meter | None] = ContextVar("kgagents_usage_meter", default=None)


def current_meter() -> Meter | None:
    """The meter of the running node, or None (a call made outside a metered node is not counted here)."""
    return _meter.get()


@contextmanager
def metering(meter: Meter) -> Iterator[Meter]:
    """Make ``meter`` the one the calls made inside the block report to."""
    token = _meter.set(meter)
    try:
        yield meter
    finally:
        _meter.reset(token)


def admit_call() -> None:
    """Ask the running node's meter whether a paid call may start (it raises when the run's budget is
    reached); a no-op outside a metered node."""
    meter = _meter.get()
    if meter is not None and meter.admit is not None:
        meter.admit()


def count_call(delta: Usage) -> None:
    """Report a paid call's usage to the running node's meter (its state update, the run's budget)."""
    meter = _meter.get()
    if meter is None:
        return
    with meter.lock:
        meter.usage = merge_usage(meter.usage, delta)
    if meter.record is not None:
        meter.record(delta)


def entry_cost(entry: Mapping[str, Any]) -> float | None:
    """The cost of one model's usage entry: its ``cost_usd``; an entry without one is unknown, like a model
    without a price, unless it records no calls, tokens or audio at all (then nothing was spent)."""
    if "cost_usd" in entry:
        cost = entry["cost_usd"]
        return None if cost is None else float(cost)
    spent = any(entry.get(key) for key in ("calls", "input_tokens", "output_tokens", "audio_seconds"))
    return None if spent else 0.0


def _add_costs(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a + b, 10)


def merge_usage(left: Usage | None, right: Usage | None) -> Usage:
    """Reducer: add two usage maps model by model (an unknown cost stays unknown)."""
    out: Usage = {k: dict(v) for k, v in (left or {}).items()}  # type: ignore[misc]
    for model, u in (right or {}).items():
        cur = out.setdefault(model, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0})
        cur["calls"] += int(u.get("calls", 0))
        cur["input_tokens"] += int(u.get("input_tokens", 0))
        cur["output_tokens"] += int(u.get("output_tokens", 0))
        cur["cost_usd"] = _add_costs(cur["cost_usd"], entry_cost(u))
        if u.get("audio_seconds") or cur.get("audio_seconds"):
            cur["audio_seconds"] = round(float(cur.get("audio_seconds", 0.0)) + float(u.get("audio_seconds", 0.0)), 6)
        if u.get("unmeasured_calls") or cur.get("unmeasured_calls"):
            cur["unmeasured_calls"] = int(cur.get("unmeasured_calls", 0)) + int(u.get("unmeasured_calls", 0))
        if u.get("estimated_tokens") or cur.get("estimated_tokens"):
            cur["estimated_tokens"] = int(cur.get("estimated_tokens", 0)) + int(u.get("estimated_tokens", 0))
    return out


def subtract_usage(total: Usage | None, before: Usage | None) -> Usage:
    """What ``total`` holds beyond ``before`` (a run's own usage in a state that already held some), per model
    with any calls, tokens or audio."""
    out: Usage = {}
    for model, u in (total or {}).items():
        b: Mapping[str, Any] = (before or {}).get(model) or {}
        delta: dict[str, Any] = {k: u.get(k, 0) - b.get(k, 0) for k in ("calls", "input_tokens", "output_tokens")}
        seconds = float(u.get("audio_seconds", 0.0)) - float(b.get("audio_seconds", 0.0))
        if not (delta["calls"] > 0 or delta["input_tokens"] > 0 or delta["output_tokens"] > 0 or seconds > 0):
            continue
        cost, spent = entry_cost(u), entry_cost(b)
        delta["cost_usd"] = None if cost is None or spent is None else round(cost - spent, 10)
        if seconds > 0:
            delta["audio_seconds"] = round(seconds, 6)
        unmeasured = int(u.get("unmeasured_calls", 0)) - int(b.get("unmeasured_calls", 0))
        if unmeasured > 0:
            delta["unmeasured_calls"] = unmeasured
        estimated = int(u.get("estimated_tokens", 0)) - int(b.get("estimated_tokens", 0))
        if estimated > 0:
            delta["estimated_tokens"] = estimated
        out[model] = delta  # type: ignore[assignment]
    return out


def total_cost(usage: Usage | None) -> float | None:
    """Total cost in USD over every model; ``None`` when any model's cost is unknown."""
    return sum_costs(entry_cost(u) for u in (usage or {}).values()).usd


def total_tokens(usage: Usage | None) -> dict[str, Any]:
    """Total input/output tokens and calls over every model, and (when any) the calls whose tokens are
    unknown (``unmeasured_calls``)."""
    usage = usage or {}
    totals: dict[str, Any] = {
        "calls": sum(u.get("calls", 0) for u in usage.values()),
        "input_tokens": sum(u.get("input_tokens", 0) for u in usage.values()),
        "output_tokens": sum(u.get("output_tokens", 0) for u in usage.values()),
    }
    unmeasured = sum(u.get("unmeasured_calls", 0) for u in usage.values())
    if unmeasured:
        totals["unmeasured_calls"] = unmeasured
    return totals


@dataclass(frozen=True)
class CostTotal:
    """A sum of costs some of which may be unknown: the known part and how many were unknown."""

    known_usd: float = 0.0
    unknown: int = 0
    """How many of the summed costs were unknown (models, items, ... whatever was summed)."""

    @property
    def usd(self) -> float | None:
        """The total, or ``None`` when any part of it is unknown."""
        return None if self.unknown else self.known_usd


def sum_costs(costs: Iterable[float | None]) -> CostTotal:
    """Add costs, keeping count of the unknown ones (``None``) instead of counting them as 0."""
    known: list[float] = []
    unknown = 0
    for cost in costs:
        if cost is None:
            unknown += 1
        else:
            known.append(float(cost))
    return CostTotal(round(math.fsum(known), 10), unknown)


def format_cost(cost: float | CostTotal | None, *, digits: int = 4, unit: str = "item") -> str:
    """A cost for people: ``$0.0123`` (``$1,234.56`` from $100 on), ``unknown`` for an unknown cost, and for a
    total with unknown parts ``$0.0123 + unknown (2 items without a price)`` (``unit`` names what was summed)."""
    if isinstance(cost, CostTotal):
        if not cost.unknown:
            return format_cost(cost.known_usd, digits=digits)
        plural = "" if cost.unknown == 1 else "s"
        return f"{format_cost(cost.known_usd, digits=digits)} + unknown ({cost.unknown} {unit}{plural} without a price)"
    if cost is None:
        return "unknown"
    return f"${cost:.{digits}f}" if cost < 100 else f"${cost:,.2f}"
