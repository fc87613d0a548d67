"""Token usage and cost: the price table, its extensions, and the ``usage`` reducer of the graph state."""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

from kgagents.core.usage import (
    DEFAULT_PRICES,
    CostTotal,
    cost_of,
    format_cost,
    merge_usage,
    price_for,
    price_table,
    register_price,
    reply_usage,
    subtract_usage,
    sum_costs,
    total_cost,
    total_tokens,
    usage_entry,
)
from tests.fakes import isolate_model_env


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_model_env(monkeypatch, tmp_path)


def write_prices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(content, encoding="utf-8")
    monkeypatch.setenv("KGAGENTS_PRICES_FILE", str(path))
    return path


# --------------------------------------------------------------------------------------------------
# price lookup


def test_published_prices() -> None:
    assert price_for("gpt-4o-mini") == {"input": 0.15, "output": 0.60}
    assert price_for("gpt-4o") == {"input": 2.50, "output": 10.00}


@pytest.mark.parametrize(("model", "family"), [
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ("gpt-4o-2024-08-06", "gpt-4o"),
    ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
    ("gpt-4.1-2025-04-14", "gpt-4.1"),
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
    ("openai/gpt-4o-mini", "gpt-4o-mini"),  # router-style names (OpenRouter, LiteLLM)
])
def test_dated_and_prefixed_names_fall_back_to_their_family(model: str, family: str) -> None:
    assert price_for(model) == DEFAULT_PRICES[family]


def test_an_unknown_model_has_an_unknown_cost_not_zero() -> None:
    assert price_for("my-local-llama") is None
    assert cost_of("my-local-llama", 1_000_000, 1_000_000) is None
    assert usage_entry("qwen2.5:7b", 100, 50) == {
        "qwen2.5:7b": {"calls": 1, "input_tokens": 100, "output_tokens": 50, "cost_usd": None}}


def test_unknown_costs_stay_unknown_in_sums_and_say_so() -> None:
    usage = merge_usage(usage_entry("gpt-4o-mini", 1_000_000, 0), usage_entry("my-local-llama", 10, 10))
    usage = merge_usage(usage, usage_entry("my-local-llama", 5, 5))
    assert usage["my-local-llama"] == {"calls": 2, "input_tokens": 15, "output_tokens": 15, "cost_usd": None}
    assert total_cost(usage) is None
    assert sum_costs(u["cost_usd"] for u in usage.values()) == CostTotal(0.15, 1)
    assert format_cost(None) == "unknown" and format_cost(0.0) == "$0.0000" and format_cost(1234.5) == "$1,234.50"
    assert format_cost(CostTotal(0.15, 1), unit="model") == "$0.1500 + unknown (1 model without a price)"
    assert format_cost(sum_costs([0.1, None, None])) == "$0.1000 + unknown (2 items without a price)"
    assert format_cost(sum_costs([0.1, 0.2])) == "$0.3000" and sum_costs([]).usd == 0.0


def test_kgagents_show_prints_an_unknown_cost_as_unknown() -> None:
    from kgagents.cli.report import format_run

    usage = merge_usage(usage_entry("gpt-4o-mini", 1_000_000, 0), usage_entry("my-local-llama", 10, 20))
    text = format_run("kgot", "t1", {"question": "q", "final_answer": "a", "usage": usage})
    assert "my-local-llama: 1 calls, 10 in / 20 out tokens, unknown" in text
    assert "gpt-4o-mini: 1 calls, 1000000 in / 0 out tokens, $0.150000" in text
    assert "total: 2 calls, 1000010 in / 20 out tokens, $0.150000 + unknown (1 model without a price)" in text


