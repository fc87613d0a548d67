"""Files others hand a user are data: bundles, results folders, recordings and STaRK folders choose nothing.

Each test builds what a stranger could send — a bundle whose recorded command points ``--graph`` at a STaRK
folder with a code-running pickle, a bundle with foreign names, a zip bomb, a member that lies about its size, a
recording that asks for file-reading models, other servers and other folders, a recording with a password in its
command — and checks that nothing of it runs (a payload would create a marker file; loopback listeners count
connections) and that the user gets a clear error. Honest recordings and bundles keep replaying
(tests/evals/test_replay.py, tests/ark/test_replay.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import socket
import sqlite3
import struct
import subprocess
import sys
import textwrap
import threading
import zipfile
from pathlib import Path

import pytest

from kgagents.cli import main
from tests import kgot_script as S
from tests.evals.helpers import kgot_direct_steps
from tests.evals.test_cli_eval import GRADER, simpleqa_csv


class Payload:
    """Pickled, it runs ``touch MARKER`` when loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def stark_folder_files(marker: Path) -> dict[str, bytes]:
    """The files of a STaRK processed folder whose ``node_info.pkl`` runs the payload."""
    import io

    import torch

    edges = io.BytesIO()
    torch.save(torch.tensor([[0], [0]], dtype=torch.long), edges)
    return {"node_info.pkl": pickle.dumps({0: {"title": Payload(marker)}}), "edge_index.pt": edges.getvalue()}


def old_recording(path: Path, command: str, argv: list[str], thread: str | None = None) -> Path:
    """A recording as today's kgagents writes one (``meta``: the command line), with no exchanges."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE exchanges (fingerprint TEXT NOT NULL, seq INTEGER NOT NULL, node TEXT NOT NULL, "
                   "request TEXT NOT NULL, model TEXT NOT NULL, reply TEXT NOT NULL, PRIMARY KEY (fingerprint, seq))")
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in {
            "argv": argv, "command": command, "thread": thread, "created": "2026-01-01T00:00:00+0000"}.items()])
    return path


def zip_of(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


# ----------------------------------------------------------------------------------------------------------------
# A recorded command that points at a crafted STaRK folder
# ----------------------------------------------------------------------------------------------------------------
def test_a_bundle_whose_command_loads_its_own_pickle_runs_nothing(tmp_path, capsys):
    """The bundle's recording names ``--graph <the folder the bundle unpacks into>`` and the bundle carries that
    folder's ``node_info.pkl``: ``kgagents replay bundle.zip`` once loaded it with ``pickle.load``."""
    marker = tmp_path / "PAYLOAD-RAN"
    bundle = tmp_path / "shared.zip"
    unpacked = tmp_path / "shared"  # where replay unpacks it: beside the bundle, named after it
    recording = old_recording(tmp_path / "build" / "recording.sqlite", "ask", [
        "ask", "--workflow", "agent-g", "Which product?", "--graph", str(unpacked),
        "--model", f"scripted:{unpacked / 'script.json'}"], thread="t1")
    zip_of(bundle, {"bundle.json": b"{}", "recording.sqlite": recording.read_bytes(), **stark_folder_files(marker)})

    code = main(["--runs-dir", str(tmp_path / "runs"), "replay", str(bundle)])
    assert not marker.exists()
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    assert "node_info.pkl" in err and "a bundle never holds" in err
    assert not (unpacked / "node_info.pkl").exists()


def test_a_local_recording_chooses_no_graph_and_stark_pickles_load_as_data(tmp_path, capsys):
    """``kgagents replay THREAD``: the recording is data too. Its ``--graph`` is not used (the user gives one),
    and a STaRK folder the user does give is read without running its pickle."""
    marker = tmp_path / "PAYLOAD-RAN"
    folder = tmp_path / "stark"
    folder.mkdir()
    for name, data in stark_folder_files(marker).items():
        (folder / name).write_bytes(data)
    runs = tmp_path / "runs"
    old_recording(runs / "recordings" / "t1.sqlite", "ask", [
        "ask", "--workflow", "agent-g", "Which product?", "--graph", str(folder),
        "--model", f"scripted:{tmp_path / 'script.json'}"], thread="t1")

    code = main(["--runs-dir", str(runs), "replay", "t1"])
    assert not marker.exists()
    assert code == 2
    err = capsys.readouterr().err
    assert "--graph" in err and "never from the recording" in err, err[-2000:]

    main(["--runs-dir", str(runs), "replay", "t1", "--graph", str(folder), "--model", "scripted:x.json"])
    assert not marker.exists()


