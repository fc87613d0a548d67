"""Runs: checkpoints (SQLite in the runs directory, or PostgreSQL) plus a small registry of threads.

The registry remembers, per thread, the workflow, the question and the *context* it was started with, because
LangGraph does not checkpoint the runtime context: ``resume`` passes the same context again. It also remembers
where the thread's checkpoints are (the default SQLite file, or a ``postgresql://`` URL without its password),
so ``resume`` and ``show`` find them again.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from kgagents.core.checkpointer import open_checkpointer as open_database
from kgagents.core.config import data_folder, load_env
from kgagents.core.extras import require
from kgagents.core.nofollow import own_folder, refuse_link
from kgagents.core.private import private_dir, private_file
from kgagents.core.serde import strict_serializer

CHECKPOINTS_FILE = "checkpoints.sqlite"
REGISTRY_FILE = "runs.sqlite"
CHECKPOINTER_VARIABLE = "KGAGENTS_CHECKPOINTER"
_POSTGRES_SCHEMES = ("postgres://", "postgresql://")


def new_thread_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


@dataclass
class RunRecord:
    thread_id: str
    workflow: str
    question: str
    context: dict[str, Any]
    created: float
    status: str
    answer: str | None
    checkpointer: str | None = None
    """Where the thread's checkpoints are: None for the runs directory's SQLite file, else a PostgreSQL URL
    without its password."""


class RunRegistry:
    """Threads started from the CLI (or the evaluation runner) in one runs directory."""

    def __init__(self, runs_dir: str | Path) -> None:
        self.runs_dir = Path(runs_dir)
        data_folder(self.runs_dir)
        self.path = private_file(self.runs_dir / REGISTRY_FILE)
        with self._connect() as db:
            db.execute("""CREATE TABLE IF NOT EXISTS runs (
                thread_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, question TEXT NOT NULL,
                context TEXT NOT NULL, created REAL NOT NULL, status TEXT NOT NULL, answer TEXT, pid INTEGER,
                checkpointer TEXT)""")
            columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
            if "checkpointer" not in columns:  # a registry written before runs could live in PostgreSQL
                db.execute("ALTER TABLE runs ADD COLUMN checkpointer TEXT")

    def _connect(self) -> sqlite3.Connection:
        try:
            return sqlite3.connect(self.path, timeout=30)
        except sqlite3.Error as exc:
            raise RuntimeError(f"cannot open the run registry {self.path}: {exc}") from exc

    @property
    def checkpoints_path(self) -> Path:
        return self.runs_dir / CHECKPOINTS_FILE

    def record(self, thread_id: str, workflow: str, question: str, context: dict[str, Any],
               checkpointer: str | None = None) -> None:
        """Remember a new thread; ``checkpointer``: a PostgreSQL URL (kept without its password) or None."""
        with self._connect() as db:
            db.execute("INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?, 'running', NULL, ?, ?)",
                       (thread_id, workflow, question, json.dumps(context), time.time(), os.getpid(),
                        without_password(checkpointer) if checkpointer else None))

    def checkpointer_for(self, thread_id: str, given: str | None = None) -> str:
        """Where to open ``thread_id``'s checkpoints: the place recorded when it started.

        ``given`` (``--checkpointer`` or ``KGAGENTS_CHECKPOINTER``) is used instead when it names that same
        place, so it can bring the password the registry does not keep; otherwise the recorded URL is used as
        it is (libpq then takes the password from ``PGPASSWORD`` or ``~/.pgpass``).
        """
        record = self.get(thread_id)
        recorded = record.checkpointer if record else None
        if not recorded:
            return str(self.checkpoints_path)
        if given and is_postgres_url(given) and without_password(given) == recorded:
            return given
        return recorded

    def mark_running(self, thread_id: str) -> None:
        with self._connect() as db:
            db.execute("UPDATE runs SET status = 'running', pid = ? WHERE thread_id = ?", (os.getpid(), thread_id))

    def finish(self, thread_id: str, status: str, answer: str | None = None) -> None:
        with self._connect() as db:
            db.execute("UPDATE runs SET status = ?, answer = ? WHERE thread_id = ?", (status, answer, thread_id))

    def get(self, thread_id: str) -> RunRecord | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM runs WHERE thread_id = ?", (thread_id,)).fetchone()
        return self._row(row) if row else None

    def list(self) -> list[RunRecord]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM runs ORDER BY created").fetchall()
        return [self._row(r) for r in rows]

    @staticmethod
    def _row(row: tuple[Any, ...]) -> RunRecord:
        try:
            context = json.loads(row[3])
        except ValueError:
            context = {}
        status = row[5]
        if status == "running" and not _alive(row[7]):
            status = "interrupted"  # the process died (killed, crashed) before it could say so
        return RunRecord(row[0], row[1], row[2], context, row[4], status, row[6], row[8])


def thread_work_dir(runs_dir: str | Path, thread_id: str) -> Path:
    """The work folder of thread ``thread_id``: ``runs_dir/work/<thread>``, readable by its owner only, made as real
    folders of the runs directory. A link at ``work`` or ``work/<thread>`` (a runs directory someone else made may
    carry one) is refused, never followed, and no mode is changed through it: the folder it points at would become
    the sandbox's writable folder and a root of the file tools. Absolute, never resolved through links."""
    if not thread_id or thread_id in (".", "..") or "/" in thread_id or os.sep in thread_id or "\0" in thread_id:
        raise ValueError(f"{thread_id!r} cannot name a run's work folder (a thread id is one plain name)")
    work = Path(os.path.abspath(runs_dir)) / "work"
    for folder in (work, work / thread_id):
        refuse_link(folder, "runs' work folders")
    folder = private_dir(data_folder(work) / thread_id)
    own_folder(work, "runs' work folders")
    return own_folder(folder, "a run's work folder")


