"""kgagents.core.private.private_file on a SQLite database that a connection of this process holds locked.

Closing any descriptor of a file drops every POSIX lock the process holds on it; SQLite's own locks live there.
A private_file call that opened and closed the database while another thread's connection held it dropped that
connection's lock (a Dask worker's two threads on one checkpoint file got "disk I/O error").
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys

import pytest

from kgagents.core.private import private_file

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX modes and locks")

WRITER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=0)
try:
    conn.execute("INSERT INTO t VALUES (2)")
    conn.commit()
    print("wrote")
except sqlite3.OperationalError as exc:
    print("refused:", exc)
"""


def test_a_locked_database_stays_locked(tmp_path):
    path = tmp_path / "checkpoints.sqlite"
    private_file(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO t VALUES (1)")
    try:
        private_file(path)  # another thread of this process opening the same database
        other = subprocess.run([sys.executable, "-c", WRITER, str(path)], capture_output=True, text=True,
                               check=True)
        assert other.stdout.startswith("refused:"), other.stdout  # the lock held: the other process waits
        assert "locked" in other.stdout
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert [row[0] for row in sqlite3.connect(path).execute("SELECT x FROM t")] == [1]


def test_a_missing_file_is_made_private_and_nothing_is_left_beside_it(tmp_path):
    path = tmp_path / "runs.sqlite"
    private_file(path)
    assert path.is_file() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.sqlite"]
    path.write_bytes(b"kept")
    private_file(path)  # an existing file is never replaced or emptied
    assert path.read_bytes() == b"kept"


def test_a_wider_file_is_tightened_and_a_link_is_left_to_the_caller(tmp_path):
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"")
    path.chmod(0o644)
    private_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    target.chmod(0o644)
    link = tmp_path / "link.sqlite"
    link.symlink_to(target)
    private_file(link)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # nothing done through the link
