"""Checkpointers of the batch runner and the CLI: SQLite for one machine, PostgreSQL for a cluster.

The SQLite checkpointer is langgraph's ``SqliteSaver`` (same tables, same serialisation: any other reader of
the file, ``AsyncSqliteSaver`` included, sees the same threads) driven by one writer thread per open file:

- every async call (``aput``, ``aput_writes``, ``aget_tuple``, ...) is one job on that thread: one hand-over
  between threads per call, where ``aiosqlite`` needs three or four (execute, commit, closing the cursor);
- the writer takes every job that is waiting and commits the writes among them in **one transaction**: with
  C items in flight, their checkpoints share commits instead of queueing behind one lock, one commit each;
- a call returns only after the commit that holds its write, so what ``aput`` returned is on disk;
- the file is in WAL mode with ``synchronous=NORMAL``: a commit survives the process being killed (what
  resuming an evaluation needs), only a power cut or OS crash can lose the last commits; several processes
  may share the file (WAL serialises their writers; a writer waits up to 30 s for the lock).

Checkpoints are serialised on the caller's thread when the call is made, as ``AsyncSqliteSaver`` does.

Every checkpointer made here reads and writes with :func:`kgagents.core.serde.strict_serializer`: a checkpoint
that holds anything but kgagents' own state types is refused, never rebuilt (it could run code).

A PostgreSQL checkpointer is opened only when it is one the user chose (:func:`postgres_refusal`): libpq sends
``PGPASSWORD``, a matching ``~/.pgpass`` line or a service file's password to whatever server a connection string
names, and a run registry, a recorded context or a results folder someone else made could name theirs. The user's
are ``KGAGENTS_CHECKPOINTER`` (the environment, or a trusted folder's ``.env``) and those named in this process by
the command line or a Python caller (:func:`name_checkpointer`); any other is refused with a message that says
how to open it. This is the one place every PostgreSQL connection of kgagents goes through.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import aiosqlite
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from kgagents.core.config import load_env
from kgagents.core.errors import KGAgentsError
from kgagents.core.extras import require
from kgagents.core.keys import same_postgres
from kgagents.core.nofollow import refuse_link
from kgagents.core.private import private_dir, private_file
from kgagents.core.redact import without_credentials
from kgagents.core.serde import strict_serializer

_PUT = ("INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
        "checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)")
_WRITES = ("INSERT OR {} INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, "
           "type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")

#: The columns :data:`_PUT` and :data:`_WRITES` write, per table: ``SqliteSaver``'s tables as its ``setup``
#: makes them (langgraph-checkpoint-sqlite 3.x). Tables without them (another version) get
#: ``AsyncSqliteSaver`` instead.
COLUMNS = {"checkpoints": ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type",
                           "checkpoint", "metadata"),
           "writes": ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "task_path", "idx", "channel",
                      "type", "value")}

log = logging.getLogger("kgagents.checkpointer")


class UnknownSchema(KGAgentsError, RuntimeError):
    """The SQLite file's tables are not the ones the batched writer writes (another
    langgraph-checkpoint-sqlite)."""


#: (function run on the writer thread, its arguments, whether it writes, the caller's future and loop)
_Job = tuple[Callable[..., Any], tuple[Any, ...], bool, "asyncio.Future[Any]", asyncio.AbstractEventLoop]


class BatchedSqliteSaver(SqliteSaver):
    """A SQLite checkpointer whose async calls run on one writer thread that commits waiting writes together.

    Open it with :func:`batched_sqlite_saver` (which starts and stops the thread); its synchronous methods are
    ``SqliteSaver``'s own and may be used from any thread.
    """

    def __init__(self, conn: sqlite3.Connection, **kwargs: Any) -> None:
        super().__init__(conn, **kwargs)
        # the writer holds it for a whole batch, whose reads take it again (the base class declares a Lock)
        self.lock = threading.RLock()  # type: ignore[assignment]
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="kgagents-sqlite-writer", daemon=True)
        self._thread.start()

    # -- the writer thread -------------------------------------------------------------------------------------
    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            batch, stop = [job], False
            while True:  # everything that is waiting goes into this batch
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stop = True
                    break
                batch.append(job)
            self._run(batch)
            if stop:
                return

    def _run(self, batch: list[_Job]) -> None:
        outcomes: list[tuple[asyncio.Future[Any], asyncio.AbstractEventLoop, Any, BaseException | None]] = []
        with self.lock:
            wrote = False
            for fn, args, writes, future, loop in batch:
                try:
                    outcomes.append((future, loop, fn(*args), None))
                    wrote = wrote or writes
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    outcomes.append((future, loop, None, exc))
            if wrote or self.conn.in_transaction:
                try:
                    self.conn.commit()
                except BaseException as exc:  # noqa: BLE001 - no write of this batch is on disk
                    try:
                        self.conn.rollback()
                    except sqlite3.Error:
                        pass
                    outcomes = [(future, loop, None, exc) if job[2] else (future, loop, result, error)
                                for (future, loop, result, error), job in zip(outcomes, batch, strict=True)]
        by_loop: dict[asyncio.AbstractEventLoop, list[Any]] = {}
        for future, loop, result, error in outcomes:
            by_loop.setdefault(loop, []).append((future, result, error))
        for loop, settled in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle, settled)
            except RuntimeError:  # that event loop is closed: nobody waits for these results any more
                pass

    async def _submit(self, fn: Callable[..., Any], *args: Any, writes: bool = False) -> Any:
        if self._closed:
            raise RuntimeError("the SQLite checkpointer is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((fn, args, writes, future, loop))
        return await future

    async def aclose(self) -> None:
        """Finish every queued call, then stop the writer thread."""
        if self._closed:
            return
        self._closed = True
        self._jobs.put(None)
        await asyncio.to_thread(self._thread.join)

    def _prepare(self) -> None:
        for wait in (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 0):  # another process may be creating the tables
            try:
                self.setup()  # tables and WAL mode
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or not wait:
                    raise
                time.sleep(wait)
        self.conn.execute("PRAGMA synchronous=NORMAL")
        for table, wanted in COLUMNS.items():
            have = {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")}
            if not set(wanted) <= have:
                raise UnknownSchema(f"the {table} table has columns {sorted(have)}, not {list(wanted)}")

    # -- the async checkpointer interface ----------------------------------------------------------------------
    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        conf = config["configurable"]
        thread_id, checkpoint_ns = conf["thread_id"], conf["checkpoint_ns"]
        type_, blob = self.serde.dumps_typed(checkpoint)
        meta = json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False).encode("utf-8", "ignore")
        row = (str(thread_id), checkpoint_ns, checkpoint["id"], conf.get("checkpoint_id"), type_, blob, meta)
        await self._submit(self.conn.execute, _PUT, row, writes=True)
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns,
                                 "checkpoint_id": checkpoint["id"]}}

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        conf = config["configurable"]
        query = _WRITES.format("REPLACE" if all(w[0] in WRITES_IDX_MAP for w in writes) else "IGNORE")
        rows = [(str(conf["thread_id"]), str(conf["checkpoint_ns"]), str(conf["checkpoint_id"]), task_id, task_path,
                 WRITES_IDX_MAP.get(channel, idx), channel, *self.serde.dumps_typed(value))
                for idx, (channel, value) in enumerate(writes)]
        await self._submit(self.conn.executemany, query, rows, writes=True)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._submit(self.get_tuple, config)

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        found = await self._submit(lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for item in found:
            yield item

    async def adelete_thread(self, thread_id: str) -> None:
        await self._submit(self.delete_thread, thread_id, writes=True)

    async def aget_delta_channel_history(self, *, config: RunnableConfig,
                                         channels: Sequence[str]) -> Mapping[str, Any]:
        return await self._submit(lambda: self.get_delta_channel_history(config=config, channels=channels))


def _settle(settled: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, error in settled:
        if future.cancelled():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


@asynccontextmanager
async def batched_sqlite_saver(path: str | Path) -> AsyncIterator[BatchedSqliteSaver]:
    """A :class:`BatchedSqliteSaver` on the SQLite file ``path`` (created if needed), closed on exit.

    Opening and closing touch the disk (closing the last connection folds the WAL into the file), so they run
    in a worker thread, not on the event loop.
    """
    def connect() -> sqlite3.Connection:
        private_dir(Path(path).parent, tighten=False)
        private_file(path)
        try:
            return sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        except sqlite3.Error as exc:
            raise ValueError(f"cannot open the checkpoint database {path}: {exc}") from exc

    conn = await asyncio.to_thread(connect)
    saver = BatchedSqliteSaver(conn, serde=strict_serializer(str(path)))
    try:
        await saver._submit(saver._prepare, writes=True)
        yield saver
    finally:
        await saver.aclose()
        await asyncio.to_thread(conn.close)


#: The files SQLite keeps beside a database: its write-ahead log, its shared-memory index, its rollback journal.
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


@contextmanager
def read_only_sqlite_saver(path: str | Path, what: str = "the checkpoints") -> Iterator[SqliteSaver]:
    """langgraph's ``SqliteSaver`` (synchronous) over the SQLite file ``path``, which is someone else's data and
    stays byte for byte as it was: opened ``immutable`` (no setup, no WAL mode, no ``CREATE TABLE``, no lock or
    index file made beside it), or, when it has a write-ahead log with checkpoints in it (a run that was stopped),
    from a private copy of the two (an immutable reader would not see them). ``path`` or a file beside it that is a
    symbolic link is refused (:class:`~kgagents.core.nofollow.LinkRefused`); a file SQLite cannot read is a
    ``ValueError`` naming it."""
    database = refuse_link(path, what)
    for suffix in SQLITE_COMPANIONS:
        refuse_link(f"{database}{suffix}", what)
    wal = Path(f"{database}-wal")
    with tempfile.TemporaryDirectory(prefix="kgagents-checkpoints-") as private:
        try:
            if wal.is_file() and wal.stat().st_size:
                copy = Path(private) / "checkpoints.sqlite"
                shutil.copyfile(database, copy, follow_symlinks=False)
                shutil.copyfile(wal, f"{copy}-wal", follow_symlinks=False)
                conn = sqlite3.connect(str(copy), check_same_thread=False)
            else:
                uri = f"file:{quote(str(Path(database).absolute()))}?mode=ro&immutable=1"
                conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except (OSError, sqlite3.Error) as exc:
            raise ValueError(f"cannot read {what} {database}: {exc}") from exc
        saver = SqliteSaver(conn, serde=strict_serializer(str(database)))
        saver.is_setup = True  # read as they are: setup would write (WAL mode, tables)
        try:
            yield saver
        except sqlite3.Error as exc:
            raise ValueError(f"cannot read {what} {database}: {exc}") from exc
        finally:
            conn.close()


#: The variable that names the user's PostgreSQL checkpointer.
CHECKPOINTER_VARIABLE = "KGAGENTS_CHECKPOINTER"
POSTGRES_SCHEMES = ("postgres://", "postgresql://")


class CheckpointerRefused(KGAgentsError, ValueError):
    """A PostgreSQL checkpointer that is not one the user chose (:func:`postgres_refusal`)."""


_named: list[str] = []
_named_lock = threading.Lock()


def name_checkpointer(url: str | os.PathLike[str] | None) -> None:
    """Let the PostgreSQL checkpointer ``url`` be opened in this process: one the user chose (a ``--checkpointer``
    or ``--set kgot_checkpointer=`` on the command line, a Python caller's argument). Anything else (a SQLite
    path, ``None``) needs no naming."""
    text = str(url or "").strip()
    if not text.startswith(POSTGRES_SCHEMES):
        return
    with _named_lock:
        if text not in _named:
            _named.append(text)


def chosen_checkpointers() -> tuple[str, ...]:
    """The PostgreSQL checkpointers the user chose: ``KGAGENTS_CHECKPOINTER`` (the environment, or a trusted
    folder's ``.env``) and those named in this process (:func:`name_checkpointer`)."""
    load_env()
    configured = (os.environ.get(CHECKPOINTER_VARIABLE) or "").strip()
    with _named_lock:
        named = tuple(_named)
    return (configured, *named) if configured else named


def _without_password(url: str) -> str:
    """The connection string ``url`` without its password (in the user part or a ``password=`` parameter); its
    user kept, so that it can be given back as it is."""
    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username}@{host}" if parts.username else host)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "password" for key, _ in query):
        parts = parts._replace(query=urlencode([(key, value) for key, value in query if key != "password"]))
    return urlunsplit(parts)