def test_a_stark_pickle_that_asks_for_code_is_refused_by_name(tmp_path):
    from kgagents.tools.pgraph.model import GraphFormatError
    from kgagents.tools.pgraph.stark import read_processed

    marker = tmp_path / "PAYLOAD-RAN"
    for name, data in stark_folder_files(marker).items():
        (tmp_path / name).write_bytes(data)
    with pytest.raises(GraphFormatError) as refused:
        read_processed(tmp_path)
    assert not marker.exists()
    message = str(refused.value)
    assert str(tmp_path / "node_info.pkl") in message and "system" in message and "refused" in message


def test_a_stark_tensor_file_that_asks_for_code_is_refused_by_name(tmp_path):
    """``.pt`` files go through torch's weights-only loader; its refusal is said plainly, without advice to
    load the file with ``weights_only=False``."""
    import torch

    from kgagents.tools.pgraph.model import GraphFormatError
    from kgagents.tools.pgraph.stark import read_processed

    marker = tmp_path / "PAYLOAD-RAN"
    (tmp_path / "node_info.pkl").write_bytes(pickle.dumps({0: {"title": "a"}}))
    torch.save({"x": Payload(marker)}, tmp_path / "edge_index.pt")
    with pytest.raises(GraphFormatError) as refused:
        read_processed(tmp_path)
    assert not marker.exists()
    message = str(refused.value)
    assert str(tmp_path / "edge_index.pt") in message and "system" in message and "refused" in message
    assert "weights_only" not in message


# ----------------------------------------------------------------------------------------------------------------
# What a bundle may hold, and how big it may become
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["checkpoints.sqlite", "run.sh", "node_info.pkl", "sub/results.json",
                                  "../outside.json", ".env", "recording.sqlite-wal"])
def test_a_bundle_with_a_name_it_never_holds_is_refused_whole(tmp_path, capsys, name):
    bundle = zip_of(tmp_path / "b.zip", {"bundle.json": b"{}", "results.jsonl": b"", name: b"data"})
    for command in (["report", str(bundle), "--out", str(tmp_path / "report")], ["replay", str(bundle)]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "refused" in err and repr(name) in err, err[-2000:]
        assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())
        assert not (tmp_path / "outside.json").exists()


