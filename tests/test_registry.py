"""The workflow registry: every registered workflow builds, is served by ``langgraph.json``, has a demo or says why
not, and its adapter and formatter resolve; the CLI, the runner and the report read it."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from kgagents.graphs import registry
from kgagents.graphs.spec import Workflow, resolve
from kgagents.tools.pgraph.embeddings import EMBEDDING_STACK

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def specs() -> list[Workflow]:
    return registry.workflows()


def test_langgraph_json_serves_exactly_the_registered_workflows(specs):
    served = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
    assert {name: entry["path"] for name, entry in served.items()} == {spec.name: spec.served for spec in specs}
    # what an MCP host shows for each tool: a description of its own, longer than the CLI's one line
    assert all(len(entry["description"]) > 60 for entry in served.values())


@pytest.mark.parametrize("name", registry.names())
def test_every_workflow_builds_is_served_and_resolves(name):
    spec = registry.get(name)
    assert spec.name == name and spec.description and "\n" not in spec.description
    graph = spec.compile_graph()
    assert graph.name == name and graph.builder.context_schema is spec.context
    served = resolve(spec.served)
    assert served.name == name and served.checkpointer is None  # langgraph dev brings its own
    assert served.builder.context_schema is spec.context
    if spec.input_schema is not None:
        assert served.builder.input_schema is spec.input_schema
    assert bool(spec.demo) != bool(spec.no_demo)
    if spec.demo:
        assert callable(registry.demo_of(name))
    else:
        with pytest.raises(ValueError, match=f"no demo for the {name} workflow"):
            registry.demo_of(name)
    if spec.adapter:
        from kgagents.evals.runner import Adapter

        assert isinstance(registry.adapter_of(name)(), Adapter)
    if spec.formatter:
        assert callable(registry.formatter_of(name))
    known = {f.name for f in fields(spec.context)}
    for preset, values in spec.presets.items():
        assert set(values) <= known, f"{name} preset {preset} sets fields its context lacks"
        spec.make_context(values)  # every preset is a valid context


def test_an_unknown_workflow_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown workflow 'nope'; available: kgot, fusion"):
        registry.get("nope")


def test_a_spec_gives_a_demo_or_a_reason():
    from kgagents.graphs.kgot import build
    from kgagents.nodes.kgot import KGoTContext

    with pytest.raises(ValueError, match="give a demo or say why"):
        Workflow(name="x", description="x", build=build, context=KGoTContext, served="m:graph")
    with pytest.raises(ValueError, match="one line"):
        Workflow(name="x", description="a\nb", build=build, context=KGoTContext, served="m:graph", no_demo="none")


def test_the_runner_and_the_report_read_the_specs():
    from kgagents.cli.report import format_run
    from kgagents.evals.runner import adapter_for

    assert adapter_for("ark").failed is not None  # ARK-V1's adapter, named by its spec
    assert adapter_for("fusion").variant_answers is not None
    assert adapter_for("kgot").to_answer({"final_answer": "4"}) == "4"  # the default adapter
    text = format_run("ark", "t1", {"question": "q", "final_answer": "a", "steps": []})
    assert "Thread t1 (ark)" in text


def test_the_cli_lists_the_workflows_and_refuses_a_demo_that_is_not_there(capsys, tmp_path):
    from kgagents.cli import main

    assert main(["workflows"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == registry.names()
    assert sum(line.endswith("(demo)") for line in lines) == sum(bool(s.demo) for s in registry.workflows())
    assert main(["--runs-dir", str(tmp_path), "demo", "--workflow", "kgot-nokg"]) == 2
    assert "no demo for the kgot-nokg workflow: a baseline of the KGoT paper" in capsys.readouterr().err


def test_the_workflows_that_embed_preload_the_embedding_stack_in_worker_processes():
    embedding = {"ark", "grounded", "agent-g", "text-rag", "graph-rag", "rag", "kgot-graphrag", "agent-g-text-rag",
                 "agent-g-graph-rag", "agent-g-hybrid-rag", "agent-g-corrective-rag", "agent-g-react"}
    for spec in registry.workflows():
        assert spec.preload == (EMBEDDING_STACK if spec.name in embedding else ()), spec.name