def postgres_refusal(url: str, chosen: Iterable[str]) -> str | None:
    """Why the PostgreSQL checkpointer ``url`` may not be opened, or ``None`` when it is one of ``chosen`` (the
    user's): libpq reads the same connection from both, the password aside
    (:func:`kgagents.core.keys.same_postgres`). Connection strings are read by libpq's own parser, so that a
    ``?host=`` or ``?hostaddr=`` parameter counts as libpq counts it; a ``service=`` one is compared as written
    (the service's own server is not looked up: a service is the user's only where the user's string names it)."""
    conninfo = require("psycopg", "PostgreSQL checkpoints").conninfo
    shown = _without_password(url)
    try:
        params = conninfo.conninfo_to_dict(url)
    except Exception as exc:  # noqa: BLE001 - psycopg's ProgrammingError: libpq cannot read it
        return f"cannot read the PostgreSQL connection string {shown}: {exc}"
    for other in chosen:
        try:
            if same_postgres(params, conninfo.conninfo_to_dict(other)):
                return None
        except Exception:  # noqa: BLE001 - a chosen string libpq cannot read opens nothing
            continue
    return (f"the PostgreSQL checkpointer {shown} is not one you chose ({CHECKPOINTER_VARIABLE}, or a "
            "--checkpointer on this command line), and libpq would send it your PGPASSWORD, ~/.pgpass or service "
            f"password; if it is yours, give it: --checkpointer {shown}")