def test_a_zip_bomb_bundle_is_refused_from_its_directory(tmp_path, capsys):
    """400 KB that would become 400 MB: refused before anything is written."""
    bundle = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("bundle.json", "{}")
        with archive.open("results.jsonl", "w", force_zip64=True) as member:
            for _ in range(400):
                member.write(bytes(1 << 20))
    assert bundle.stat().st_size < 1 << 20
    assert main(["report", str(bundle), "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err
    assert "zip bomb" in err and "results.jsonl" in err and "limit" in err, err[-2000:]
    assert not (tmp_path / "bomb" / "results.jsonl").exists()


def test_a_member_that_lies_about_its_size_stops_at_what_it_declares(tmp_path, capsys):
    """The directory says 100 bytes; the data expands to 4 MB."""
    bundle = tmp_path / "liar.zip"
    zip_of(bundle, {"bundle.json": b"{}", "results.jsonl": b'{"id": 1}\n' * 400_000})
    data = bytearray(bundle.read_bytes())
    with zipfile.ZipFile(bundle) as archive:
        info = archive.getinfo("results.jsonl")
    local, central = info.header_offset, data.rindex(b"PK\x01\x02")  # the last central entry is results.jsonl
    struct.pack_into("<I", data, local + 22, 100)  # the local header's uncompressed size
    struct.pack_into("<I", data, central + 24, 100)  # the central directory's
    bundle.write_bytes(bytes(data))
    assert main(["report", str(bundle), "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err
    assert "liar.zip" in err and ("damaged" in err or "more data" in err), err[-2000:]
    written = tmp_path / "liar" / "results.jsonl"
    assert not written.exists() or written.stat().st_size <= 100


def test_a_recording_with_sql_of_its_own_is_refused(tmp_path, capsys):
    """A "recording" whose meta is a view (SQL stored in the file) or that has a trigger is not a recording."""
    results = tmp_path / "results"
    results.mkdir()
    path = old_recording(results / "recording.sqlite", "eval", ["eval", "kgot", "--dataset", "simpleqa"])
    with sqlite3.connect(path) as db:
        db.execute("CREATE TRIGGER t AFTER INSERT ON exchanges BEGIN DELETE FROM exchanges; END")
    assert main(["replay", str(results)]) == 2
    err = capsys.readouterr().err
    assert "not a kgagents recording" in err and "trigger" in err, err[-2000:]


# ----------------------------------------------------------------------------------------------------------------
# What a recording may choose
# ----------------------------------------------------------------------------------------------------------------
class Listener:
    """A loopback TCP port that counts the connections made to it (and closes each at once)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listeners():
    opened = [Listener() for _ in range(3)]
    yield opened
    for listener in opened:
        listener.close()


def _recorded_evaluation(tmp_path, capsys) -> tuple[Path, Path, Path, list[str]]:
    """An honest recorded evaluation (simpleqa, scripted model); (results, data, script, its settings' flags)."""
    data = simpleqa_csv(tmp_path / "simpleqa.csv")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "cli", "steps": [
        S.step(GRADER + ".*Predicted answer: Paris", content="A"), S.step(GRADER, content="B", times=0),
        *kgot_direct_steps({"Q0": "Paris", "Q1": "Milan", "Q2": "Milan"})]}))
    out = tmp_path / "results"
    flags = ["--set", "solve_mode=direct", "--set", "num_next_steps_decision=2",
             "--set", "max_final_solution_parsing=1"]
    assert main(["eval", "kgot", "--dataset", "simpleqa", "--data", str(data), "--model", f"scripted:{script}",
                 "--out", str(out), "--no-progress", "--no-report", "--record", *flags]) == 0
    capsys.readouterr()
    script.write_text(json.dumps({"name": "cli", "steps": []}))  # no model any more
    return out, data, script, flags


def test_a_recording_chooses_no_server_path_folder_or_model_file(tmp_path, capsys, monkeypatch, listeners):
    """The recorded command of an honest evaluation, rewritten by someone to point the replay at their servers
    (a Bolt ``kg_url`` with the user's Neo4j password, a model ``base_url``, a PostgreSQL checkpointer), a model
    script of their choosing, another output folder and more processes: the replay takes none of it, connects to
    none of them, says what it left out, and replays identically with the user's own inputs."""
    out, data, script, flags = _recorded_evaluation(tmp_path, capsys)
    monkeypatch.setenv("NEO4J_PASSWORD", "the-users-password")
    bolt, http, postgres = listeners
    elsewhere = tmp_path / "elsewhere"
    hostile = tmp_path / "theirs" / "cli.json"
    with sqlite3.connect(out / "recording.sqlite") as db:
        db.execute("DELETE FROM meta")
        db.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in {
            "command": "eval", "argv": [
                "eval", "kgot", "--dataset", "simpleqa", "--data", str(data), "--model", f"scripted:{hostile}",
                "--out", str(elsewhere), "--no-progress", "--no-report", *flags,
                "--set", "backend=neo4j", "--set", f"kg_url=bolt://neo4j:x@127.0.0.1:{bolt.port}",
                "--base-url", f"http://127.0.0.1:{http.port}/v1", "--processes", "3",
                "--checkpointer", f"postgresql://attacker:pw@127.0.0.1:{postgres.port}/db"]}.items()])

    code = main(["replay", str(out), "--data", str(data), "--model", f"scripted:{script}"])
    err = capsys.readouterr().err
    assert (bolt.connections, http.connections, postgres.connections) == (0, 0, 0)
    assert not elsewhere.exists()
    assert code == 0 and "identical" in err, err[-3000:]
    for name in ("kg_url", "backend", "base_url", "checkpointer"):
        assert f"not taken from the recording: {name}" in err, name
    assert ":pw@" not in err and (out / "replay" / "results.jsonl").is_file()


