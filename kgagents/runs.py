"""Runs on disk: SQLite checkpoints plus a small registry of threads.

The registry remembers, per thread, the workflow, the question and the *context* it was started with, because
LangGraph does not checkpoint the runtime context: ``resume`` passes the same context again.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

CHECKPOINTS_FILE = "checkpoints.sqlite"
REGISTRY_FILE = "runs.sqlite"


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


class RunRegistry:
    """Threads started from the CLI (or the evaluation runner) in one runs directory."""

    def __init__(self, runs_dir: str | Path) -> None:
        self.runs_dir = Path(runs_dir)
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.runs_dir / REGISTRY_FILE
        with self._connect() as db:
            db.execute("""CREATE TABLE IF NOT EXISTS runs (
                thread_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, question TEXT NOT NULL,
                context TEXT NOT NULL, created REAL NOT NULL, status TEXT NOT NULL, answer TEXT, pid INTEGER)""")

    def _connect(self) -> sqlite3.Connection:
        try:
            return sqlite3.connect(self.path, timeout=30)
        except sqlite3.Error as exc:
            raise RuntimeError(f"cannot open the run registry {self.path}: {exc}") from exc

    @property
    def checkpoints_path(self) -> Path:
        return self.runs_dir / CHECKPOINTS_FILE

    def record(self, thread_id: str, workflow: str, question: str, context: dict[str, Any]) -> None:
        with self._connect() as db:
            db.execute("INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?, 'running', NULL, ?)",
                       (thread_id, workflow, question, json.dumps(context), time.time(), os.getpid()))

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
        return RunRecord(row[0], row[1], row[2], context, row[4], status, row[6])


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
    """An async SQLite checkpointer on ``path`` (created if needed)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        yield saver
