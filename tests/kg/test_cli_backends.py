"""The command line with database backends: the demo on each backend, the KG views of ``show``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kgagents.cli.kgview import kgot_graphs, render_html
from kgagents.tools.kg.base import snapshot_from_jsonl


def cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KGAGENTS_", "OPENAI_", "ANTHROPIC_", "NEO4J_", "FALKORDB_", "SPARQL_"))}
    env["KGAGENTS_HOME"] = str(tmp_path / "kgagents-home")  # never the user's data folder
    env.update(KGAGENTS_NO_DOTENV="1", KGAGENTS_RUNS_DIR=str(tmp_path / "runs"), OLLAMA_HOST="http://127.0.0.1:9",
               KGAGENTS_ALLOW_WEAK_SANDBOX="1")
    return env


def kgagents(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kgagents.cli", *args], env=cli_env(tmp_path), cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["networkx", "falkordb", "sparql"])
def test_demo_prints_65_offline_and_show_writes_the_kg(tmp_path, backend):
    """The embedded defaults: FalkorDB from falkordblite, the in-memory pyoxigraph store."""
    out = kgagents(tmp_path, "--runs-dir", str(tmp_path / "runs"), "demo", "--backend", backend, "--quiet")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "65"
    thread = next(line.split()[1] for line in out.stderr.splitlines() if line.startswith("thread: "))

    shown = kgagents(tmp_path, "show", thread, "--kg")
    assert shown.returncode == 0, shown.stderr
    page = (tmp_path / shown.stdout.strip()).read_text()
    assert "Bokeh" in page and "SortedArray" in page  # the picture's library, inlined; the task KG's nodes
    assert not re.search(r"<script\b[^>]*\bsrc=", page)  # nothing loaded from the network
    raw = kgagents(tmp_path, "show", thread, "--kg", "--format", "json")
    assert raw.returncode == 0, raw.stderr
    snap = snapshot_from_jsonl(raw.stdout)
    assert sorted(n["id"] for n in snap["nodes"]) == ["array", "sorted_array"]
    first = kgagents(tmp_path, "show", thread, "--kg", "--format", "json", "--snapshot", "0")
    assert snapshot_from_jsonl(first.stdout) == snap
    missing = kgagents(tmp_path, "show", thread, "--kg", "--snapshot", "9")
    assert missing.returncode == 2 and "--snapshot takes 0..0" in missing.stderr


def test_the_view_lists_every_snapshot_and_escapes_content():
    kg = {"nodes": [{"id": "a</script><b>", "labels": ["X"], "properties": {"note": "<i>&"}}],
          "relationships": [{"type": "SELF", "source": "a</script><b>", "target": "a</script><b>", "properties": {}}]}
    state = {"question": "q", "kg": kg,
             "kg_writes": [{"iteration": 0, "tool_call_id": "c1", "snapshot": {"nodes": [], "relationships": []}},
                           {"iteration": 1, "tool_call_id": "c2", "snapshot": kg},
                           {"iteration": 1, "tool_call_id": "c3", "snapshot": None}]}
    graphs = kgot_graphs(state)
    assert [title for title, _ in graphs] == ["after write 0 (iteration 0, c1)", "after write 1 (iteration 1, c2)",
                                             "final knowledge graph"]
    page = render_html(graphs, title="t")
    assert "</script><b>" not in page.split('id="kg-data">')[1].split("</script>")[0]
    assert "&lt;i&gt;&amp;" in page
    fusion = {"results": [{"variant": "networkx:query", "final_answer": "65", "kg": kg}]}
    assert [t for t, _ in kgot_graphs(fusion)] == ["variant networkx:query (answer: 65)"]


def test_bolt_backend_without_a_uri_uses_the_embedded_server(request, monkeypatch):
    """Without NEO4J_URI the store starts (here: reuses) the process's embedded ArcadeDB Bolt server."""
    from kgagents.tools.kg import servers
    from kgagents.tools.kg.cypher_store import bolt_config

    server = request.getfixturevalue("arcadedb_server")
    monkeypatch.delenv("NEO4J_URI", raising=False)
    monkeypatch.setitem(servers._embedded, "arcadedb", server)
    config = bolt_config(None)
    assert config.uri == server.url and config.database == "kgagents"
