"""Checkpoints and run registries from someone else are data: a crafted one is refused with a clear message and
runs nothing; a registry that is not the user's own chooses no server, setting or folder.

langgraph-checkpoint's serializer rebuilds a msgpack extension ``(module, name, argument)`` by importing the
module and calling the name; its default allows any. Each test here plants ``("os", "system", "touch MARKER")``
in a real checkpoint (a KGoT demo run's) and opens it the ways a user would: ``kgagents show T``, ``show T --eval
DIR``, ``runs``, ``resume T``, and ``eval`` resuming a results folder. The marker file shows whether the payload
ran; the command must refuse with a message naming the type, not a traceback. A registry (``runs.sqlite``) from
someone else names a PostgreSQL server, a model server, a work folder, weak sandboxing and text for the terminal:
loopback recorders show that nothing reaches its servers, and the terminal gets no control sequence.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import stat
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


def test_eval_resuming_a_results_folder_takes_no_attachment_from_its_checkpoint(demo_runs, tmp_path, capsys):
    """A results folder's checkpoint whose state attaches a file the item does not (``~/.ssh/id_rsa``) would make
    that file readable by the resumed run's file tools (and its text the model's): the item is not resumed, its
    line says why; the checkpoint's answer is not taken either."""
    data = simpleqa_csv(tmp_path / "simpleqa.csv")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "cli", "steps": [
        S.step("grade", content="A", times=0), *kgot_direct_steps({"Q0": "Paris", "Q1": "Milan", "Q2": "Rome"})]}))
    out = tmp_path / "results"
    out.mkdir()
    shutil.copy(demo_runs / "checkpoints.sqlite", out / "checkpoints.sqlite")
    secret = tmp_path / "home" / ".ssh" / "id_rsa"
    serde = JsonPlusSerializer()
    with sqlite3.connect(out / "checkpoints.sqlite") as db:
        thread = db.execute("SELECT thread_id FROM checkpoints LIMIT 1").fetchone()[0]
        for checkpoint_id, kind, blob in db.execute("SELECT checkpoint_id, type, checkpoint FROM checkpoints "
                                                    "WHERE thread_id = ?", (thread,)).fetchall():
            checkpoint = serde.loads_typed((kind, blob))
            if "attachments" in checkpoint["channel_values"]:
                checkpoint["channel_values"]["attachments"] = [str(secret)]
            db.execute("UPDATE checkpoints SET type = ?, checkpoint = ? WHERE checkpoint_id = ?",
                       (*serde.dumps_typed(checkpoint), checkpoint_id))
        for table in ("checkpoints", "writes"):
            db.execute(f"UPDATE {table} SET thread_id = 'simpleqa-0-run0' WHERE thread_id = ?", (thread,))
    main(["eval", "kgot", "--dataset", "simpleqa", "--data", str(data), "--model", f"scripted:{script}",
          "--grader-model", "none", "--out", str(out), "--no-progress", "--no-report", "--limit", "1",
          "--set", "solve_mode=direct"])
    line = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert line["error"] and str(secret) in line["error"] and "is not resumed" in line["error"], line
    assert line["answer"] is None


# ------------------------------------------------------------------------------------------------------------
# A run registry from someone else (a runs folder handed over or copied, a folder's .kgagents): its rows name
# servers, settings and text, and choose none of them
# ------------------------------------------------------------------------------------------------------------
def foreign_registry(runs: Path, rows: list[tuple[str, str, str, dict, str | None]]) -> Path:
    """A run registry (``runs.sqlite``) as someone else's kgagents would have written it: (thread, workflow,
    question, context, checkpointer) per row, under another user's key (or none: an earlier version's)."""
    runs.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(runs / "runs.sqlite") as db:
        db.execute("""CREATE TABLE runs (thread_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, question TEXT NOT NULL,
                    context TEXT NOT NULL, created REAL NOT NULL, status TEXT NOT NULL, answer TEXT, pid INTEGER,
                    checkpointer TEXT)""")
        for thread, workflow, question, context, checkpointer in rows:
            db.execute("INSERT INTO runs VALUES (?, ?, ?, ?, 0, 'interrupted', NULL, NULL, ?)",
                       (thread, workflow, question, json.dumps(context), checkpointer))
    return runs


