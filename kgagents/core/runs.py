"""Runs: checkpoints (SQLite in the runs directory, or PostgreSQL) plus a small registry of threads.

The registry remembers, per thread, the workflow, the question and the *context* it was started with, because
LangGraph does not checkpoint the runtime context: ``resume`` passes the same context again. It also remembers
where the thread's checkpoints are (the default SQLite file, or a ``postgresql://`` URL without its password),
so ``resume`` and ``show`` find them again.

A registry can be someone else's (a runs folder handed over, copied from another machine, a cloned project's
``.kgagents``), and its context and checkpointer URL would then choose servers: a ``base_url`` that receives the
run's prompts, a PostgreSQL server that receives ``PGPASSWORD``, a ``work_dir``, weak sandboxing. So each row is
marked with an HMAC of what it keeps, under a key only this user's kgagents has (:func:`registry_key`:
``runs.key`` in the per-user configuration folder, ``0600``); :attr:`RunRecord.own` says whether the mark is
right. A row that is not the user's own is data: ``resume`` takes from its context only the plain settings a
recording may carry (:func:`kgagents.cli.recorded.plain_context`) and the rest from the user's configuration,
and its PostgreSQL checkpointer is used only when the user's ``--checkpointer`` / ``KGAGENTS_CHECKPOINTER`` names
it (:meth:`RunRegistry.checkpointer_for`). The registry keeps no credentials: a context value that holds one (a
URL with a password or a key in its query, a secret-named field) is not kept, only its name (:attr:`RunRecord.
withheld`); a resumed run takes it from the user's configuration.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import stat
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from kgagents.core.checkpointer import open_checkpointer as open_database
from kgagents.core.config import data_folder, load_env
from kgagents.core.errors import KGAgentsError
from kgagents.core.extras import require
from kgagents.core.keys import say_once
from kgagents.core.nofollow import own_folder, refuse_link
from kgagents.core.private import private_dir, private_file
from kgagents.core.redact import is_secret_name, scrub
from kgagents.core.serde import strict_serializer
from kgagents.core.trust import user_config_dir

CHECKPOINTS_FILE = "checkpoints.sqlite"
REGISTRY_FILE = "runs.sqlite"
CHECKPOINTER_VARIABLE = "KGAGENTS_CHECKPOINTER"
_POSTGRES_SCHEMES = ("postgres://", "postgresql://")
#: The key that marks the registry rows this user's kgagents wrote, in :func:`user_config_dir`.
KEY_FILE = "runs.key"
_KEY_BYTES = 32
_COLUMNS = ("thread_id", "workflow", "question", "context", "created", "status", "answer", "pid", "checkpointer",
            "withheld", "mark", "models", "changes")


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
    withheld: list[str] = field(default_factory=list)
    """The context's fields that held credentials when the run started: not kept (see the module docstring)."""
    own: bool = False
    """Whether this user's kgagents wrote the row (its mark is right under :func:`registry_key`); if not, the row
    is someone else's data (see the module docstring)."""
    models: dict[str, Any] = field(default_factory=dict)
    """The model of each role when the run started (``role -> model``; empty in a row of an earlier version): what
    a resume with ``--model`` is compared with (:mod:`kgagents.core.endpoint_change`)."""
    changes: list[dict[str, Any]] = field(default_factory=list)
    """What resumes changed of the run's settings (its model's address), in order: ``{"at": time, "base_url":
    [before, after], ...}``, without credentials (:meth:`RunRegistry.record_change`)."""


class ForeignCheckpointer(KGAgentsError, ValueError):
    """A registry row that is not the user's own names a PostgreSQL checkpointer the user did not configure."""


def registry_key(*, create: bool) -> bytes | None:
    """This user's key for marking registry rows (``runs.key`` in :func:`user_config_dir`), made on first use
    (``create``) as a ``0600`` file of random bytes; ``None`` when there is none yet, or when the file is not one
    only this user can read (another user's, readable by others, a link, not the key's size): then no row counts
    as the user's own, which is said once."""
    path = user_config_dir() / KEY_FILE
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        if not create:
            return None
        private_dir(path.parent)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except FileExistsError:  # another process made it first
            return registry_key(create=False)
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(_KEY_BYTES))
        return registry_key(create=False)
    except OSError as exc:
        say_once(f"{path} cannot be read as your run registry key ({exc.strerror or exc}): no run in a registry "
                 "counts as yours, so `resume` takes their servers and paths from your configuration")
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        data = f.read(_KEY_BYTES + 1)
    if key_file_problem(info, len(data)):
        say_once(f"{path} is not a key only you can read ({key_file_problem(info, len(data))}): no run in a "
                 "registry counts as yours, so `resume` takes their servers and paths from your configuration")
        return None
    return data


def key_file_problem(info: os.stat_result, size: int) -> str | None:
    """Why a key file with this ``stat`` and ``size`` is not this user's key (``None``: it is)."""
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if size != _KEY_BYTES:
        return f"{size} bytes, not {_KEY_BYTES}"
    if os.name != "nt" and info.st_uid != os.getuid():
        return "another user's file"
    if os.name != "nt" and stat.S_IMODE(info.st_mode) & 0o077:
        return f"mode {stat.S_IMODE(info.st_mode):o}: others may read or write it"
    return None