def test_a_recording_in_this_versions_format_is_checked_the_same_way(tmp_path, capsys, listeners):
    """A recording's settings are checked when read, not trusted because this version wrote them."""
    out, data, script, _ = _recorded_evaluation(tmp_path, capsys)
    bolt = listeners[0]
    with sqlite3.connect(out / "recording.sqlite") as db:
        settings = json.loads(db.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()[0])
        settings["options"].update({"out": str(tmp_path / "elsewhere"), "data": "/etc", "processes": 64})
        settings["context"].update({"kg_url": f"bolt://127.0.0.1:{bolt.port}", "backend": "neo4j",
                                    "work_dir": "/", "allow_weak_sandbox": True, "sandbox_memory_mb": 10**6,
                                    "tools_model": f"scripted:{tmp_path / 'theirs.json'}"})
        db.execute("UPDATE meta SET value = ? WHERE key = 'settings'", (json.dumps(settings),))
    code = main(["replay", str(out), "--data", str(data), "--model", f"scripted:{script}"])
    err = capsys.readouterr().err
    assert code == 0 and "identical" in err, err[-3000:]
    assert bolt.connections == 0 and not (tmp_path / "elsewhere").exists()
    for name in ("out", "processes", "kg_url", "backend", "work_dir", "allow_weak_sandbox",
                 "sandbox_memory_mb", "tools_model"):
        assert f"not taken from the recording: {name}" in err, name


# ----------------------------------------------------------------------------------------------------------------
# No secrets in what is shared
# ----------------------------------------------------------------------------------------------------------------
SECRET = "s3cret-Pa55"


def _holds_secret(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]


def test_a_recording_keeps_no_checkpointer_password(tmp_path, capsys):
    runs = tmp_path / "runs"
    code = main(["--runs-dir", str(runs), "ask", "Q?", "--record", "--model", "scripted:x.json",
                 "--checkpointer", f"postgresql://user:{SECRET}@127.0.0.1:9/db"])
    assert code == 2  # nothing listens there
    assert list((runs / "recordings").glob("*.sqlite"))
    assert _holds_secret(runs / "recordings") == []


def test_recordings_manifests_and_bundles_keep_no_credentials(tmp_path, capsys):
    data = simpleqa_csv(tmp_path / "simpleqa.csv")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "cli", "steps": [
        S.step(GRADER, content="A", times=0), *kgot_direct_steps({"Q0": "Paris", "Q1": "Milan", "Q2": "Rome"})]}))
    out, bundle = tmp_path / "results", tmp_path / "shared.zip"
    assert main(["eval", "kgot", "--dataset", "simpleqa", "--data", str(data), "--model", f"scripted:{script}",
                 "--base-url", f"http://user:{SECRET}@127.0.0.1:9/v1", "--out", str(out), "--no-progress",
                 "--record", "--bundle", str(bundle), "--set", f"kg_url=bolt://neo4j:{SECRET}@127.0.0.1:9",
                 "--set", "solve_mode=direct", "--set", "num_next_steps_decision=2",
                 "--set", "max_final_solution_parsing=1"]) == 0
    capsys.readouterr()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["models"]["base_url"] == "http://127.0.0.1:9/v1"
    assert [p for p in _holds_secret(out) if not p.endswith(("checkpoints.sqlite", "-wal"))] == []
    with zipfile.ZipFile(bundle) as archive:
        assert [n for n in archive.namelist() if SECRET.encode() in archive.read(n)] == []
        assert "argv" not in json.loads(archive.read("bundle.json"))


# ----------------------------------------------------------------------------------------------------------------
# Links a results folder (or what is beside a bundle) carries: written through, never
# ----------------------------------------------------------------------------------------------------------------
def _kgagents(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    return subprocess.run([sys.executable, "-m", "kgagents.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def _results_folder(folder: Path, group_label: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({
        "workflow": "kgot", "dataset": "simpleqa", "split": "test", "runs": 1, "items": 1, "scorer": "simpleqa",
        "models": {}, "context": {}, "group_label": group_label}))
    (folder / "results.jsonl").write_text(json.dumps({"id": "1", "run": 0, "answer": "a", "correct": True,
                                                      "score": 1.0, "cost_usd": 0.0, "wall_s": 1.0}) + "\n")
    return folder


