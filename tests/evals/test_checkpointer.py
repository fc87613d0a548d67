"""The evaluation's SQLite checkpointer: one writer thread, concurrent writes committed together, the same file
format as langgraph's own SQLite savers, and a returned write survives the process being killed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from kgagents.core.checkpointer import BatchedSqliteSaver, batched_sqlite_saver, open_checkpointer

ROOT = Path(__file__).resolve().parents[2]


def config(thread: str, checkpoint_id: str | None = None) -> dict:
    conf = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


async def put(saver, thread: str, value: str) -> dict:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"answer": value}
    saved = await saver.aput(config(thread), checkpoint, {"source": "loop", "step": 1}, {})
    await saver.aput_writes(saved, [("answer", value + "!"), ("votes", [1, 2])], task_id=f"task-{thread}")
    return saved


async def test_concurrent_writes_share_commits_and_read_back(tmp_path):
    path = tmp_path / "c.sqlite"
    statements: list[str] = []
    async with batched_sqlite_saver(path) as saver:
        saver.conn.set_trace_callback(statements.append)
        saved = await asyncio.gather(*(put(saver, f"t{i}", f"v{i}") for i in range(40)))
        tup = await saver.aget_tuple(config("t7"))
        assert tup.checkpoint["channel_values"] == {"answer": "v7"}
        assert ("task-t7", "answer", "v7!") in tup.pending_writes
        listed = [t async for t in saver.alist(config("t3"))]
        assert [t.config["configurable"]["checkpoint_id"] for t in listed] == [saved[3]["configurable"]
                                                                                ["checkpoint_id"]]
    inserts = [s for s in statements if s.startswith("INSERT")]
    commits = [s for s in statements if s == "COMMIT"]
    assert len(inserts) == 40 + 80  # a checkpoint and two writes per thread
    assert len(commits) < 40  # 80 calls: the writes that wait together are committed together

    # langgraph's own async SQLite saver reads the same file
    async with AsyncSqliteSaver.from_conn_string(str(path)) as other:
        tup = await other.aget_tuple(config("t39"))
        assert tup.checkpoint["channel_values"] == {"answer": "v39"}
        assert {w[1] for w in tup.pending_writes} == {"answer", "votes"}


async def test_delete_and_a_closed_saver(tmp_path):
    async with open_checkpointer(f"sqlite:///{tmp_path / 'd.sqlite'}") as saver:
        assert isinstance(saver, BatchedSqliteSaver)
        await put(saver, "gone", "x")
        await saver.adelete_thread("gone")
        assert await saver.aget_tuple(config("gone")) is None
    with pytest.raises(RuntimeError, match="closed"):
        await saver.aget_tuple(config("gone"))


async def test_the_file_is_in_wal_mode_with_normal_sync(tmp_path):
    async with batched_sqlite_saver(tmp_path / "w.sqlite") as saver:
        mode = await saver._submit(lambda: saver.conn.execute("PRAGMA journal_mode").fetchone()[0])
        sync = await saver._submit(lambda: saver.conn.execute("PRAGMA synchronous").fetchone()[0])
    assert mode == "wal" and sync == 1  # NORMAL


KILLED = """
import asyncio, os, signal, sys
sys.path.insert(0, {root!r})
from tests.evals.test_checkpointer import put
from kgagents.core.checkpointer import batched_sqlite_saver

async def main():
    async with batched_sqlite_saver({path!r}) as saver:
        await put(saver, "survivor", "kept")
        print("saved", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


@pytest.mark.slow
def test_a_returned_write_survives_a_killed_process(tmp_path):
    path = tmp_path / "k.sqlite"
    proc = subprocess.run([sys.executable, "-c", KILLED.format(root=str(ROOT), path=str(path))], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == -9 and "saved" in proc.stdout, proc.stderr[-2000:]

    async def read() -> Any:
        async with batched_sqlite_saver(path) as saver:
            return await saver.aget_tuple(config("survivor"))

    tup = asyncio.run(read())
    assert tup is not None and tup.checkpoint["channel_values"] == {"answer": "kept"}
    assert json.loads(json.dumps(tup.metadata))["step"] == 1


async def test_tables_of_another_version_get_langgraphs_own_saver(tmp_path, monkeypatch, caplog):
    """The batched writer writes SqliteSaver's tables with its own SQL: where a langgraph-checkpoint-sqlite
    makes other tables, the file is opened with that version's AsyncSqliteSaver (the public path) instead."""
    from kgagents.core import checkpointer

    path = tmp_path / "c.sqlite"
    async with open_checkpointer(path) as saver:
        assert isinstance(saver, BatchedSqliteSaver)
        saved = await put(saver, "t1", "kept")
    monkeypatch.setitem(checkpointer.COLUMNS, "writes",
                        (*checkpointer.COLUMNS["writes"], "column_of_the_future"))
    async with open_checkpointer(path) as saver:
        assert isinstance(saver, AsyncSqliteSaver)
        assert (await saver.aget_tuple(saved)).checkpoint["channel_values"] == {"answer": "kept"}
        await put(saver, "t2", "written")
    assert "using its AsyncSqliteSaver" in caplog.text and "column_of_the_future" in caplog.text