def row_mark(key: bytes, thread_id: str, workflow: str, context: dict[str, Any], withheld: list[str],
             checkpointer: str | None) -> str:
    """The mark of a registry row: an HMAC-SHA256 under ``key`` of everything of the row that a resume uses."""
    text = json.dumps([thread_id, workflow, context, withheld, checkpointer], sort_keys=True, ensure_ascii=True,
                      separators=(",", ":"), default=str)
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def kept_context(context: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """What the registry keeps of a run's ``context``: every value without credentials, and the names of the
    others (a secret-named field; a value :func:`kgagents.core.redact.scrub` would change)."""
    kept: dict[str, Any] = {}
    withheld = []
    for name, value in context.items():
        if is_secret_name(str(name)) or scrub(value) != value:
            withheld.append(str(name))
        else:
            kept[str(name)] = value
    return kept, sorted(withheld)


class RunRegistry:
    """Threads started from the CLI (or the evaluation runner) in one runs directory."""

    def __init__(self, runs_dir: str | Path) -> None:
        self.runs_dir = Path(runs_dir)
        data_folder(self.runs_dir)
        self.path = private_file(refuse_link(self.runs_dir / REGISTRY_FILE, "the run registry"))
        self._key: bytes | None = None
        with self._connect() as db:
            db.execute("""CREATE TABLE IF NOT EXISTS runs (
                thread_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, question TEXT NOT NULL,
                context TEXT NOT NULL, created REAL NOT NULL, status TEXT NOT NULL, answer TEXT, pid INTEGER,
                checkpointer TEXT, withheld TEXT, mark TEXT, models TEXT, changes TEXT)""")
            columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
            # a registry of an earlier version lacks some of them
            for column in ("checkpointer", "withheld", "mark", "models", "changes"):
                if column not in columns:
                    db.execute(f"ALTER TABLE runs ADD COLUMN {column} TEXT")

    def _connect(self) -> sqlite3.Connection:
        try:
            return sqlite3.connect(self.path, timeout=30)
        except sqlite3.Error as exc:
            raise RuntimeError(f"cannot open the run registry {self.path}: {exc}") from exc

    @property
    def checkpoints_path(self) -> Path:
        return self.runs_dir / CHECKPOINTS_FILE

    def _user_key(self, *, create: bool) -> bytes | None:
        if self._key is None:
            self._key = registry_key(create=create)
        return self._key

    def record(self, thread_id: str, workflow: str, question: str, context: dict[str, Any],
               checkpointer: str | None = None, models: dict[str, Any] | None = None) -> None:
        """Remember a new thread, marked as this user's; ``checkpointer``: a PostgreSQL URL (kept without its
        password) or None; ``models``: the model of each role. A context value with credentials is not kept
        (:func:`kept_context`)."""
        kept, withheld = kept_context(context)
        place = without_password(checkpointer) if checkpointer else None
        key = self._user_key(create=True)
        mark = row_mark(key, thread_id, workflow, kept, withheld, place) if key else None
        row = (thread_id, workflow, question, json.dumps(kept), time.time(), "running", None, os.getpid(), place,
               json.dumps(withheld), mark, json.dumps(scrub(models or {}), default=str), "[]")
        with self._connect() as db:
            db.execute(f"INSERT OR IGNORE INTO runs ({', '.join(_COLUMNS)}) VALUES "
                       f"({', '.join('?' for _ in _COLUMNS)})", row)

    def checkpointer_for(self, thread_id: str, given: str | None = None) -> str:
        """Where to open ``thread_id``'s checkpoints: the place recorded when it started.

        ``given`` (``--checkpointer`` or ``KGAGENTS_CHECKPOINTER``) is used instead when it names that same
        place, so it can bring the password the registry does not keep. Otherwise a recorded URL is used as it
        is (libpq then takes the password from ``PGPASSWORD`` or ``~/.pgpass``) only in a row that is the user's
        own; a row that is not names a server the user never chose: :class:`ForeignCheckpointer`.
        """
        record = self.get(thread_id)
        recorded = record.checkpointer if record else None
        if not recorded or record is None:
            return str(self.checkpoints_path)
        if given and is_postgres_url(given) and without_password(given) == recorded:
            return given
        if record.own:
            return recorded
        raise ForeignCheckpointer(
            f"thread {thread_id} of {self.path} keeps its checkpoints in PostgreSQL at {recorded}, says a run "
            "registry your kgagents did not write (another user's or machine's, or one from before registries were "
            "marked); kgagents connects there only when you name that server yourself: give --checkpointer URL "
            f"or set {CHECKPOINTER_VARIABLE}")

    def record_change(self, thread_id: str, change: dict[str, Any], context: dict[str, Any] | None) -> None:
        """Note what a resume changed of the run's settings (``change``: ``name -> [before, after]``, kept without
        credentials) in the run's :attr:`RunRecord.changes`; with ``context`` (the run's context after the change,
        for a row that is the user's own), the row keeps that context from now on and is marked again, so that the
        next ``resume`` continues with it. A row that is not the user's own keeps its context and its mark: it is
        someone else's data, and a later resume takes those settings from the user's configuration again."""
        record = self.get(thread_id)
        if record is None:
            raise ValueError(f"no run with thread id {thread_id!r} in {self.runs_dir}")
        changes = [*record.changes, scrub({"at": time.time(), **change})]
        with self._connect() as db:
            db.execute("UPDATE runs SET changes = ? WHERE thread_id = ?", (json.dumps(changes, default=str),
                                                                          thread_id))
        key = self._user_key(create=False)
        if context is None or not record.own or key is None:
            return
        kept, withheld = kept_context(context)
        withheld = sorted(set(withheld) | (set(record.withheld) - set(kept)))
        mark = row_mark(key, thread_id, record.workflow, kept, withheld, record.checkpointer)
        with self._connect() as db:
            db.execute("UPDATE runs SET context = ?, withheld = ?, mark = ? WHERE thread_id = ?",
                       (json.dumps(kept), json.dumps(withheld), mark, thread_id))

    def mark_running(self, thread_id: str) -> None:
        with self._connect() as db:
            db.execute("UPDATE runs SET status = 'running', pid = ? WHERE thread_id = ?", (os.getpid(), thread_id))

    def finish(self, thread_id: str, status: str, answer: str | None = None) -> None:
        with self._connect() as db:
            db.execute("UPDATE runs SET status = ?, answer = ? WHERE thread_id = ?", (status, answer, thread_id))

    def get(self, thread_id: str) -> RunRecord | None:
        with self._connect() as db:
            row = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM runs WHERE thread_id = ?", (thread_id,)).fetchone()
        return self._row(row) if row else None

    def list(self) -> list[RunRecord]:
        with self._connect() as db:
            rows = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM runs ORDER BY created").fetchall()
        return [self._row(r) for r in rows]

    def _row(self, row: tuple[Any, ...]) -> RunRecord:
        """A row as a :class:`RunRecord`; whatever a row from someone else holds is read as plain values."""
        (thread, workflow, question, context_text, created, status, answer, pid, place, withheld_text, mark,
         models_text, changes_text) = row
        context = _json_of(context_text, dict)
        withheld = [str(name) for name in _json_of(withheld_text, list)]
        place = str(place) if place else None
        if status == "running" and not _alive(pid if isinstance(pid, int) else None):
            status = "interrupted"  # the process died (killed, crashed) before it could say so
        key = self._user_key(create=False) if isinstance(mark, str) else None
        own = key is not None and hmac.compare_digest(
            str(mark), row_mark(key, str(thread), str(workflow), context, withheld, place))
        return RunRecord(str(thread), str(workflow), str(question), context,
                         float(created) if isinstance(created, (int, float)) else 0.0, str(status),
                         None if answer is None else str(answer), place, withheld, own,
                         _json_of(models_text, dict),
                         [c for c in _json_of(changes_text, list) if isinstance(c, dict)])


def _json_of[T](text: Any, kind: type[T]) -> T:
    """``text`` read as JSON of ``kind`` (an empty one when it is not)."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    return value if isinstance(value, kind) else kind()


#: The folders kgagents derives from a run's work folder: the file tools' root and the Python tool's sandbox
#: (``tools``, ``tools/python``), extracted archives (``tools/extracted``), the KG code's sandbox (``kg``) and the
#: attachments written from content (``attachments``). In a work folder that may be someone else's, none of them
#: may be a link (:func:`check_work_dir`).
DERIVED_FOLDERS = ("tools", "tools/python", "tools/extracted", "kg", "attachments")


def check_work_dir(folder: Path) -> Path:
    """``folder``, a run's work folder, refused (:class:`kgagents.core.nofollow.LinkRefused`) when one of the
    folders kgagents derives from it (:data:`DERIVED_FOLDERS`) is a link: it would make where the link points a
    root of the file tools or a sandbox's writable folder."""
    for name in DERIVED_FOLDERS:
        refuse_link(folder / name, "a run's tools, sandbox or attachments")
    return folder


def thread_work_dir(runs_dir: str | Path, thread_id: str) -> Path:
    """The work folder of thread ``thread_id``: ``runs_dir/work/<thread>``, readable by its owner only, made as real
    folders of the runs directory. A link at ``work``, ``work/<thread>`` or a folder derived from it
    (:func:`check_work_dir`; a runs directory someone else made may carry one) is refused, never followed, and no
    mode is changed through it: the folder it points at would become the sandbox's writable folder and a root of
    the file tools. Absolute, never resolved through links."""
    if not thread_id or thread_id in (".", "..") or "/" in thread_id or os.sep in thread_id or "\0" in thread_id:
        raise ValueError(f"{thread_id!r} cannot name a run's work folder (a thread id is one plain name)")
    work = Path(os.path.abspath(runs_dir)) / "work"
    for folder in (work, work / thread_id):
        refuse_link(folder, "runs' work folders")
    folder = private_dir(data_folder(work) / thread_id)
    own_folder(work, "runs' work folders")
    return check_work_dir(own_folder(folder, "a run's work folder"))


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