@asynccontextmanager
async def open_checkpointer(url: str | Path) -> AsyncIterator[Any]:
    """A checkpointer from a path (SQLite file) or URL (``sqlite:///path``, ``postgresql://...``), with the
    strict serializer (see the module docstring). A PostgreSQL URL that is not one the user chose raises
    :class:`CheckpointerRefused` before anything connects (:func:`postgres_refusal`)."""
    text = str(url)
    if text.startswith(POSTGRES_SCHEMES):
        postgres = require("langgraph.checkpoint.postgres.aio", "PostgreSQL checkpoints")
        refusal = postgres_refusal(text, chosen_checkpointers())
        if refusal is not None:
            raise CheckpointerRefused(refusal)
        serde = strict_serializer(without_credentials(text))
        async with postgres.AsyncPostgresSaver.from_conn_string(text, serde=serde) as saver:
            await saver.setup()
            yield saver
        return
    path = text.removeprefix("sqlite:///")
    entered = False
    try:
        async with batched_sqlite_saver(path) as saver:
            entered = True
            yield saver
        return
    except UnknownSchema as exc:
        if entered:
            raise
        log.warning("the batched SQLite checkpointer does not know this langgraph-checkpoint-sqlite's tables "
                    "(%s); using its AsyncSqliteSaver", exc)
    async with aiosqlite.connect(path) as conn:
        saver = AsyncSqliteSaver(conn, serde=strict_serializer(path))
        await saver.setup()
        yield saver
