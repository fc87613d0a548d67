"""The event loop of evaluation runs: uvloop where installed, asyncio's on request."""

from __future__ import annotations

import asyncio

import pytest

from kgagents.evals import event_loop


async def loop_type() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_evaluations_run_on_uvloop_where_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvloop")
    monkeypatch.delenv(event_loop.VARIABLE, raising=False)
    assert event_loop.run(loop_type()).startswith("uvloop")


def test_asyncio_s_loop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.VARIABLE, "asyncio")
    assert event_loop.run(loop_type()).startswith("asyncio")


def test_an_unknown_loop_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.VARIABLE, "trio")
    with pytest.raises(ValueError, match="KGAGENTS_EVENT_LOOP='trio'"):
        event_loop.run(loop_type())
