"""Checkpoints from someone else are data: a crafted one is refused with a clear message and runs nothing.

langgraph-checkpoint's serializer rebuilds a msgpack extension ``(module, name, argument)`` by importing the
module and calling the name; its default allows any. Each test here plants ``("os", "system", "touch MARKER")``
in a real checkpoint (a KGoT demo run's) and opens it the ways a user would: ``kgagents show T``, ``show T --eval
DIR``, ``runs``, ``resume T``, and ``eval`` resuming a results folder. The marker file shows whether the payload
ran; the command must refuse with a message naming the type, not a traceback.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import ormsgpack
import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from kgagents.cli import main
from tests import kgot_script as S
from tests.evals.helpers import kgot_direct_steps
from tests.evals.test_cli_eval import simpleqa_csv


def payload(marker: Path) -> ormsgpack.Ext:
    """A msgpack constructor extension that would run ``touch MARKER`` when rebuilt."""
    return ormsgpack.Ext(0, ormsgpack.packb(("os", "system", f"touch {marker}")))


def latest_thread(db_path: Path) -> str:
    with sqlite3.connect(db_path) as db:
        return db.execute("SELECT thread_id FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1").fetchone()[0]


def plant(db_path: Path, thread: str, marker: Path, *, rename: str | None = None) -> None:
    """Put the payload into ``thread``'s latest checkpoint (its question), read and written with langgraph's own
    default serializer, as an attacker would; ``rename``: give the thread another id as well."""
    serde = JsonPlusSerializer()
    with sqlite3.connect(db_path) as db:
        checkpoint_id, kind, blob = db.execute(
            "SELECT checkpoint_id, type, checkpoint FROM checkpoints WHERE thread_id = ? "
            "ORDER BY checkpoint_id DESC LIMIT 1", (thread,)).fetchone()
        checkpoint = serde.loads_typed((kind, blob))
        checkpoint["channel_values"]["question"] = payload(marker)
        kind, blob = serde.dumps_typed(checkpoint)
        db.execute("UPDATE checkpoints SET type = ?, checkpoint = ? WHERE thread_id = ? AND checkpoint_id = ?",
                   (kind, blob, thread, checkpoint_id))
        if rename:
            for table in ("checkpoints", "writes"):
                db.execute(f"UPDATE {table} SET thread_id = ? WHERE thread_id = ?", (rename, thread))
    with sqlite3.connect(db_path) as db:  # into the file itself, which is what gets copied and handed over
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    """A runs folder with one finished KGoT demo run (its checkpoints and registry)."""
    runs = tmp_path_factory.mktemp("demo") / "runs"
    assert main(["--runs-dir", str(runs), "demo", "--quiet"]) == 0
    return runs


@pytest.fixture
def crafted(demo_runs, tmp_path):
    """A copy of the demo's runs folder whose thread's latest checkpoint holds the payload; (runs, thread,
    marker)."""
    runs = tmp_path / "runs"
    shutil.copytree(demo_runs, runs)
    marker = tmp_path / "PAYLOAD-RAN"
    thread = latest_thread(runs / "checkpoints.sqlite")
    plant(runs / "checkpoints.sqlite", thread, marker)
    return runs, thread, marker


def refused(err: str) -> None:
    assert "refused" in err and "os.system" in err, err[-2000:]
    assert "Traceback" not in err


def test_show_refuses_a_crafted_checkpoint_and_runs_nothing(crafted, capsys):
    runs, thread, marker = crafted
    code = main(["--runs-dir", str(runs), "show", thread])
    assert not marker.exists()
    assert code == 2
    refused(capsys.readouterr().err)
    assert main(["--runs-dir", str(runs), "show", thread, "--json"]) == 2
    assert not marker.exists()
    assert main(["--runs-dir", str(runs), "runs"]) == 0  # listing runs reads no checkpoint
    assert thread in capsys.readouterr().out
    assert not marker.exists()


def test_resume_refuses_a_crafted_checkpoint_and_runs_nothing(crafted, capsys):
    runs, thread, marker = crafted
    code = main(["--runs-dir", str(runs), "resume", thread, "--quiet"])
    assert not marker.exists()
    assert code == 2
    refused(capsys.readouterr().err)


def test_a_crafted_write_is_refused_too(demo_runs, tmp_path, capsys):
    """A task's pending write (the ``writes`` table) is read with the checkpoint: the same refusal."""
    runs = tmp_path / "runs"
    shutil.copytree(demo_runs, runs)
    marker = tmp_path / "PAYLOAD-RAN"
    thread = latest_thread(runs / "checkpoints.sqlite")
    kind, blob = JsonPlusSerializer().dumps_typed({"x": payload(marker)})
    with sqlite3.connect(runs / "checkpoints.sqlite") as db:
        checkpoint_id = db.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id "
                                   "DESC LIMIT 1", (thread,)).fetchone()[0]
        db.execute("INSERT INTO writes VALUES (?, '', ?, 'task', '', 0, 'question', ?, ?)",
                   (thread, checkpoint_id, kind, blob))
    code = main(["--runs-dir", str(runs), "show", thread])
    assert not marker.exists()
    assert code == 2
    refused(capsys.readouterr().err)


