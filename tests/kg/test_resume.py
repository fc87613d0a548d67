"""Resume after a crash never duplicates KG content: the resumed run ends with the KG of an uninterrupted run.

Two ways to crash on every backend:
- in process, exactly in the dangerous window: the database write went through, then the process "dies"
  before LangGraph checkpoints the node (the store's write raises after writing);
- a real ``SIGKILL`` of the ``kgagents`` CLI in the middle of the enhance phase, then ``kgagents resume``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs.io import final_state
from kgagents.graphs.kgot import compile_graph
from tests import kgot_script as S
from tests.kg.conftest import CODE, DB_CASES, Backend, make_backend
from tests.kg.helpers import QUESTION, context, kg_shape, run, two_writes

pytestmark = pytest.mark.slow


async def test_crash_between_database_write_and_checkpoint(backend: Backend, tmp_path, monkeypatch):
    reference, _ = await run(backend, tmp_path / "ref", two_writes(backend.language),
                             thread=f"ref-{uuid.uuid4().hex[:6]}")
    assert reference["final_answer"] == "65"

    thread = f"crash-{uuid.uuid4().hex[:6]}"
    store_class = type(backend.open(thread, None, tmp_path))
    original = store_class.write

    async def write_then_die(self, code):  # type: ignore[no-untyped-def]
        result = await original(self, code)
        if code == CODE[backend.language]["write_total"]:
            raise RuntimeError("simulated crash after the database write, before the checkpoint")
        return result

    monkeypatch.setattr(store_class, "write", write_then_die)
    saver = InMemorySaver()
    graph = compile_graph(saver)
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 200}
    ctx = context(backend, ScriptedChatModel(steps=two_writes(backend.language)), tmp_path / "crash")
    with pytest.raises(RuntimeError, match="simulated crash"):
        await final_state(graph, {"question": QUESTION}, config, context=ctx)
    monkeypatch.setattr(store_class, "write", original)

    checkpointed = (await graph.aget_state(config)).values
    assert len(checkpointed["kg_writes"]) == 1 and len(checkpointed["kg"]["nodes"]) == 2
    if backend.backend != "networkx":
        # the crashed write is in the database, though the checkpoint never saw it
        assert len(backend.peek(thread)["nodes"]) == 3

    ctx = context(backend, ScriptedChatModel(steps=two_writes(backend.language)), tmp_path / "crash")
    final = await final_state(graph, None, config, context=ctx)
    assert final["final_answer"] == "65"
    assert final["kg"] == reference["kg"]
    assert [w["status"] for w in final["kg_writes"]] == ["applied", "applied"]
    if backend.backend != "networkx":
        assert backend.peek(thread) == final["kg"]  # nothing duplicated in the database


# ------------------------------------------------------------------------------------------------------------
# SIGKILL of the command line in the middle of the enhance phase
# ------------------------------------------------------------------------------------------------------------
SLOW = "import time\ntime.sleep(3)\nprint('third + fifth =', 23 + 42)"


def cli_script(language: str) -> list[dict]:
    steps = two_writes(language)
    for step in steps:
        if step["when"] == S.DEFINE_TOOLS + ".*SortedArray":
            step["tool_calls"] = [{"name": "run_python_code", "args": {"code": SLOW}}]
    return steps


def cli_env(tmp_path: Path, backend: Backend) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGAGENTS_", "OPENAI_", "ANTHROPIC_", "NEO4J_"))}
    env["KGAGENTS_HOME"] = str(tmp_path / "kgagents-home")  # never the user's data folder
    env.update(KGAGENTS_NO_DOTENV="1", KGAGENTS_RUNS_DIR=str(tmp_path / "runs"), OLLAMA_HOST="http://127.0.0.1:9",
               KGAGENTS_ALLOW_WEAK_SANDBOX="1", **backend.env)
    return env


def kgagents(tmp_path: Path, backend: Backend, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kgagents.cli", *args], env=cli_env(tmp_path, backend), cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def ask_args(backend: Backend, script: Path, thread: str) -> list[str]:
    args = ["ask", QUESTION, "--model", f"scripted:{script}", "--thread", thread, "--backend", backend.backend,
            "--set", "num_next_steps_decision=1", "--set", "max_final_solution_parsing=1"]
    if backend.url:
        args += ["--set", f"kg_url={backend.url}"]
    return args


async def show_state(tmp_path: Path, thread: str) -> dict:
    from kgagents.graphs.workflows import thread_state

    state, _ = await thread_state("kgot", tmp_path / "runs", thread)
    return state


@pytest.fixture(params=[c for c in DB_CASES if c != "sparql"] + ["sparql-file"])
def persistent_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Backend:
    """Database backends whose data outlives the killed process (an embedded store persisted to a directory, too)."""
    if request.param == "sparql-file":
        return Backend("sparql-file", "sparql", "sparql", f"oxigraph:{tmp_path / 'oxigraph-store'}")
    backend = make_backend(request.param, request)
    for name, value in backend.env.items():
        monkeypatch.setenv(name, value)
    return backend


@pytest.mark.slow
async def test_sigkill_mid_enhance_then_resume(persistent_backend: Backend, tmp_path):
    db_backend = persistent_backend
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "resume", "steps": cli_script(db_backend.language)}))
    suffix = uuid.uuid4().hex[:6]
    ref_backend = db_backend
    if db_backend.case == "sparql-file":  # this process must not hold the lock of the CLI's store directory
        ref_backend = Backend("sparql-file", "sparql", "sparql", f"oxigraph:{tmp_path / 'reference-store'}")
    reference, _ = await run(ref_backend, tmp_path / "ref", cli_script(db_backend.language), thread=f"ref-{suffix}")
    assert reference["final_answer"] == "65"

    victim = f"victim-{suffix}"
    proc = subprocess.Popen([sys.executable, "-m", "kgagents.cli", *ask_args(db_backend, script, victim)],
                            env=cli_env(tmp_path, db_backend), cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stderr is not None
    seen, deadline = 0, time.monotonic() + 120
    for line in proc.stderr:
        if "define_tool_calls" in line:
            seen += 1
            if seen == 2:
                break
        assert time.monotonic() < deadline
    time.sleep(1.0)  # the slow tool call of the second iteration is running
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    partial = await show_state(tmp_path, victim)
    assert len(partial["kg_writes"]) == 1 and "final_answer" not in partial

    resumed = kgagents(tmp_path, db_backend, "resume", victim)
    assert resumed.returncode == 0 and resumed.stdout.strip() == "65", resumed.stderr
    final = await show_state(tmp_path, victim)
    assert final["kg"] == reference["kg"]
    assert kg_shape(final["kg"]) == kg_shape(reference["kg"])
    assert db_backend.peek(victim) == final["kg"]
