"""Crash and resume: ``kgagents ask`` killed with SIGKILL at a seeded random superstep, then
``kgagents resume``, ends exactly like an uninterrupted run, on SQLite and on PostgreSQL checkpoints.

For every workflow (KGoT on NetworkX and on a persisted SPARQL database, KGoT fusion, ARK-V1, grounded ToT,
Agent-G) and seed: an uninterrupted reference run counts its checkpoints; the seed picks one of them and a
moment (:mod:`tests.crashpoint`); a real ``kgagents ask`` subprocess dies there; ``kgagents resume`` continues
the thread in another process. The resumed run must give the reference's answer and trace (KG, KG writes, tool
calls, votes, reasoning steps, iterations, usage), save exactly as many checkpoints as the reference (one per
superstep: no superstep written twice), and the database backend must hold exactly the final KG (no write
applied twice).

``KGAGENTS_CRASH_SEEDS=N`` runs N seeds per case instead of the default few (a longer campaign).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from kgagents.cli import main
from kgagents.core.runs import RunRegistry, open_checkpointer
from kgagents.graphs.workflows import thread_state
from tests.crashpoint import counting_checkpoints, kill_point
from tests.postgres import PASSWORD

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
DATA = resources.files("kgagents") / "data"
KGOT_QUESTION = ("A C++ script holds the array [42, 23, 2, 88, 37, 15]. Sort the array and return the sum of "
                 "the third and fifth integers of the sorted list.")

#: What differs between two uninterrupted runs: the ids the scripted model gives its tool calls and the ids
#: of messages (random), the order in which concurrent fusion variants finish, and the thread the output names.
CALL_ID = re.compile(r"^call_[0-9a-f]{12}$")
ORDERLESS = {"results": "variant"}
THREAD_FIELD = "thread_id"  # the output schema's (kgagents.graphs.io): each run's own thread


def comparable(value: Any) -> Any:
    """A final state (or part of one) as plain data, without what differs between two uninterrupted runs."""
    if isinstance(value, BaseMessage):
        calls = [(c["name"], c["args"]) for c in getattr(value, "tool_calls", [])]
        return {"type": value.type, "content": value.content, "tool_calls": calls}
    if isinstance(value, dict):
        out = {k: comparable(v) for k, v in value.items() if k != THREAD_FIELD}
        for key, by in ORDERLESS.items():
            if isinstance(out.get(key), list):
                out[key] = sorted(out[key], key=lambda item: str(item.get(by)))
        return out
    if isinstance(value, (list, tuple)):
        return [comparable(v) for v in value]
    if isinstance(value, str) and CALL_ID.match(value):
        return "call_*"
    return value


@dataclass
class Case:
    """One workflow run from the command line: its ``ask`` arguments and its final answer."""

    name: str
    workflow: str
    answer: str
    ask: Callable[[Path, Path, str], list[str]]
    """(a folder of this run's own, a folder shared by the module's runs, thread id) -> the arguments after
    ``kgagents`` (inputs such as graphs live in the shared folder: their paths are part of the trace)"""
    seeds: dict[str, int] = field(default_factory=lambda: {"sqlite": 1, "postgres": 1})
    """Seeds per checkpointer in the default run (``KGAGENTS_CRASH_SEEDS`` sets them all)"""


def _script(folder: Path, steps: list[dict[str, Any]] | None = None, packaged: str | None = None) -> str:
    """A fresh script file for one run (a model string's script is loaded once per process)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "script.json"
    if packaged:
        path.write_text((DATA / packaged).read_text(encoding="utf-8"), encoding="utf-8")
    else:
        path.write_text(json.dumps({"name": folder.name, "steps": steps}), encoding="utf-8")
    return f"scripted:{path}"


def _kgot(folder: Path, shared: Path, thread: str) -> list[str]:
    model = _script(folder, packaged="demo_kgot_figure9.json")
    return ["ask", KGOT_QUESTION, "--thread", thread, "--model", model]


def _kgot_sparql(folder: Path, shared: Path, thread: str) -> list[str]:
    """KGoT on a SPARQL database persisted in the run's folder: what it holds outlives the killed process."""
    return ["ask", KGOT_QUESTION, "--thread", thread, "--backend", "sparql",
            "--set", f"kg_url=oxigraph:{folder / 'oxigraph'}",
            "--model", _script(folder, packaged="demo_kgot_figure9_sparql.json")]


def _fusion(folder: Path, shared: Path, thread: str) -> list[str]:
    from tests.kg.test_fusion import fusion_steps

    return ["ask", KGOT_QUESTION, "--thread", thread,
            "--fusion", "networkx:query,networkx:direct,sparql:query",
            "--set", "num_next_steps_decision=1", "--set", "max_final_solution_parsing=1",
            "--model", _script(folder, fusion_steps())]


def _ark_steps() -> list[dict[str, Any]]:
    """The ARK demo's script with each reply pinned to its reasoning step and attempt.

    The demo's steps match any step and attempt and answer in order, which a process that resumes halfway
    cannot follow (its scripted model starts from the first step again); pinned, every reply follows from the
    prompt alone, as a model's would.
    """
    steps = json.loads((DATA / "ark" / "demo_ark_yui.json").read_text(encoding="utf-8"))["steps"]
    pins = [(1, 1), (1, 2), (1, 1), (1, 1), (2, 1), (2, 1), (2, 1)]  # (step, attempt); the final answer last
    for step, (k, attempt) in zip(steps, pins, strict=False):
        when = re.sub(r"\\d\+", str(k), step["when"], count=1)
        step["when"] = re.sub(r"\\d\+", str(attempt), when, count=1)
    return steps


def _ark(folder: Path, shared: Path, thread: str) -> list[str]:
    graph = DATA / "ark" / "example_data.json"
    return ["ask", "Is Yui Yuigahama's pet a corgi?", "--workflow", "ark", "--thread", thread,
            "--attach", str(graph), "--model", _script(folder, _ark_steps())]


def _grounded(folder: Path, shared: Path, thread: str) -> list[str]:
    from kgagents.cli.grounded import gold_path_steps
    from kgagents.evals.grbench import fixture_graph, fixture_questions
    from kgagents.tools.pgraph import open_graph

    row = next(r for r in fixture_questions("dblp") if r["qid"] == "0")
    source = fixture_graph("dblp")
    return ["ask", row["question"], "--workflow", "grounded", "--graph", str(source), "--thread", thread,
            "--set", "strategy=tot", "--set", "interaction=agent",
            "--model", _script(folder, gold_path_steps(row, open_graph(source)))]


def _agent_g(folder: Path, shared: Path, thread: str) -> list[str]:
    from tests.agent_g.conftest import QUESTION, build_prime
    from tests.agent_g.test_resume_cli import STEPS

    graph = shared / "prime"
    if not graph.exists():
        build_prime(graph)
    return ["ask", QUESTION, "--workflow", "agent-g", "--graph", str(graph), "--thread", thread,
            "--set", "task=retrieval", "--model", _script(folder, STEPS)]


GROUNDED_ANSWER = ("Yang Yang, Chris Pugh, Kate Niehaus, Clare MacEwen, Glen W. Colopy, D Clifton, "
                   "Tingting Zhu")
#: The workflows whose runs load an embedding model (seconds per process) run one seed by default, on one
#: checkpointer each, the two taking turns.
CASES = {case.name: case for case in [
    Case("kgot", "kgot", "65", _kgot, seeds={"sqlite": 2, "postgres": 2}),
    Case("kgot-sparql", "kgot", "65", _kgot_sparql),
    Case("fusion", "fusion", "65", _fusion),
    Case("ark", "ark", "False", _ark, seeds={"postgres": 1}),
    Case("grounded", "grounded", GROUNDED_ANSWER, _grounded, seeds={"sqlite": 1}),
    Case("agent-g", "agent-g", '["0"]', _agent_g, seeds={"postgres": 1}),
]}
STORES = ("sqlite", "postgres")
SEEDS = int(os.environ.get("KGAGENTS_CRASH_SEEDS") or 0)


def _params() -> list[Any]:
    return [pytest.param(name, store, seed, id=f"{name}-{store}-seed{seed}")
            for name, case in CASES.items() for store in STORES
            for seed in range(SEEDS or case.seeds.get(store, 0))]


@dataclass
class Reference:
    """An uninterrupted run: its final state and how many checkpoints it saved."""

    state: dict[str, Any]
    checkpoints: int


_references: dict[tuple[str, str], Reference] = {}


def _checkpointer_args(url: str | None) -> list[str]:
    return ["--checkpointer", url] if url else []


async def _stored_checkpoints(location: str | Path, thread: str) -> int:
    """Checkpoints of ``thread`` in the checkpointer at ``location`` (every namespace: subgraphs' too)."""
    async with open_checkpointer(location) as saver:
        return len([c async for c in saver.alist({"configurable": {"thread_id": thread}})])


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for the module's runs: the inputs they share, the graphs cache, the reference runs."""
    return tmp_path_factory.mktemp("crash")


def _reference(case: Case, store: str, url: str | None, shared: Path) -> Reference:
    """The uninterrupted run of ``case`` on ``store`` (once per test session)."""
    key = (case.name, store)
    if key not in _references:
        folder = shared / f"reference-{case.name}-{store}"
        runs, thread = folder / "runs", f"{case.name}-{store}-whole"
        with counting_checkpoints() as saved:
            args = ["--runs-dir", str(runs), *case.ask(folder, shared, thread), *_checkpointer_args(url),
                    "--quiet"]
            assert main(args) == 0
        state, _ = asyncio.run(thread_state(case.workflow, runs, thread, url))
        assert state["final_answer"] == case.answer
        stored = asyncio.run(_stored_checkpoints(url or runs / "checkpoints.sqlite", thread))
        assert stored == saved[0], "every checkpoint save of an uninterrupted run is a checkpoint of its own"
        _references[key] = Reference(state, saved[0])
    return _references[key]


def _env() -> dict[str, str]:
    """The environment of the subprocesses: this one's, with the repository importable (``tests``)."""
    paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def _kill_at(point: tuple[int, str], args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``kgagents ARGS`` in a new process that kills itself (SIGKILL) at ``point``; it must die there."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.crashpoint", str(point[0]), point[1], "--", *args],
                            cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever it started goes with it
        except ProcessLookupError:
            pass
    assert proc.returncode == -signal.SIGKILL, f"not killed at {point} ({proc.returncode}): {err[-3000:]}"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "store", "seed"), _params())
