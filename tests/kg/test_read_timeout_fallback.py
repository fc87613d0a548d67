"""The neo4j driver's private read timeout (kgagents.tools.kg.cypher_store.give_up_after, docs/dependencies.md):
a driver without it, or one where it fails, leaves the query to the server's own limit and says so once. (That a
Bolt store still answers without it: tests/kg/test_server_caps.py, against ArcadeDB.)"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kgagents.core import third_party
from kgagents.tools.kg import cypher_store

DOC = Path(__file__).resolve().parents[2] / "docs" / "dependencies.md"


def _fails(seconds: float) -> None:
    raise TypeError("set_read_timeout() takes a timedelta in this driver")


@pytest.mark.parametrize("tx", [object(), SimpleNamespace(_connection=SimpleNamespace(socket=SimpleNamespace(
    set_read_timeout=_fails)))], ids=["gone", "raises"])
def test_a_driver_without_the_read_timeout_leaves_queries_to_the_server_said_once(
        tx: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(third_party, "_warned", set())
    with caplog.at_level(logging.WARNING):
        assert not cypher_store.give_up_after(tx, 1.0)
        assert not cypher_store.give_up_after(tx, 1.0)
    [message] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    part = cypher_store.READ_TIMEOUT
    assert f"neo4j {third_party.installed_version('neo4j')}" in message and part.symbol in message
    assert part.fallback in message
    assert f"| neo4j {part.tested} | `{part.symbol}`" in DOC.read_text(encoding="utf-8")


def test_a_driver_with_the_read_timeout_sets_it_without_a_word(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(third_party, "_warned", set())
    got: list[float] = []
    tx = SimpleNamespace(_connection=SimpleNamespace(socket=SimpleNamespace(set_read_timeout=got.append)))
    with caplog.at_level(logging.WARNING):
        assert cypher_store.give_up_after(tx, 2.5)
    assert got == [2.5] and not caplog.records
