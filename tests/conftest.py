"""Shared fixtures: a clean environment (no user keys, no .env, no local Ollama) and KGoT helpers."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

# Before any project module is imported: never read a developer's .env during the tests.
os.environ["KGAGENTS_NO_DOTENV"] = "1"
# Nothing the tests run may write to the user's data folder: a data directory of the session's own (each test
# gets its own below), and XDG_DATA_HOME for subprocesses started with the KGAGENTS_ variables taken away.
_SESSION_DATA = tempfile.mkdtemp(prefix="kgagents-test-data-")
atexit.register(shutil.rmtree, _SESSION_DATA, ignore_errors=True)  # gone with the session
os.environ["KGAGENTS_HOME"] = os.path.join(_SESSION_DATA, "kgagents")
os.environ["XDG_DATA_HOME"] = _SESSION_DATA
# nor to the user's trust store of folders (kgagents trust): a configuration folder of the session's own
os.environ["XDG_CONFIG_HOME"] = os.path.join(_SESSION_DATA, "config")

_USER_VARIABLES = [name for name in os.environ if name.startswith("KGAGENTS_") and name != "KGAGENTS_HOME"]
_USER_VARIABLES += [
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "SERPAPI_API_KEY",
    # what the SDKs and libpq add to requests on their own
    "OPENAI_CUSTOM_HEADERS", "OPENAI_ORG_ID", "OPENAI_ORGANIZATION", "OPENAI_PROJECT_ID", "OLLAMA_API_KEY",
    "PGPASSWORD", "PGSERVICE",
]

#: The fake model servers' fixtures (``openai_server``, ``ollama_server``) for every test that asks for one.
pytest_plugins = ["tests.fakes.openai_server", "tests.fakes.ollama_server"]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    """Every test starts without the user's configuration and with its own runs directory."""
    for name in _USER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KGAGENTS_NO_DOTENV", "1")
    monkeypatch.setenv("KGAGENTS_HOME", str(tmp_path / "kgagents-home"))
    monkeypatch.setenv("KGAGENTS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("KGAGENTS_GRAPHS_DIR", str(tmp_path / "graphs"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # the trust store of this test alone
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the tests' web servers are on loopback, which the web tools refuse by default (tests/tools/test_url_guard.py
    # and the prompt-injection tests take this away again)
    monkeypatch.setenv("KGAGENTS_ALLOW_PRIVATE_URLS", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    # the scripted fake servers recognise a call by its stage, which requests carry in a header when asked to
    monkeypatch.setenv("KGAGENTS_STAGE_HEADER", "1")
    # the PostgreSQL checkpointers an earlier test named on its command line are not this test's choice
    monkeypatch.setattr("kgagents.core.checkpointer._named", [])
    # the failures a model met in an earlier test do not count against it in this one
    monkeypatch.setattr("kgagents.core.retry._streaks", {})
    monkeypatch.setattr("kgagents.core.retry._failed_calls", {})
    monkeypatch.setattr("kgagents.core.retry._rate_waited", {})
    monkeypatch.setattr("kgagents.core.retry._alive_at", {})
    yield


@pytest.fixture(scope="session")
def postgres_url():
    """The URL of a PostgreSQL server started for this session (see tests/postgres.py), stopped at its end.

    Without Debian's ``postgresql`` binaries the tests that need it are skipped, except in CI (``CI`` set),
    where ``.ci/run`` installs them and their absence is a failure.
    """
    from tests.postgres import PostgresServer, binaries

    bin_dir = binaries()
    if bin_dir is None:
        if os.environ.get("CI"):
            pytest.fail("CI needs PostgreSQL's binaries (`apt-get install postgresql`, done by .ci/run)")
        pytest.skip("PostgreSQL is not installed (`apt-get install postgresql` gives initdb and pg_ctl)")
    server = PostgresServer(bin_dir)
    try:
        yield server.start()
    finally:
        server.stop()