def test_report_writes_nothing_through_a_link_a_results_folder_carries(tmp_path):
    """A results folder from someone else holds ``report.md`` as a relative link to where a project-local virtual
    environment keeps its ``.pth`` files, and a ``group_label`` with a line of Python: ``kgagents report DIR`` once
    wrote the report through the link, and every later start of that Python ran the line. Now the link is replaced
    by the report, and the label stays on its line."""
    marker = tmp_path / "payload-ran"  # lower case: the report lower-cases the label in one of its headings
    site = tmp_path / "project" / ".venv" / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    shared = _results_folder(tmp_path / "project" / "results" / "shared",
                             f"Level\nimport os; os.system('touch {marker}')\n")
    os.symlink(os.path.relpath(site / "zz-shared.pth", shared), shared / "report.md")
    os.symlink(os.path.relpath(site / "zz-plot.pth", shared), shared / "runtime_by_node.png")

    done = _kgagents(["report", str(shared)], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    subprocess.run([sys.executable, "-S", "-c", f"import site; site.addsitedir({str(site)!r})"], check=False)
    assert not marker.exists(), "report.md went through the folder's link into a .pth file: its label ran as Python"
    assert list(site.iterdir()) == [], "the report was written through the folder's links"
    report = (shared / "report.md").read_text()
    assert not (shared / "report.md").is_symlink() and "\nimport os" not in report and "Level\\nimport os" in report


def test_report_of_a_bundle_is_not_unpacked_through_a_link_beside_it(tmp_path):
    """``kgagents report shared.zip`` unpacks into ``shared/`` beside it: a ``shared`` link that came with the
    bundle (the same clone or archive) would receive every member and the report."""
    elsewhere = tmp_path / "elsewhere"  # e.g. ../../.config/Code/User
    elsewhere.mkdir()
    folder = _results_folder(tmp_path / "made", "Level")
    zip_of(tmp_path / "shared.zip", {"bundle.json": b"{}", **{p.name: p.read_bytes() for p in folder.iterdir()},
                                     "settings.json": b'{"planted": true}'})
    (tmp_path / "shared").symlink_to(elsewhere)
    done = _kgagents(["report", "shared.zip", "--no-plots"], tmp_path)
    assert done.returncode == 2 and "shared is a symbolic link" in done.stderr, done.stderr[-2000:]
    assert list(elsewhere.iterdir()) == []


def test_a_bundle_is_not_unpacked_through_a_linked_destination(tmp_path):
    from kgagents.core.bundles import BundleError, unpack

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bundle = zip_of(tmp_path / "shared.zip", {"bundle.json": b"{}", "settings.json": b'{"planted": true}'})
    (tmp_path / "shared").symlink_to(elsewhere)
    with pytest.raises(BundleError, match="is a symbolic link"):
        unpack(bundle, tmp_path / "shared")
    assert list(elsewhere.iterdir()) == []


def test_an_evaluation_writes_nothing_through_a_link_its_results_folder_carries(tmp_path):
    """``kgagents eval ... --out DIR`` resuming a folder someone handed over writes its manifest, results,
    summary, checkpoints and items' work folders there: each a file or folder of its own, or refused; what a link
    points at is never written or made the sandbox's folder."""
    from kgagents.core.nofollow import LinkRefused, open_for_append
    from kgagents.evals.runner import (
        RESULTS_FILE,
        EvalOptions,
        ItemRunner,
        _check_manifest,
        item_work_dir,
        write_summary,
    )

    outside = tmp_path / "outside"
    outside.mkdir()
    targets = {name: outside / f"{name}.target" for name in ("manifest.json", "summary.json", RESULTS_FILE)}
    for target in targets.values():
        target.write_text('{"theirs": true}\n')
    out = tmp_path / "results"
    out.mkdir()
    for name, target in targets.items():
        (out / name).symlink_to(target)
    _check_manifest(out, {"workflow": "kgot", "dataset": "simpleqa"})
    write_summary(out, {"accuracy": 1.0})
    with pytest.raises(LinkRefused, match=r"results\.jsonl is a symbolic link"):
        open_for_append(out / RESULTS_FILE, "the evaluation's results")
    assert all(target.read_text() == '{"theirs": true}\n' for target in targets.values())
    assert not (out / "manifest.json").is_symlink() and json.loads((out / "manifest.json").read_text())

    (out / "work").mkdir()
    (out / "work" / "t1").symlink_to(outside)
    (out / "work" / "t2").mkdir()
    (out / "work" / "t2" / "kg").symlink_to(outside)
    for thread in ("t1", "t2"):
        with pytest.raises(LinkRefused):
            item_work_dir(out, thread)
    (out / "checkpoints.sqlite").symlink_to(outside / "db.sqlite")
    runner = ItemRunner.__new__(ItemRunner)
    runner.options = EvalOptions(workflow="kgot", out_dir=out)

    async def open_it() -> None:
        async with runner.opened():
            pass

    with pytest.raises(LinkRefused, match=r"checkpoints\.sqlite is a symbolic link"):
        asyncio.run(open_it())
    assert sorted(p.name for p in outside.iterdir()) == sorted(t.name for t in targets.values())


def test_a_resumed_item_takes_no_attachment_or_graph_from_its_checkpoint():
    """A results folder's checkpoint is resumed only for the item's own inputs: an attachment, graph or file the
    item does not give would widen what the run's file tools may read (or which graph it opens)."""
    from kgagents.evals.runner import stored_input_problem

    given = {"question": "q", "attachments": ["/data/a.csv"], "graph": "people"}
    assert stored_input_problem({"question": "q", "attachments": ["/data/a.csv"], "graph": "people"}, given) is None
    assert stored_input_problem({"question": "q", "attachments": []}, given) is None
    assert "'/home/me/.ssh/id_rsa'" in stored_input_problem(
        {"attachments": ["/data/a.csv", "/home/me/.ssh/id_rsa"]}, given)
    assert "graph is '/srv/other'" in stored_input_problem({"graph": "/srv/other"}, given)
    assert "kg_file" in stored_input_problem({"kg_file": "/etc/passwd"}, given)


# ----------------------------------------------------------------------------------------------------------------
# Bundles whose zip directory is the bomb, and STaRK pickles that forge NumPy values or ask for memory
# ----------------------------------------------------------------------------------------------------------------
def many_members(path: Path, n: int) -> Path:
    """A zip archive of ``n`` empty members (``n`` of up to a million: 100 MB), written directly."""
    with open(path, "wb") as f:
        offsets = []
        for i in range(n):
            name = f"a{i}.json".encode()
            offsets.append(f.tell())
            f.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0) + name)
        start = f.tell()
        for i in range(n):
            name = f"a{i}.json".encode()
            f.write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0, 0, 0,
                                0, 0, offsets[i]) + name)
        end = f.tell()
        f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(n, 0xFFFF), min(n, 0xFFFF), end - start, start, 0))
    return path