def test_a_reply_without_usage_has_unknown_tokens_and_cost_not_zero() -> None:
    from langchain_core.messages import AIMessage

    measured = reply_usage(AIMessage("a", usage_metadata={"input_tokens": 1000, "output_tokens": 100,
                                                          "total_tokens": 1100}), "gpt-4o-mini")
    assert measured["gpt-4o-mini"]["cost_usd"] == pytest.approx(0.00021) and "unmeasured_calls" not in \
        measured["gpt-4o-mini"]
    silent = reply_usage(AIMessage("b", response_metadata={"model_name": "gpt-4o-mini-2024-07-18"}), "x")
    assert silent == {"gpt-4o-mini-2024-07-18": {"calls": 1, "input_tokens": 0, "output_tokens": 0,
                                                 "cost_usd": None, "unmeasured_calls": 1,
                                                 "estimated_tokens": 1}}  # "b", counted locally
    both = merge_usage(merge_usage(measured, silent), reply_usage(AIMessage("c"), "gpt-4o-mini"))
    assert both["gpt-4o-mini"]["cost_usd"] is None and both["gpt-4o-mini"]["unmeasured_calls"] == 1
    assert total_cost(both) is None and total_tokens(both) == {"calls": 3, "input_tokens": 1000,
                                                              "output_tokens": 100, "unmeasured_calls": 2}
    assert subtract_usage(both, measured)["gpt-4o-mini"] == {
        "calls": 1, "input_tokens": 0, "output_tokens": 0, "cost_usd": None, "unmeasured_calls": 1,
        "estimated_tokens": 1}


@pytest.mark.slow
async def test_a_server_that_reports_no_usage_is_an_unknown_cost(tmp_path: Path) -> None:
    from kgagents.nodes.kgot import KGoTContext
    from kgagents.nodes.llm import LLMCaller
    from kgagents.nodes.models import build_chat_model
    from tests.fakes.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(default_usage=None) as server:
        server.reply("an answer")
        model = build_chat_model("gpt-4o-mini", base_url=server.base_url, timeout_s=5.0)
        llm = LLMCaller(KGoTContext(model=model), "graph_executor")
        assert await llm.text("q") == "an answer"
    [entry] = llm.usage.values()
    assert entry["calls"] == 1 and entry["cost_usd"] is None and entry["unmeasured_calls"] == 1


def test_audio_priced_by_the_minute() -> None:
    assert cost_of("whisper-1", 0, 0, audio_seconds=120) == pytest.approx(0.012)
    assert cost_of("whisper-1", 0, 0) is None                          # a duration price, but no duration
    assert cost_of("gpt-4o-mini", 0, 0, audio_seconds=10) is None      # a token price, but audio
    a = usage_entry("whisper-1", 0, 0, audio_seconds=30)
    b = usage_entry("whisper-1", 0, 0, audio_seconds=90)
    merged = merge_usage(a, b)["whisper-1"]
    assert merged["audio_seconds"] == 120 and merged["cost_usd"] == pytest.approx(0.012)
    assert usage_entry("whisper-1", 0, 0, measured=False)["whisper-1"]["cost_usd"] is None
    assert subtract_usage(merge_usage(a, b), a) == {"whisper-1": {
        "calls": 1, "input_tokens": 0, "output_tokens": 0, "cost_usd": pytest.approx(0.009), "audio_seconds": 90}}


def test_a_prices_file_may_price_audio_by_the_minute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_prices(tmp_path, monkeypatch, json.dumps({"my-whisper": {"per_minute": 0.01}}))
    assert cost_of("my-whisper", 0, 0, audio_seconds=60) == pytest.approx(0.01)