def is_finished(snapshot: Any) -> bool:
    """Whether a thread's latest ``StateSnapshot`` is the end of its run.

    Not ``not snapshot.next``: LangGraph's ``next`` leaves out the tasks whose results are saved, so a process
    that died after saving a superstep's results, before the checkpoint that applies them, leaves a thread
    whose ``next`` is empty though the run is not over (resuming it applies those results and goes on). A run
    is over when its latest checkpoint has no task at all.
    """
    return not snapshot.tasks


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@asynccontextmanager
async def sqlite_checkpointer(path: str | Path) -> AsyncIterator[AsyncSqliteSaver]:
    """An async SQLite checkpointer on ``path`` (created if needed, readable by its owner only), with the strict
    serializer (:mod:`kgagents.core.serde`)."""
    private_dir(Path(path).parent, tighten=False)
    private_file(path)
    async with aiosqlite.connect(str(path)) as conn:
        yield AsyncSqliteSaver(conn, serde=strict_serializer(str(path)))


def is_postgres_url(target: str | Path | None) -> bool:
    return str(target or "").startswith(_POSTGRES_SCHEMES)


def without_password(url: str) -> str:
    """``url`` without its password (in the user part or as a ``password=`` parameter): what may be stored or
    printed."""
    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username}@{host}" if parts.username else host)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "password" for key, _ in query):
        parts = parts._replace(query=urlencode([(key, value) for key, value in query if key != "password"]))
    return urlunsplit(parts)


def configured_checkpointer() -> str | None:
    """``KGAGENTS_CHECKPOINTER`` from the environment (or ``.env``): where new CLI runs keep checkpoints."""
    load_env()
    value = os.environ.get(CHECKPOINTER_VARIABLE, "").strip()
    return value or None


@asynccontextmanager
async def open_checkpointer(target: str | Path) -> AsyncIterator[BaseCheckpointSaver]:
    """The checkpointer at ``target``: a SQLite file (path or ``sqlite:///path``) or a ``postgresql://`` URL.

    A PostgreSQL database gets langgraph's tables on first use (``AsyncPostgresSaver.setup``, idempotent); a
    server that cannot be reached is a clear :class:`ValueError` naming the URL without its password.
    """
    text = str(target)
    if not is_postgres_url(text):
        async with sqlite_checkpointer(text.removeprefix("sqlite:///")) as saver:
            yield saver
        return
    psycopg = require("psycopg", "PostgreSQL checkpoints")
    async with AsyncExitStack() as stack:
        try:
            saver = await stack.enter_async_context(open_database(text))
        except psycopg.OperationalError as exc:
            where = without_password(text)
            raise ValueError(f"cannot open the PostgreSQL checkpointer {where}: {exc}") from exc
        yield saver