@pytest.mark.parametrize("announced", [True, False])
def test_a_bundles_zip_directory_is_refused_before_zipfile_reads_it(tmp_path, monkeypatch, announced):
    """200,000 members (a million cost ~25 s and 550 MB): zipfile parses every entry of the directory into an
    object before the 64-member limit could be checked. The archive's end record says how many members and how
    large a directory: refused from it, before ``zipfile.ZipFile`` is made. The same when the record's count is
    small but its directory is large."""
    import tracemalloc

    from kgagents.core import bundles

    bundle = many_members(tmp_path / "many.zip", 200_000)
    if not announced:  # the count says 3; the directory still holds 200,000 entries
        data = bytearray(bundle.read_bytes())
        struct.pack_into("<HH", data, len(data) - 22 + 8, 3, 3)
        bundle.write_bytes(bytes(data))
    opened = []
    monkeypatch.setattr(bundles.zipfile, "ZipFile", lambda *a, **k: opened.append(a))
    tracemalloc.start()
    try:
        with pytest.raises(bundles.BundleError, match="the limit is"):
            bundles.unpack(bundle, tmp_path / "out")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert opened == [], "zipfile read the directory"
    assert peak < 1 << 20, f"{peak} bytes were allocated to refuse it"
    assert not (tmp_path / "out").exists()