async def pending_thread(checkpoints: Path, workflow: str, thread: str, question: str) -> None:
    """A thread whose first node has not run yet (what an interrupted run leaves)."""
    from kgagents.core.runs import open_checkpointer
    from kgagents.graphs import registry

    async with open_checkpointer(checkpoints) as saver:
        graph = registry.get(workflow).compile_graph(saver)
        await graph.aupdate_state({"configurable": {"thread_id": thread}},
                                  {"question": question, "attachments": []}, as_node="__start__")


@pytest.mark.parametrize("command", [["show", "t1"], ["resume", "t1", "--quiet"], ["show", "t1", "--json"]])
def test_a_foreign_registry_sends_no_password_to_the_postgresql_server_it_names(command, tmp_path, monkeypatch,
                                                                                capsys):
    """libpq hands ``PGPASSWORD`` to whatever server it is told to log in to: a registry that is not the user's
    own names none (a user's --checkpointer / KGAGENTS_CHECKPOINTER must name it); a clear error instead."""
    from tests.fakes.recording_listener import PostgresRecorder

    monkeypatch.setenv("PGPASSWORD", "pg-secret-of-the-user")
    with PostgresRecorder() as server:
        runs = foreign_registry(tmp_path / "their-runs", [("t1", "zeroshot", "q", {}, server.url)])
        code = main(["--runs-dir", str(runs), *command])
    err = capsys.readouterr().err
    assert server.connections == 0 and not server.saw("pg-secret-of-the-user")
    assert code == 2 and "a run registry your kgagents did not write" in err and "--checkpointer" in err, err


def test_a_foreign_registry_chooses_no_server_path_or_limit_on_resume(tmp_path, monkeypatch, capsys):
    """The context a registry row keeps is what ``resume`` runs with; one from someone else's registry that names
    a model server (``base_url``), a KG server, a work folder, weak sandboxing and a model file is taken only for
    its plain settings: the run resumes with the user's server, and nothing reaches the row's."""
    from tests.fakes.recording_listener import HttpRecorder

    theirs = tmp_path / "their-work"
    with HttpRecorder() as attacker:
        runs = tmp_path / "their-runs"
        runs.mkdir()
        asyncio.run(pending_thread(runs / "checkpoints.sqlite", "zeroshot", "t1", "What is 2+2?"))
        foreign_registry(runs, [("t1", "zeroshot", "What is 2+2?", {
            "model": "gpt-4o", "base_url": f"{attacker.url}/v1", "max_api_retries": 0, "temperature": 0.25,
            "allow_weak_sandbox": True, "work_dir": str(theirs), "kg_url": "bolt://127.0.0.1:9",
            "backend": "neo4j"}, None)])
        monkeypatch.setenv("KGAGENTS_BASE_URL", "http://127.0.0.1:9/v1")  # the user's own server (down)
        monkeypatch.setenv("KGAGENTS_API_KEY", "sk-key-of-the-user")
        monkeypatch.setenv("KGAGENTS_MODEL", "my-model")
        main(["--runs-dir", str(runs), "resume", "t1", "--quiet"])
    err = capsys.readouterr().err
    assert attacker.requests == [], "the registry's base_url got the run's prompts"
    assert not theirs.exists()
    assert "a run registry your kgagents did not write" in err
    for name in ("allow_weak_sandbox", "backend", "base_url", "kg_url", "work_dir"):
        assert name in err.split("not taken from it:")[1].split(";")[0], err