def test_sigkill_at_a_random_superstep_then_resume(name: str, store: str, seed: int, tmp_path: Path,
                                                   shared: Path, request: pytest.FixtureRequest,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGAGENTS_ALLOW_WEAK_SANDBOX", "1")
    monkeypatch.setenv("KGAGENTS_GRAPHS_DIR", str(shared / "graphs"))
    case = CASES[name]
    url = request.getfixturevalue("postgres_url") if store == "postgres" else None
    reference = _reference(case, store, url, shared)
    point = kill_point(f"{name}-{store}-{seed}", reference.checkpoints)

    runs, thread = tmp_path / "runs", f"{name}-{store}-{seed}-killed"
    ask = case.ask(tmp_path, shared, thread)
    _kill_at(point, ["--runs-dir", str(runs), *ask, *_checkpointer_args(url), "--quiet"], tmp_path)
    registry = RunRegistry(runs)
    assert registry.get(thread).status == "interrupted"
    assert registry.get(thread).checkpointer == (url.replace(f":{PASSWORD}@", "@") if url else None)

    # another process (this one) resumes the thread; a PostgreSQL password comes with --checkpointer
    assert main(["--runs-dir", str(runs), "resume", thread, "--quiet", *_checkpointer_args(url)]) == 0, point
    final, nxt = asyncio.run(thread_state(case.workflow, runs, thread, url))
    assert nxt == () and registry.get(thread).status == "done"
    assert final["final_answer"] == reference.state["final_answer"] == case.answer, point
    assert comparable(final) == comparable(reference.state), f"the trace differs (killed at {point})"
    stored = asyncio.run(_stored_checkpoints(url or runs / "checkpoints.sqlite", thread))
    assert stored == reference.checkpoints, f"{stored} checkpoints, not {reference.checkpoints} ({point})"
    if name == "kgot-sparql":  # the database holds the final KG, each write applied once
        from kgagents.tools.kg.stores import open_store
        from kgagents.tools.sandbox import SandboxLimits

        database = open_store("sparql", snapshot=None, work_dir=tmp_path / "work", thread_id=thread,
                              limits=SandboxLimits(), url=f"oxigraph:{tmp_path / 'oxigraph'}", sync=False)
        assert database.database_snapshot() == final["kg"]  # type: ignore[attr-defined]


@pytest.mark.slow
def test_postgres_checkpoints_from_the_command_line(postgres_url: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``KGAGENTS_CHECKPOINTER`` puts a run's checkpoints in PostgreSQL; the registry keeps the URL without
    its password; ``show`` and ``resume`` find the thread there once the user names that server again
    (``--checkpointer``: a URL a registry records is not opened on its word), the password coming from
    ``PGPASSWORD``."""
    monkeypatch.setenv("KGAGENTS_ALLOW_WEAK_SANDBOX", "1")
    monkeypatch.setenv("KGAGENTS_CHECKPOINTER", postgres_url)
    runs, thread = tmp_path / "runs", "cli-postgres"
    _kill_at((5, "after"), ["--runs-dir", str(runs), *_kgot(tmp_path, tmp_path, thread)], tmp_path)
    monkeypatch.delenv("KGAGENTS_CHECKPOINTER")
    assert PASSWORD.encode() not in (runs / "runs.sqlite").read_bytes()
    recorded = RunRegistry(runs).get(thread).checkpointer
    assert recorded == postgres_url.replace(f":{PASSWORD}@", "@")

    capsys.readouterr()
    assert main(["--runs-dir", str(runs), "resume", thread]) == 2  # not named by the user: refused, unopened
    err = capsys.readouterr().err
    assert f"the PostgreSQL checkpointer {recorded} is not one you chose" in err and PASSWORD not in err
    assert main(["--runs-dir", str(runs), "resume", thread, "--checkpointer", recorded]) == 2  # no password
    err = capsys.readouterr().err
    assert f"cannot open the PostgreSQL checkpointer {recorded}" in err and PASSWORD not in err

    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    assert main(["--runs-dir", str(runs), "show", thread, "--checkpointer", recorded]) == 0
    assert "interrupted" in capsys.readouterr().out
    resumed = subprocess.run([sys.executable, "-m", "kgagents.cli", "--runs-dir", str(runs), "resume",
                              thread, "--checkpointer", recorded], cwd=tmp_path, env=_env(), capture_output=True,
                             text=True, timeout=240, check=False)
    assert resumed.returncode == 0 and resumed.stdout.strip() == "65", resumed.stderr[-2000:]
    assert main(["--runs-dir", str(runs), "show", thread, "--checkpointer", recorded]) == 0
    assert "finished" in capsys.readouterr().out

    assert main(["--runs-dir", str(runs), "ask", "?", "--checkpointer", str(tmp_path / "x.sqlite")]) == 2
    assert "takes a postgresql:// URL" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------------------
# The window that random kill points hit only sometimes, made on purpose: every task of a superstep has
# saved its results, the checkpoint that applies them was not written (LangGraph's ``snapshot.next`` is then
# empty, though the run is not over)
# ------------------------------------------------------------------------------------------------------------
def lose_checkpoints_after(db: Path, thread: str, keep: int) -> None:
    """Leave ``thread`` as a process killed right after the tasks of its ``keep``-th checkpoint saved their
    results: the checkpoints after it are removed (with their writes); its own pending writes stay."""
    with sqlite3.connect(db) as conn:
        ids = [row[0] for row in conn.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? "
                                              "ORDER BY checkpoint_id", (thread,))]
        for table in ("checkpoints", "writes"):
            conn.execute(f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id > ?",
                         (thread, ids[keep]))


def test_resume_after_the_results_of_a_superstep_before_its_checkpoint(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGAGENTS_ALLOW_WEAK_SANDBOX", "1")
    runs = tmp_path / "runs"
    assert main(["--runs-dir", str(runs), *_kgot(tmp_path / "whole", tmp_path, "whole"), "--quiet"]) == 0
    reference, _ = asyncio.run(thread_state("kgot", runs, "whole"))
    assert main(["--runs-dir", str(runs), *_kgot(tmp_path / "cut", tmp_path, "cut"), "--quiet"]) == 0
    lose_checkpoints_after(runs / "checkpoints.sqlite", "cut", keep=4)
    partial, nxt = asyncio.run(thread_state("kgot", runs, "cut"))
    assert "final_answer" not in partial and nxt  # not finished: show says what runs next
    capsys.readouterr()
    assert main(["--runs-dir", str(runs), "resume", "cut", "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == "65"
    final, _ = asyncio.run(thread_state("kgot", runs, "cut"))
    assert final["thread_id"] == "cut" and reference["thread_id"] == "whole"  # the output's thread
    assert comparable(final) == comparable(reference)


async def test_an_evaluation_resumes_an_item_left_in_that_window(tmp_path: Path) -> None:
    from kgagents.core.scripted import ScriptedChatModel
    from kgagents.evals.runner import RESULTS_FILE, EvalOptions, evaluate, read_results, thread_id_for
    from kgagents.nodes.kgot import KGoTContext
    from tests.evals.helpers import FAST, kgot_direct_steps, tiny_gaia

    def options() -> EvalOptions:
        model = ScriptedChatModel(steps=kgot_direct_steps({"Q0": "0"}))
        return EvalOptions(workflow="kgot", out_dir=tmp_path, progress=False,
                           context=KGoTContext(model=model, **FAST))

    first = await evaluate(options(), tiny_gaia(1))
    assert first.records[0]["correct"] is True
    (tmp_path / RESULTS_FILE).write_text("")  # the item's line was not written either
    lose_checkpoints_after(tmp_path / "checkpoints.sqlite", thread_id_for("tiny", "t0", 0), keep=3)
    again = await evaluate(options(), tiny_gaia(1))
    assert again.resumed == 1 and read_results(tmp_path)[0]["answer"] == "0"
