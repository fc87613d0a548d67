"""The benchmark still runs (a smoke run without latency; the numbers are not checked)."""

from __future__ import annotations

import pytest

from evals.bench_batch import markdown, run_benchmark
from tools.manager import registered_names


async def test_benchmark_smoke():
    result = await run_benchmark(0.0, [2], "enhance", True, sequential_items=1, waves=1, repeats=1)
    assert result["calls_per_item"] == 19 and result["batch"][0]["items"] == 2
    assert result["single_task"]["sequential_s"] > 0
    assert "| 2 | 2 |" in markdown(result)
    assert "simulated_lookup" not in registered_names()


@pytest.mark.slow
async def test_benchmark_smoke_with_worker_processes():
    result = await run_benchmark(0.0, [2], "direct", True, sequential_items=1, waves=1, repeats=1, processes=2)
    row = result["batch"][0]
    assert row["processes"] == 2 and row["items"] == 2 and row["loop_cpu_s"] is None
    assert result["calls_per_item"] == 10 and "| 2 | 2 |" in markdown(result) and "2 process(es)" in markdown(result)