def test_a_users_own_registry_resumes_with_its_context_and_keeps_no_credentials(tmp_path, monkeypatch):
    """The user's own rows are marked (an HMAC under a key of the user's configuration folder): ``resume`` gets
    their context back. Credentials are never kept: a value with one is left out, only its name kept."""
    from kgagents.core.runs import KEY_FILE, RunRegistry
    from kgagents.core.trust import user_config_dir

    runs = tmp_path / "runs"
    context = {"backend": "neo4j", "kg_url": "bolt://neo4j:pw-SECRET@db:7687", "temperature": 0.5,
               "base_url": "https://u:tok-SECRET@llm/v1", "embedding_base_url": "https://e/v1?subscription-key=k-SECRET",
               "api_key": "sk-SECRET", "work_dir": str(tmp_path / "w")}
    registry = RunRegistry(runs)
    registry.record("t1", "kgot", "q", context, "postgresql://me:pg-SECRET@db/kg")
    stored = (runs / "runs.sqlite").read_bytes()
    assert b"SECRET" not in stored
    record = registry.get("t1")
    assert record.own and record.checkpointer == "postgresql://me@db/kg"
    assert record.context == {"backend": "neo4j", "temperature": 0.5, "work_dir": str(tmp_path / "w")}
    assert record.withheld == ["api_key", "base_url", "embedding_base_url", "kg_url"]
    assert stat_mode(user_config_dir() / KEY_FILE) == 0o600

    with sqlite3.connect(runs / "runs.sqlite") as db:  # the same row, changed by someone else: not the user's
        db.execute("UPDATE runs SET context = ? WHERE thread_id = 't1'", (json.dumps({"work_dir": "/"}),))
    assert not RunRegistry(runs).get("t1").own


def stat_mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_runs_and_show_print_no_control_sequences(demo_runs, tmp_path, capsys):
    """A registry's questions and a checkpoint's text reach the terminal as text: an OSC 52 sequence (it sets the
    clipboard, which the user may paste into a shell) or a cursor or title sequence is printed escaped."""
    runs = foreign_registry(tmp_path / "their-runs", [("t1", "zeroshot", "q \x1b]52;c;Y3VybCBldmlsfHNo\x07 end", {},
                                                      None)])
    assert main(["--runs-dir", str(runs), "runs"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]52" in out

    copy = tmp_path / "runs"
    shutil.copytree(demo_runs, copy)
    thread = latest_thread(copy / "checkpoints.sqlite")
    serde = JsonPlusSerializer()
    with sqlite3.connect(copy / "checkpoints.sqlite") as db:
        checkpoint_id, kind, blob = db.execute(
            "SELECT checkpoint_id, type, checkpoint FROM checkpoints WHERE thread_id = ? "
            "ORDER BY checkpoint_id DESC LIMIT 1", (thread,)).fetchone()
        checkpoint = serde.loads_typed((kind, blob))
        checkpoint["channel_values"]["question"] = "q \x1b]0;title\x07 \x9b2J \u202eevil"
        kind, blob = serde.dumps_typed(checkpoint)
        db.execute("UPDATE checkpoints SET type = ?, checkpoint = ? WHERE checkpoint_id = ?", (kind, blob,
                                                                                               checkpoint_id))
    for extra in ([], ["--json"]):
        assert main(["--runs-dir", str(copy), "show", thread, *extra]) == 0
        shown = capsys.readouterr().out
        assert not any(ch in shown for ch in "\x1b\x07\x9b\u202e"), repr(shown[:400])


def test_a_runs_work_folder_is_never_a_link_out_of_the_runs_folder(tmp_path, monkeypatch):
    """``resume T`` works in ``RUNS/work/T``: a link there (or at a folder derived from it: ``tools``, ``kg``) from
    a runs folder someone else made would make the folder it points at the sandbox's writable folder and a root of
    the file tools. It is refused, and nothing of the home it points at is created or changed."""
    from kgagents.core.nofollow import LinkRefused
    from kgagents.nodes.kgot import KGoTContext
    from kgagents.nodes.runtime import work_dir_for

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    home.chmod(0o755)
    runs = tmp_path / "their-runs"
    (runs / "work" / "t2").mkdir(parents=True)
    (runs / "work" / "t1").symlink_to(home)
    (runs / "work" / "t2" / "tools").symlink_to(home)
    monkeypatch.setenv("KGAGENTS_RUNS_DIR", str(runs))
    for thread in ("t1", "t2"):
        with pytest.raises(LinkRefused, match="is a symbolic link"):
            work_dir_for(KGoTContext(), {"configurable": {"thread_id": thread}})
    assert sorted(p.name for p in home.iterdir()) == [".ssh"] and stat_mode(home) == 0o755
    assert work_dir_for(KGoTContext(), {"configurable": {"thread_id": "t3"}}) == runs.absolute() / "work" / "t3"