def test_cost_is_per_million_tokens() -> None:
    assert cost_of("gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)
    assert cost_of("gpt-4o-mini", 0, 1_000_000) == pytest.approx(0.60)
    assert cost_of("gpt-4o-mini", 2000, 1000) == pytest.approx((2000 * 0.15 + 1000 * 0.60) / 1e6)
    entry = usage_entry("gpt-4o-mini-2024-07-18", 2000, 1000)
    assert entry["gpt-4o-mini-2024-07-18"]["cost_usd"] == pytest.approx(0.0009)


def test_an_explicit_table_is_used_as_given() -> None:
    table = {"a": {"input": 1.0, "output": 1.0}}
    assert cost_of("a", 1_000_000, 0, table) == 1.0
    assert cost_of("gpt-4o-mini", 1_000_000, 0, table) is None


# --------------------------------------------------------------------------------------------------
# extending the table


def test_prices_file_adds_and_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_prices(tmp_path, monkeypatch, json.dumps({
        "my-local-llama": {"input": 0.0, "output": 0.0},
        "my-hosted-model": {"input": 1, "output": "2.5"},
        "gpt-4o-mini": {"input": 0.2, "output": 0.8},
    }))
    table = price_table()
    assert table["my-hosted-model"] == {"input": 1.0, "output": 2.5}
    assert table["gpt-4o-mini"] == {"input": 0.2, "output": 0.8}
    assert table["gpt-4o"] == DEFAULT_PRICES["gpt-4o"]  # the rest stays
    assert cost_of("my-hosted-model-v2", 1_000_000, 1_000_000) == pytest.approx(3.5)  # family fallback works too
    assert DEFAULT_PRICES["gpt-4o-mini"] == {"input": 0.15, "output": 0.60}  # the defaults are not modified


def test_register_price_wins_over_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_prices(tmp_path, monkeypatch, json.dumps({"custom": {"input": 1, "output": 1}}))
    register_price("custom", 5, 7)
    register_price("gpt-4o-mini", 0, 0)
    assert price_for("custom") == {"input": 5.0, "output": 7.0}
    assert cost_of("gpt-4o-mini", 10**6, 10**6) == 0.0


def test_no_prices_file_means_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGAGENTS_PRICES_FILE", "  ")
    assert price_table() == DEFAULT_PRICES


@pytest.mark.parametrize(("content", "needle"), [
    ("{not json", "cannot read the price table"),
    ("[1, 2]", "must be a JSON object"),
    ('{"m": {"input": 1}}', "'m' needs numbers"),
    ('{"m": 3}', "'m' needs numbers"),
    ('{"m": {"input": "cheap", "output": 1}}', "'m' needs numbers"),
])
def test_prices_file_errors_are_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str,
                                      needle: str) -> None:
    path = write_prices(tmp_path, monkeypatch, content)
    with pytest.raises(ValueError) as info:
        price_table()
    assert needle in str(info.value)
    assert str(path) in str(info.value)


def test_missing_prices_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nowhere" / "prices.json"
    monkeypatch.setenv("KGAGENTS_PRICES_FILE", str(missing))
    with pytest.raises(ValueError, match="cannot read the price table") as info:
        cost_of("gpt-4o-mini", 1, 1)
    assert str(missing) in str(info.value)


# --------------------------------------------------------------------------------------------------
# the reducer


