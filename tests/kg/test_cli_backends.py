"""The command line with database backends: the demo on each backend, the KG views of ``show``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kgagents.cli.kgview import kgot_graphs, render_html
from kgagents.tools.kg.base import snapshot_from_jsonl


def cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KGAGENTS_", "OPENAI_", "ANTHROPIC_", "NEO4J_", "FALKORDB_", "SPARQL_"))}
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
    assert "<svg" in page and "SortedArray" in page and "http" not in page.split("<body>")[1].split("<script")[0]
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


FAKE_DOM = r"""
function node(tag){ return {tag, children: [], attrs: {}, listeners: {}, textContent: '', innerHTML: '', value: '',
  classList: {toggle(){}, remove(){}}, clientWidth: 800, clientHeight: 500,
  appendChild(c){ this.children.push(c); return c; },
  setAttribute(k, v){ if (Number.isNaN(v)) throw new Error('NaN ' + k); this.attrs[k] = v; },
  addEventListener(e, f){ this.listeners[e] = f; }, getBoundingClientRect(){ return {left: 0, top: 0}; } }; }
const els = {'kg-data': node('script'), svg: node('svg'), details: node('aside'), which: node('select'),
  legend: node('span')};
els['kg-data'].textContent = require('fs').readFileSync(process.argv[2], 'utf8');
global.window = {addEventListener(){}, removeEventListener(){}};
global.document = {getElementById: id => els[id], createElementNS: (ns, t) => node(t), createElement: t => node(t),
  querySelectorAll: () => []};
eval(require('fs').readFileSync(process.argv[3], 'utf8'));
const circles = []; (function walk(n){ if (n.tag === 'circle') circles.push(n); n.children.forEach(walk); })(els.svg);
for (const c of circles) c.listeners.click();
console.log(JSON.stringify({circles: circles.length, options: els.which.children.length,
  details: els.details.innerHTML}));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run the page's script")
def test_the_page_script_lays_out_and_shows_nodes(tmp_path):
    kg = {"nodes": [{"id": f"n{i}", "labels": ["L"], "properties": {"i": i}} for i in range(6)],
          "relationships": [{"type": "NEXT", "source": f"n{i}", "target": f"n{i + 1}", "properties": {}}
                            for i in range(5)]}
    page = render_html([("one", kg), ("two", kg)])
    data = page.split('id="kg-data">')[1].split("</script>")[0]
    script = page.split("<script>")[1].split("</script>")[0]
    (tmp_path / "data.json").write_text(data)
    (tmp_path / "page.js").write_text(script)
    (tmp_path / "dom.js").write_text(FAKE_DOM)
    out = subprocess.run(["node", str(tmp_path / "dom.js"), str(tmp_path / "data.json"), str(tmp_path / "page.js")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["circles"] == 6 and result["options"] == 2 and "n5" in result["details"]


@pytest.mark.slow
def test_bolt_backend_without_a_uri_uses_the_embedded_server(request, monkeypatch):
    """Without NEO4J_URI the store starts (here: reuses) the process's embedded ArcadeDB Bolt server."""
    from kgagents.tools.kg import servers
    from kgagents.tools.kg.cypher_store import bolt_config

    server = request.getfixturevalue("arcadedb_server")
    monkeypatch.delenv("NEO4J_URI", raising=False)
    monkeypatch.setitem(servers._embedded, "arcadedb", server)
    config = bolt_config(None)
    assert config.uri == server.url and config.database == "kgagents"