_FORGED_NODE_INFO = {
    # a dtype whose only field is an object, with flags (its state's 8th item) that say it holds none: frombuffer
    # then reads 8 bytes of the file as a pointer to an object (the process dies, SIGSEGV)
    "an object field read from bytes": """
        forged = R(np.dtype, ("V8", False, True), (3, "|", None, ("a",), {"a": (np.dtype("O"), 0)}, 8, 1, 0))
        value = R(_frombuffer, (b"\\x41" * 8, forged, (1,), "C"))""",
    "an object dtype claiming no objects": """
        forged = R(np.dtype, ("O8", False, True), (3, "|", None, None, None, -1, -1, 0))
        value = R(_frombuffer, (b"\\x41" * 8, forged, (1,), "C"))""",
    # a field 4 KiB past an 8-byte item: NumPy read (and handed out) memory beyond the file's bytes
    "a field past the item's end": """
        forged = R(np.dtype, ("V8", False, True), (3, "|", None, ("a",), {"a": (np.dtype("i8"), 4096)}, 8, 1, 0))
        value = R(_frombuffer, (b"\\x41" * 8, forged, (1,), "C"))""",
}
_FORGE = textwrap.dedent("""
    import pickle, sys
    import numpy as np
    from numpy._core.multiarray import _reconstruct, scalar
    from numpy._core.numeric import _frombuffer

    class R:
        def __init__(self, *r): self.r = r
        def __reduce__(self): return self.r

    class Built:
        def __init__(self, made, state): self.made, self.state = made, state
        def __reduce__(self): return (*self.made.r, self.state)
    {case}
    open(sys.argv[1], "wb").write(pickle.dumps({{0: {{"type": value, "name": "n"}}}}, protocol=4))
""")
_READ = ("import sys; from kgagents.tools.pgraph.stark import read_processed\n"
         "try:\n    read_processed(__import__('pathlib').Path(sys.argv[1]))\n"
         "except Exception as exc:\n    print('refused:', exc)\n")


@pytest.mark.parametrize("case", sorted(_FORGED_NODE_INFO))
def test_a_stark_pickle_cannot_forge_a_numpy_dtype(tmp_path, case):
    """Every global of these pickles is one a plain-data pickle may name (``numpy.dtype``, ``_frombuffer``), yet
    NumPy's own reconstructors took the file's flags and fields for the truth: reading the folder dereferenced a
    pointer the file chose (SIGSEGV), or read memory past the file's bytes. Refused by name instead (run in a
    process of its own: a crash must not take the test session with it)."""
    import torch

    folder = tmp_path / "processed"
    folder.mkdir()
    script = tmp_path / "make.py"
    script.write_text(_FORGE.format(case=textwrap.indent(textwrap.dedent(_FORGED_NODE_INFO[case]), "")))
    subprocess.run([sys.executable, str(script), str(folder / "node_info.pkl")], check=True)
    torch.save(torch.tensor([[0], [0]], dtype=torch.long), folder / "edge_index.pt")
    done = subprocess.run([sys.executable, "-c", _READ, str(folder)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}, check=False)
    assert done.returncode == 0, f"the reader died with signal {-done.returncode}: {done.stderr[-500:]}"
    assert "refused:" in done.stdout and "node_info.pkl" in done.stdout, done.stdout + done.stderr[-500:]


@pytest.mark.parametrize("pickled", [
    b"\x80\x04cbuiltins\nbytearray\n\x8a\x05" + (2 << 30).to_bytes(5, "little") + b"\x85R.",  # bytearray(2 GiB)
    b"\x80\x04\x8e" + (2 << 30).to_bytes(8, "little") + b"abc.",  # 2 GiB of bytes announced, 3 given
], ids=["bytearray-of-a-size", "bytes-longer-than-the-file"])
def test_a_stark_pickle_cannot_ask_for_gigabytes(tmp_path, pickled):
    """A 32-byte ``node_info.pkl`` asked for 2 GiB (``bytearray`` is a name plain data may use); under a 1.5 GiB
    address-space limit the ``MemoryError`` escaped ``read_processed``. Refused with the file's name instead."""
    folder = tmp_path / "processed"
    folder.mkdir()
    (folder / "node_info.pkl").write_bytes(pickled)
    reader = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))\n"
              "from kgagents.tools.pgraph.model import GraphFormatError\n"
              "from kgagents.tools.pgraph.stark import read_processed\n"
              "try:\n    read_processed(__import__('pathlib').Path(sys.argv[1]))\n"
              "except GraphFormatError as exc:\n    print('refused:', exc)\n")
    done = subprocess.run([sys.executable, "-c", reader, str(folder)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}, check=False)
    assert done.returncode == 0 and "refused:" in done.stdout and "node_info.pkl" in done.stdout, done.stderr[-600:]
