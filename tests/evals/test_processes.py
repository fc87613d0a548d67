"""The runner over several local worker processes (``processes=N``), and its garbage-collector settings."""

from __future__ import annotations

import functools
import gc
import json
import pickle

import pytest

from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.processes import provider_modules, workflow_modules
from kgagents.evals.runner import EvalOptions, batch_collector, run_evaluation
from kgagents.evals.workers import auto_processes, shares
from tests.evals.helpers import FAST, kgot_direct_steps, tiny_gaia

ANSWERS = {f"Q{i}": str(2 * i) for i in range(6)}


def fail_setup(message: str) -> None:
    raise RuntimeError(message)


def test_shares_split_the_concurrency():
    assert shares(64, 2) == [32, 32]
    assert shares(5, 2) == [3, 2]
    assert shares(1, 4) == [1]


def test_automatic_processes_follow_the_items_in_flight_and_the_cpus():
    assert [auto_processes(c, cpus=2) for c in (1, 8, 16, 32, 64, 65, 256)] == [1, 1, 1, 1, 1, 2, 2]
    assert auto_processes(256, cpus=8) == 4 and auto_processes(1024, cpus=8) == 8 and auto_processes(4, cpus=1) == 1
    assert 1 <= auto_processes(64) <= 64


def test_the_fork_server_imports_the_clients_of_the_model_strings(tmp_path):
    from kgagents.nodes.kgot import KGoTContext

    def modules(**context):
        return provider_modules(EvalOptions(workflow="kgot", out_dir=tmp_path, context_values=context))

    assert modules(model="gpt-4o-mini", base_url="http://127.0.0.1:1/v1") == [
        "kgagents.nodes.http_client", "kgagents.nodes.openai_chat", "langchain_openai"]
    assert modules(model="openai:gpt-4o", tools_model="anthropic:claude-sonnet-4-5") == [
        "kgagents.nodes.http_client", "kgagents.nodes.openai_chat", "langchain_anthropic", "langchain_openai"]
    assert modules(model="scripted:/x.json", backend="networkx", solve_mode="direct") == []
    options = EvalOptions(workflow="kgot", out_dir=tmp_path, context=KGoTContext(model=ScriptedChatModel(),
                                                                                 tool_executor_model="ollama:qwen"))
    assert provider_modules(options) == ["langchain_ollama"]


def test_the_fork_server_imports_the_embedding_stack_of_the_workflows_that_embed():
    """ARK-V1, grounded reasoning and Agent-G embed: their workers get sentence-transformers from the fork server
    (seconds of CPU per worker otherwise); KGoT's do not import it."""
    for workflow in ("ark", "grounded", "agent-g"):
        assert workflow_modules(workflow) == ["sentence_transformers"]
    assert workflow_modules("kgot") == []


@pytest.mark.slow
def test_two_processes_share_the_items_and_the_checkpoints(tmp_path):
    """Each item's solution takes 0.5 s, two at a time per worker: a worker alone would need 2 s for the 8
    items, long enough for the other to start and take its share even on a loaded machine."""
    answers = {f"Q{i}": str(2 * i) for i in range(8)}
    steps = [{**step, "delay_s": 0.5} if "solution" in (step.get("structured") or {}) else step
             for step in kgot_direct_steps(answers)]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "scripted", "steps": steps}))
    options = EvalOptions(workflow="kgot", out_dir=tmp_path / "out", concurrency=4, processes=2, progress=False,
                          context_values={"model": f"scripted:{script}", **FAST})
    result = run_evaluation(options, tiny_gaia(8))
    assert result.ran == 8 and result.failed == 0
    assert all(r["correct"] for r in result.records)
    assert len({r["worker"] for r in result.records}) == 2  # both processes ran items
    assert all(r["usage"]["scripted"]["calls"] == 5 for r in result.records)
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 8  # this process wrote every line, once

    again = run_evaluation(options, tiny_gaia(8))
    assert again.ran == 0 and again.skipped == 8


def test_a_context_that_cannot_be_sent_is_a_clear_error(tmp_path):
    from kgagents.nodes.kgot import KGoTContext

    class LocalModel(ScriptedChatModel):  # a class defined in a function: pickle cannot find it again
        pass

    context = KGoTContext(model=LocalModel(steps=kgot_direct_steps(ANSWERS)), tools=[], work_dir=str(tmp_path / "w"))
    options = EvalOptions(workflow="kgot", out_dir=tmp_path / "out", processes=2, progress=False, context=context)
    with pytest.raises(ValueError, match="can be pickled"):
        run_evaluation(options, tiny_gaia(2))


@pytest.mark.slow
def test_a_worker_that_cannot_start_is_reported(tmp_path):
    options = EvalOptions(workflow="kgot", out_dir=tmp_path / "out", processes=2, concurrency=2, progress=False,
                          context_values={"model": "scripted:/nonexistent.json", **FAST},
                          worker_setup=functools.partial(fail_setup, "no tools here"))
    with pytest.raises(RuntimeError, match="no tools here"):
        run_evaluation(options, tiny_gaia(2))


def test_a_scripted_model_can_be_pickled():
    model = ScriptedChatModel(steps=[{"content": "hello", "times": 0}])
    copy = pickle.loads(pickle.dumps(model))
    assert copy.invoke("hi").content == "hello" and copy.steps == model.steps


def test_batch_collector_restores_the_collector():
    threshold = gc.get_threshold()
    with batch_collector():
        assert gc.get_threshold()[0] >= 10_000 and gc.get_freeze_count() > 0
    assert gc.get_threshold() == threshold and gc.get_freeze_count() == 0
