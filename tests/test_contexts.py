"""Contexts by composition: a base every workflow reads, each workflow's own fields and model roles on it,
field descriptions as metadata (Studio's form, ``--help``), the CLI's flags derived from the chosen workflow's
context and a flag that does not apply refused."""

from __future__ import annotations

from dataclasses import fields

import pytest

from kgagents.cli import main
from kgagents.graphs import registry
from kgagents.nodes.context import BaseContext, description_of
from kgagents.nodes.kgot import KGoTContext

BASE = {f.name for f in fields(BaseContext)}


@pytest.mark.parametrize("name", ["ark", "grounded", "agent-g", "text-rag"])
def test_the_graph_workflows_read_the_base_and_their_own_fields_not_kgots(name):
    context = registry.get(name).context
    own = {f.name for f in fields(context)}
    assert own >= BASE
    assert not own & {"backend", "solve_mode", "kg_url", "sandbox_timeout_s", "tools", "graph_executor_model"}
    assert context.ROLES and "graph_executor" not in context.ROLES
    assert {f"{role}_model" for role in context.ROLES} <= own


def test_every_field_of_every_workflow_is_described_and_studio_reads_it():
    for spec in registry.workflows():
        assert not [f.name for f in fields(spec.context) if not description_of(f)], spec.name
    schema = registry.get("ark").graph.get_context_jsonschema()["properties"]
    assert "attempts per stage" in schema["c_max"]["description"]
    assert "model" in schema["ark_agent_model"]["description"]
    assert "backend" not in schema


def test_the_old_role_name_is_still_accepted(monkeypatch):
    from kgagents.core.config import get_settings
    from kgagents.nodes.ark import ROLE, ArkContext
    from kgagents.nodes.runtime import context_as

    ctx = ArkContext.from_mapping({"graph_executor_model": "openai:gpt-4o", "c_max": 2})
    assert ctx.ark_agent_model == "openai:gpt-4o" and ctx.model_for(ROLE) == "openai:gpt-4o"
    given = ArkContext.from_mapping({"graph_executor_model": "a:old", "ark_agent_model": "a:new"})
    assert given.model_for(ROLE) == "a:new"  # the role's own name wins

    class Runtime:
        context = KGoTContext(graph_executor_model="openai:gpt-4o-mini", temperature=0.3, backend="neo4j")

    carried = context_as(Runtime(), ArkContext)  # a KGoT context a caller built: shared fields, its model
    assert carried.ark_agent_model == "openai:gpt-4o-mini" and carried.temperature == 0.3
    monkeypatch.setenv("KGAGENTS_MODEL", "openai:every")
    monkeypatch.setenv("KGAGENTS_GRAPH_EXECUTOR_MODEL", "openai:old-name")
    assert get_settings().model_for(ROLE) == "openai:old-name"
    monkeypatch.setenv("KGAGENTS_ARK_AGENT_MODEL", "openai:own-name")
    assert get_settings().model_for(ROLE) == "openai:own-name"
    assert get_settings().model_for("tool_executor") == "openai:every"


def test_a_flag_of_another_workflow_is_refused_naming_the_workflows_fields(tmp_path, capsys):
    code = main(["--runs-dir", str(tmp_path), "ask", "q", "--workflow", "ark", "--backend", "neo4j"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--backend does not apply to the ark workflow" in err and "kgot" in err
    assert "c_max" in err and "ark_agent_model" in err
    runs = ["--runs-dir", str(tmp_path)]
    assert main([*runs, "ask", "q", "--workflow", "grounded", "--max-iterations", "3"]) == 2
    assert "--max-iterations does not apply to the grounded workflow" in capsys.readouterr().err
    assert main([*runs, "eval", "ark", "--dataset", "cr-lt", "--backend", "neo4j"]) == 2
    assert "--backend does not apply to the ark workflow" in capsys.readouterr().err
    assert main(["--runs-dir", str(tmp_path), "ask", "q", "--no-such-flag"]) == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err
    assert main(["--runs-dir", str(tmp_path), "ask", "q", "--set", "backend=neo4j", "--workflow", "ark"]) == 2
    assert "unknown context field(s): backend" in capsys.readouterr().err


def test_the_flags_are_the_workflows_fields_typed_and_described(capsys):
    from kgagents.cli import build_parser, context_values_from_args

    argv = ["ask", "q", "--workflow", "ark", "--c-max", "2", "--anchor-scope", "any", "--temperature", "0.5",
            "--ark-agent-model", "openai:x"]
    args = build_parser(argv).parse_args(argv)
    assert context_values_from_args(args) == {"c_max": 2, "anchor_scope": "any", "temperature": 0.5,
                                              "ark_agent_model": "openai:x"}
    argv = ["ask", "q", "--backend", "neo4j", "--cleanup", "--formatter", "default", "--max-iterations", "3"]
    assert context_values_from_args(build_parser(argv).parse_args(argv)) == {
        "backend": "neo4j", "cleanup": True, "answer_formatter": "default", "max_iterations": 3}
    with pytest.raises(SystemExit):
        argv = ["ask", "q", "--workflow", "ark", "--anchor-scope", "x"]
        build_parser(argv).parse_args(argv)
    with pytest.raises(SystemExit):
        main(["ask", "--workflow", "ark", "--help"])
    out = capsys.readouterr().out
    assert "--c-max" in out and "attempts per stage" in out and "--backend" not in out


def test_start_checks_resolve_the_workflows_own_roles(monkeypatch, capsys):
    from kgagents.cli.preflight import role_models

    monkeypatch.setenv("KGAGENTS_MODEL", "scripted:/dev/null")
    assert set(role_models({}, "ark")) == {"ark_agent"}
    assert set(role_models({}, "agent-g-cot")) == {"agent_g"}
    assert set(role_models({}, "kgot")) == {"graph_executor", "tool_executor", "tools"}