def test_merge_usage_adds_model_by_model() -> None:
    left = {"gpt-4o-mini": {"calls": 1, "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.1}}
    right = {"gpt-4o-mini": {"calls": 2, "input_tokens": 20, "output_tokens": 6, "cost_usd": 0.2},
             "claude-haiku-4-5": {"calls": 1, "input_tokens": 3, "output_tokens": 4, "cost_usd": 0.01}}
    before = json.dumps([left, right], sort_keys=True)

    merged = merge_usage(left, right)

    assert merged == {
        "gpt-4o-mini": {"calls": 3, "input_tokens": 30, "output_tokens": 11, "cost_usd": pytest.approx(0.3)},
        "claude-haiku-4-5": {"calls": 1, "input_tokens": 3, "output_tokens": 4, "cost_usd": 0.01},
    }
    assert json.dumps([left, right], sort_keys=True) == before  # inputs untouched


def test_merge_usage_identity_and_missing_fields() -> None:
    entry = usage_entry("gpt-4o", 100, 10)
    assert merge_usage(None, None) == {}
    assert merge_usage({}, entry) == entry
    assert merge_usage(entry, None) == entry
    assert merge_usage(entry, {}) == entry
    partial: Any = {"gpt-4o": {"input_tokens": 5}}
    # tokens without a cost are not free: the sum's cost is unknown, never the known part alone
    assert merge_usage(entry, partial)["gpt-4o"] == {**entry["gpt-4o"], "input_tokens": 105, "cost_usd": None}
    assert merge_usage(entry, {"gpt-4o": {"calls": 0}})["gpt-4o"] == entry["gpt-4o"]  # nothing used or spent


def test_an_entry_without_a_cost_is_unknown_everywhere_never_zero() -> None:
    """Every place that reads a usage entry's cost treats a missing cost as unknown, as a model without a
    price (merge, subtract, totals and ``kgagents show``)."""
    from kgagents.cli.report import format_run

    usage: Any = {"gpt-4o-mini": usage_entry("gpt-4o-mini", 1_000_000, 0)["gpt-4o-mini"],
                  "hand-made": {"calls": 2, "input_tokens": 10, "output_tokens": 5}}
    assert total_cost(usage) is None
    assert subtract_usage(usage, {})["hand-made"]["cost_usd"] is None
    assert merge_usage({}, usage)["hand-made"]["cost_usd"] is None
    text = format_run("kgot", "t1", {"question": "q", "final_answer": "a", "usage": usage})
    assert "hand-made: 2 calls, 10 in / 5 out tokens, unknown" in text
    assert "$0.150000 + unknown (1 model without a price)" in text


def test_merge_usage_is_associative_and_commutative() -> None:
    a, b, c = usage_entry("gpt-4o-mini", 1, 2), usage_entry("gpt-4o-mini", 3, 4), usage_entry("gpt-4o", 5, 6)
    assert merge_usage(merge_usage(a, b), c) == merge_usage(a, merge_usage(b, c))
    assert merge_usage(a, c) == merge_usage(c, a)


def test_cost_sums_stay_exact_enough() -> None:
    total: dict = {}
    for _ in range(1000):
        total = merge_usage(total, usage_entry("gpt-4o-mini", 1000, 100))
    assert total["gpt-4o-mini"]["calls"] == 1000
    assert total["gpt-4o-mini"]["cost_usd"] == pytest.approx(1000 * (1000 * 0.15 + 100 * 0.60) / 1e6, rel=1e-9)


def test_totals() -> None:
    usage = merge_usage(usage_entry("gpt-4o-mini", 1_000_000, 0), usage_entry("gpt-4o", 0, 1_000_000))
    assert total_cost(usage) == pytest.approx(0.15 + 10.0)
    assert total_tokens(usage) == {"calls": 2, "input_tokens": 1_000_000, "output_tokens": 1_000_000}
    assert total_cost(None) == 0 and total_tokens(None) == {"calls": 0, "input_tokens": 0, "output_tokens": 0}


async def test_parallel_branches_add_up_in_the_state() -> None:
    """Fan-out nodes that each return their own usage delta: the reducer sums them in one superstep."""
    from langgraph.graph import END, START, StateGraph

    from kgagents.nodes.state import UsageState

    class State(UsageState, total=False):
        log: Annotated[list[str], operator.add]

    def branch(name: str, tokens: int):
        def node(state: State) -> dict[str, Any]:
            return {"usage": usage_entry("gpt-4o-mini", tokens, tokens // 10), "log": [name]}
        return node

    builder = StateGraph(State)
    for name, tokens in [("a", 1000), ("b", 2000), ("c", 3000)]:
        builder.add_node(name, branch(name, tokens))
        builder.add_edge(START, name)
        builder.add_edge(name, "d")
    builder.add_node("d", branch("d", 4000))
    builder.add_edge("d", END)

    out = await builder.compile().ainvoke({"usage": usage_entry("gpt-4o", 1, 1)})

    assert out["usage"]["gpt-4o-mini"]["calls"] == 4
    assert out["usage"]["gpt-4o-mini"]["input_tokens"] == 10_000
    assert out["usage"]["gpt-4o-mini"]["output_tokens"] == 1_000
    assert out["usage"]["gpt-4o"]["calls"] == 1
    assert sorted(out["log"]) == ["a", "b", "c", "d"]


def test_usage_is_plain_json() -> None:
    class Holder(TypedDict):
        usage: dict

    holder: Holder = {"usage": merge_usage(usage_entry("gpt-4o-mini", 1, 1), usage_entry("x", 2, 2))}
    assert json.loads(json.dumps(holder)) == holder
