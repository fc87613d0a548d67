"""Fixtures of the tool tests: the loopback fixture server, tool environments pointed at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kgagents.core.config import Settings
from kgagents.core.scripted import ScriptedChatModel
from kgagents.tools.http import FetchLimits
from kgagents.tools.manager import ToolEnv
from tests.tools.server import FixtureServer


@pytest.fixture(scope="session")
def web() -> Iterator[FixtureServer]:
    """The fixture server (one per test session)."""
    server = FixtureServer().start()
    yield server
    server.stop()


@pytest.fixture
def settings(web: FixtureServer) -> Settings:
    """Settings whose search, Wikipedia and Wayback endpoints are the fixture server."""
    return Settings(search_api_base=web.url("/search"), wikipedia_api_base=web.url("/w/api.php"),
                    wayback_api_base=web.url("/wayback/available"))


#: Fast limits for tests (a 1 MB download limit, a 2 s total time limit), and loopback allowed: the fixture
#: server is there (tests/tools/test_url_guard.py checks the refusal).
TEST_LIMITS = FetchLimits(max_bytes=1024 * 1024, connect_timeout_s=2.0, read_timeout_s=2.0, total_timeout_s=2.0,
                          allow_private=True)


def make_env(tmp_path: Path, settings: Settings, llm: Any = None, **extra: Any) -> ToolEnv:
    """A tool environment for tests: fast retries, test fetch limits, work dir under ``tmp_path``."""
    extra.setdefault("fetch_limits", TEST_LIMITS)
    return ToolEnv(work_dir=tmp_path / "work", llm=llm, settings=settings, max_retries=3, backoff_base_s=0.01,
                   backoff_max_s=0.02, extra=extra)


@pytest.fixture
def env(tmp_path: Path, settings: Settings) -> ToolEnv:
    """A tool environment without a chat model."""
    return make_env(tmp_path, settings)


def scripted(*steps: dict[str, Any]) -> ScriptedChatModel:
    """A scripted chat model with ``steps``."""
    return ScriptedChatModel(steps=list(steps))