def test_a_pickled_checkpoint_value_is_refused_with_a_message(demo_runs, tmp_path, capsys):
    runs = tmp_path / "runs"
    shutil.copytree(demo_runs, runs)
    thread = latest_thread(runs / "checkpoints.sqlite")
    with sqlite3.connect(runs / "checkpoints.sqlite") as db:
        db.execute("UPDATE checkpoints SET type = 'pickle' WHERE thread_id = ?", (thread,))
    assert main(["--runs-dir", str(runs), "show", thread]) == 2
    err = capsys.readouterr().err
    assert "'pickle'" in err and "refused" in err and "Traceback" not in err


def test_show_eval_refuses_a_crafted_results_folder(crafted, tmp_path, capsys):
    """A results folder handed over (``show T --eval DIR``): its checkpoints.sqlite is someone else's."""
    runs, thread, marker = crafted
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(runs / "checkpoints.sqlite", results / "checkpoints.sqlite")
    (results / "manifest.json").write_text(json.dumps({"workflow": "kgot", "dataset": "simpleqa"}))
    (results / "results.jsonl").write_text(json.dumps({"id": "0", "run": 0, "thread_id": thread,
                                                       "workflow": "kgot"}) + "\n")
    code = main(["show", thread, "--eval", str(results)])
    assert not marker.exists()
    assert code == 2
    refused(capsys.readouterr().err)


def test_eval_resuming_a_crafted_results_folder_refuses_and_runs_nothing(demo_runs, tmp_path, capsys):
    """``kgagents eval ... --out DIR`` on a folder someone handed over resumes its items from its checkpoints:
    the crafted one stops the evaluation with the refusal (exit 1), nothing runs."""
    data = simpleqa_csv(tmp_path / "simpleqa.csv")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "cli", "steps": [
        S.step("grade", content="A", times=0), *kgot_direct_steps({"Q0": "Paris", "Q1": "Milan", "Q2": "Rome"})]}))
    out = tmp_path / "results"
    out.mkdir()
    shutil.copy(demo_runs / "checkpoints.sqlite", out / "checkpoints.sqlite")
    marker = tmp_path / "PAYLOAD-RAN"
    plant(out / "checkpoints.sqlite", latest_thread(out / "checkpoints.sqlite"), marker, rename="simpleqa-0-run0")
    code = main(["eval", "kgot", "--dataset", "simpleqa", "--data", str(data), "--model", f"scripted:{script}",
                 "--grader-model", "none", "--out", str(out), "--no-progress", "--no-report", "--limit", "1",
                 "--set", "solve_mode=direct"])
    err = capsys.readouterr().err
    assert not marker.exists()
    assert code == 1, err[-3000:]
    refused(err)
    line = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert line["error"].startswith("CheckpointRefused") and "os.system" in line["error"]
