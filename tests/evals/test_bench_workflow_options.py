"""The options of ``bench_batch --workflow ark|grounded|agent-g`` reach the runs: ``--processes`` (worker
processes for the batch runs), ``--set`` and ``--vary`` (context values, variants measured in turn). Wiring only:
nothing here is timed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from kgagents.evals import bench_batch, bench_workflows
from kgagents.evals.bench_workflows import bench_for, setting, variants, workflow_markdown
from kgagents.evals.datasets import Dataset, Item
from kgagents.evals.workers import processes_for


def test_settings_and_variants_parse():
    assert setting("embedding_cache=off") == ("embedding_cache", "off")
    assert setting("page_chars=2000") == ("page_chars", 2000) and setting("x=[1, 2]") == ("x", [1, 2])
    assert variants("embedding_cache=off,memory") == [{"embedding_cache": "off"}, {"embedding_cache": "memory"}]
    assert variants("page_chars=[1000, 3000]") == [{"page_chars": 1000}, {"page_chars": 3000}]
    assert variants(None) == [{}]
    with pytest.raises(ValueError, match="KEY=VALUE"):
        setting("no equals sign")


def test_processes_per_concurrency():
    assert [processes_for(2, c) for c in (1, 2, 64, 128)] == [1, 2, 2, 2]
    assert processes_for("auto", 1) == 1


def test_the_command_line_hands_the_options_to_the_workflow_benchmark(monkeypatch, capsys):
    seen = {}

    async def fake(workflow, **kwargs):
        seen.update(kwargs, workflow=workflow)
        raise SystemExit(0)

    monkeypatch.setattr(bench_batch, "run_workflow_benchmark", fake)
    with pytest.raises(SystemExit):
        bench_batch.main(["--workflow", "agent-g", "--processes", "2", "--concurrency", "64", "128",
                          "--set", "page_chars=2000", "--vary", "embedding_cache=off,memory", "--graph", "big"])
    assert seen["workflow"] == "agent-g" and seen["processes"] == 2 and seen["concurrencies"] == [64, 128]
    assert seen["graph"] == "big"
    assert seen["values"] == {"page_chars": 2000}
    assert seen["vary"] == [{"embedding_cache": "off"}, {"embedding_cache": "memory"}]
    for argv, message in ((["--set", "x=1"], "for --workflow ark|grounded|agent-g"),
                          (["--workflow", "ark", "--set", "x"], "KEY=VALUE"),
                          (["--workflow", "ark", "--model-path", "lean"], "http model path")):
        with pytest.raises(SystemExit):
            bench_batch.main(argv)
        assert message in capsys.readouterr().err


async def test_batch_runs_go_to_worker_processes_and_variants_to_the_context(monkeypatch, tmp_path):
    calls = []

    async def fake_evaluate(options, data):
        calls.append(options)
        return SimpleNamespace(records=[{"id": i.id, "usage": {"m": {"calls": 3}}, "wall_s": 0.1}
                                        for i in data.items])

    monkeypatch.setattr(bench_workflows, "evaluate", fake_evaluate)
    bench = bench_for("ark").with_values({"embedding_cache": "off"})
    data = Dataset(name="d", split="s", scorer="gaia", items=[Item(id="a", question="q?", gold="x")])
    result = await bench_workflows.batch(bench, "http://127.0.0.1:1/v1", data, tmp_path, [1, 64, 128], 1, 2,
                                         processes=2)
    sequential, *runs = calls
    assert sequential.processes == 1 and [o.processes for o in runs] == [1, 2, 2]
    assert [o.concurrency for o in runs] == [1, 64, 128] and len(runs) == 3
    assert all(o.context_values["embedding_cache"] == "off" for o in calls)
    rows = result["rows"]
    assert [r["processes"] for r in rows] == [1, 2, 2] and rows[0]["cpu_s"] is not None and rows[1]["cpu_s"] is None
    shown = workflow_markdown({"workflow": "ark", "dataset": "cr-lt", "preset": None, "latency_s": 0.2,
                               "values": {}, "single_task": [], "batch": result, "profile": None, "memory": None,
                               "variants": [{"values": {"embedding_cache": "off"}, "single_task": [],
                                             "batch": result, "load_avg": [(1.0, 1.0, 1.0), (2.0, 1.0, 1.0)]}],
                               "machine": {"cpus": 2, "load_avg": (2.0, 1.0, 1.0)}})
    assert "| 128 | 2 | 128 |" in shown and '`embedding_cache="off"`' in shown and "load average 1.0 before" in shown


def test_a_variant_reaches_the_memory_runs(monkeypatch):
    """The memory runs (a process of their own) get the benchmark's context values and its graph."""
    argv = []

    def fake_run(command, **kwargs):
        argv.append(command)
        return SimpleNamespace(returncode=0, stdout='{"rss_peak_mb": 2, "rss_before_mb": 1, "concurrency": 1}\n')

    monkeypatch.setattr(bench_workflows.subprocess, "run", fake_run)
    bench = dataclasses.replace(bench_for("agent-g"), values={"embedding_cache": "off"})
    bench_workflows.memory(bench, "http://x", 4)
    assert argv[0][-2:] == ['{"embedding_cache": "off"}', ""] and Path(argv[0][0]).name.startswith("python")
    bench_workflows.memory(dataclasses.replace(bench, graph="syn-1m"), "http://x", 4)
    assert argv[-1][-1] == "syn-1m"


def test_the_trace_records_tool_runs_only_when_asked():
    """KGoT's critical path counts its tool calls (they wait like remote calls); the other workflows' do not."""
    from uuid import uuid4

    from kgagents.evals.bench_batch import _critical
    from kgagents.evals.bench_workflows import CallTrace

    for tools, recorded in ((False, 0), (True, 1)):
        trace, run = CallTrace(tools=tools), uuid4()
        trace.on_tool_start({}, "x", run_id=run)
        trace.on_tool_end("y", run_id=run)
        assert [stage for _, _, stage in trace.calls] == ["tool"] * recorded
    assert _critical({"rounds": 10, "critical_path_s": 2.0, "wall_over_critical": 1.03}) == (
        "; its model and tool calls in 10 rounds (critical path 2.00 s): wall / critical path 1.03")
    assert _critical({"concurrent_s": 2.0}) == ""


def test_another_graph_replaces_every_items_graph_and_only_where_items_have_one(tmp_path):
    grounded = dataclasses.replace(bench_for("grounded"), graph="/data/syn-1m")
    data = grounded.load(tmp_path)
    assert data.items and {item.inputs["graph"] for item in data.items} == {"/data/syn-1m"}
    ark = dataclasses.replace(bench_for("ark"), graph="/data/syn-1m")
    with pytest.raises(ValueError, match="name no static graph"):
        ark.load(tmp_path)
