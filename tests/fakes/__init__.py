"""Fake servers for tests (they listen on a free loopback port, script their replies and record requests),
and :func:`isolate_model_env`, which hides the user's own model configuration from a test."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

#: Variables that choose or reach a chat model; a test must never see the user's values.
MODEL_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
                   "ANTHROPIC_API_KEY", "OLLAMA_HOST", "KGAGENTS_NO_DOTENV")


def closed_port() -> int:
    """A loopback port that nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def isolate_model_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No KGAGENTS_* / provider variables, no ``.env``, no Ollama, no cached models, registered prices or
    models that answered before."""
    import kgagents.core.retry
    import kgagents.core.usage
    import kgagents.nodes.models

    for name in list(os.environ):
        if name.startswith("KGAGENTS_") or name in MODEL_VARIABLES:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KGAGENTS_NO_DOTENV", "1")
    monkeypatch.setenv("KGAGENTS_HOME", str(tmp_path / "kgagents-home"))  # never the user's data folder
    monkeypatch.setenv("KGAGENTS_STAGE_HEADER", "1")  # the fake servers' scripts recognise calls by their stage
    monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.chdir(tmp_path)  # no .env in the working directory either
    monkeypatch.setattr(kgagents.nodes.models, "_cache", {})
    monkeypatch.setattr(kgagents.nodes.models, "_ollama_found", {})
    monkeypatch.setattr(kgagents.core.usage, "_extra_prices", {})
    monkeypatch.setattr(kgagents.core.retry, "_answered", set())  # no model has answered in this test yet
    monkeypatch.setattr(kgagents.core.retry, "_streaks", {})  # nor failed
    monkeypatch.setattr(kgagents.core.retry, "_failed_calls", {})
    if hasattr(kgagents.core.usage, "_file_cache"):
        monkeypatch.setattr(kgagents.core.usage, "_file_cache", {})
