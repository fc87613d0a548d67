"""Keys go only where they were configured to go: an API key to its base URL, a database's user and password to
its server, whatever names another address (a run's context, a Python caller, a graph's manifest).

Loopback listeners record what reaches them (:mod:`tests.fakes.recording_listener`); each test aims a request
at one of them from one path and checks that no key or password arrived, while the server the key belongs to
still gets it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from kgagents.cli import main
from kgagents.core.keys import (
    COMPATIBLE,
    OPENAI,
    OPENAI_PROTOCOL,
    credentials_go,
    key_for,
    normal_host,
    same_server,
    server_of,
)
from kgagents.nodes.context import Context
from kgagents.nodes.models import build_chat_model, resolve_model
from kgagents.nodes.runtime import work_dir_for
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.recording_listener import BoltRecorder, HttpRecorder

SECRET = "kgagents-api-key-5b0e"
OPENAI_KEY = "sk-openai-key-19aa"
PASSWORD = "db-password-e41c"


# ----------------------------------------------------------------------------------------------------------
# Model keys
# ----------------------------------------------------------------------------------------------------------
def ask(model) -> None:
    try:
        model.invoke("hello")
    except Exception:  # noqa: BLE001 - the recorder answers 401: only what reached it matters
        pass


def test_a_base_url_elsewhere_gets_no_key_from_any_path(monkeypatch, capsys):
    with FakeOpenAIServer(api_key=SECRET) as own, HttpRecorder() as other:
        own_url = own.base_url
        own.reply("from the configured server")
        monkeypatch.setenv("KGAGENTS_BASE_URL", own.base_url)
        monkeypatch.setenv("KGAGENTS_API_KEY", SECRET)
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        # the configured server gets its key (spelled differently: the same scheme, host and port)
        model = build_chat_model("gpt-4o-mini", base_url=own.base_url.replace("http://", "HTTP://") + "/")
        assert model.invoke("hello").content == "from the configured server"
        # a Python caller's base_url and a run's context base_url elsewhere: no key at all
        ask(build_chat_model("gpt-4o-mini", base_url=f"{other.url}/v1"))
        ask(resolve_model(Context(model="openai:gpt-4o-mini", base_url=f"{other.url}/v2"), "graph_executor"))
        # a prefix of the configured URL is not the configured server
        ask(build_chat_model("gpt-4o-mini", base_url=f"{own.base_url}.{other.url.removeprefix('http://')}"))
        assert len(other.requests) >= 2
        assert not other.saw(SECRET) and not other.saw(OPENAI_KEY)
        assert {r.headers.get("authorization") for r in other.requests} == {"Bearer not-needed"}
    err = capsys.readouterr().err
    assert f"requests to {other.url}/v1 go without a key (KGAGENTS_API_KEY goes only to {own_url}" in err


def test_openai_key_goes_to_openai_base_url_only_and_the_start_line_says_where(monkeypatch, capsys, tmp_path):
    script = tmp_path / "none.json"
    script.write_text(json.dumps({"name": "none", "steps": []}))
    with HttpRecorder() as other:
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{other.url}/v1")
        main(["ask", "--workflow", "zeroshot", "--model", "openai:gpt-4o-mini", "--quiet", "What is 2 + 2?"])
        err = capsys.readouterr().err
        # the start line names the endpoint the client really calls (read back from the client)
        assert f"models: gpt-4o-mini at {other.url}/v1 (every role)" in err
        assert other.requests and other.saw(OPENAI_KEY)  # OPENAI_BASE_URL is where the user put the key
        other.requests.clear()
        monkeypatch.setenv("KGAGENTS_API_KEY", SECRET)  # bound to KGAGENTS_BASE_URL, which is not set
        ask(resolve_model(Context(model="openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1"), "tools"))
        assert "KGAGENTS_API_KEY goes only to KGAGENTS_BASE_URL, which is not set" in capsys.readouterr().err


def test_embeddings_elsewhere_get_no_openai_key(monkeypatch):
    from kgagents.tools.pgraph.embeddings import OpenAIEmbedder

    with HttpRecorder() as other:
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        embedder = OpenAIEmbedder("openai:text-embedding-3-small", base_url=f"{other.url}/v1", max_retries=0)
        with pytest.raises(Exception):  # noqa: B017 - the recorder refuses; what reached it matters
            embedder.encode(["a text"])
        assert other.requests and not other.saw(OPENAI_KEY)


# ----------------------------------------------------------------------------------------------------------
# Database credentials
# ----------------------------------------------------------------------------------------------------------
def test_a_kg_url_elsewhere_gets_no_neo4j_password(monkeypatch, tmp_path):
    from kgagents.tools.kg.stores import open_store
    from kgagents.tools.sandbox import SandboxLimits

    with BoltRecorder() as own, BoltRecorder() as other:
        monkeypatch.setenv("NEO4J_URI", own.url)
        monkeypatch.setenv("NEO4J_USER", "neo4j")
        monkeypatch.setenv("NEO4J_PASSWORD", PASSWORD)
        for url in (other.url, other.url.replace("bolt://", "neo4j://"), None):
            with pytest.raises(Exception):  # noqa: B017 - the recorders answer no Bolt
                open_store("neo4j", snapshot=None, work_dir=tmp_path, thread_id="t", limits=SandboxLimits(),
                           url=url)
        assert other.connections >= 1 and not other.saw(PASSWORD)
        assert own.saw(PASSWORD)  # NEO4J_URI's own server still gets them


def test_a_graph_manifest_naming_another_bolt_server_gets_no_password(monkeypatch, tmp_path, capsys):
    """A graph folder someone hands you (``--graph ./their-graph``) names its own database server."""
    with BoltRecorder() as other:
        monkeypatch.setenv("NEO4J_URI", "bolt://127.0.0.1:1")
        monkeypatch.setenv("NEO4J_USER", "neo4j")
        monkeypatch.setenv("NEO4J_PASSWORD", PASSWORD)
        graph = tmp_path / "their-graph"
        graph.mkdir()
        (graph / "manifest.json").write_text(json.dumps({
            "name": "people", "backend": "neo4j", "format_version": 1, "fingerprint": "0123456789abcdef",
            "namespace": "KGStatic_people_0123", "database": {"url": other.url, "embedded": False},
            "relations": ["knows"], "counts": {"nodes": 2, "edges": 1}}))
        script = tmp_path / "none.json"
        script.write_text(json.dumps({"name": "none", "steps": []}))
        main(["ask", "--workflow", "ark", "--graph", str(graph), "--model", f"scripted:{script}", "--quiet",
              "Does Alice know Bob?"])
        assert other.connections >= 1 and not other.saw(PASSWORD)
        assert f"{other.url} is not NEO4J_URI's server" in capsys.readouterr().err


def test_graph_info_on_a_graph_folder_sends_no_password_to_the_server_its_manifest_names(monkeypatch, tmp_path):
    """``kgagents graph info PATH`` on a built graph someone shares opens its database-backed import at the
    manifest's ``database.url``: that server is not ``NEO4J_URI``'s, so no ``NEO4J_USER`` / ``NEO4J_PASSWORD``."""
    with BoltRecorder() as other:
        monkeypatch.setenv("NEO4J_URI", "bolt://127.0.0.1:1")
        monkeypatch.setenv("NEO4J_USER", "neo4j")
        monkeypatch.setenv("NEO4J_PASSWORD", PASSWORD)
        folder = tmp_path / "shared-graph"
        folder.mkdir()
        (folder / "manifest.json").write_text(json.dumps({
            "format_version": 1, "backend": "neo4j", "name": "shared", "namespace": "KGStatic_shared",
            "fingerprint": "f" * 16, "relations": [], "counts": {},
            "database": {"url": other.url, "embedded": False, "database": None}}))
        main(["graph", "info", str(folder)])
        assert other.connections >= 1 and not other.saw(PASSWORD)


def test_a_kg_url_elsewhere_gets_no_sparql_password_nor_the_users_update_endpoint(monkeypatch):
    from kgagents.tools.kg.sparql_store import database_for

    with HttpRecorder() as own_query, HttpRecorder() as own_update, HttpRecorder() as other:
        monkeypatch.setenv("SPARQL_ENDPOINT", f"{own_query.url}/query")
        monkeypatch.setenv("SPARQL_UPDATE_ENDPOINT", f"{own_update.url}/update")
        monkeypatch.setenv("SPARQL_USER", "me")
        monkeypatch.setenv("SPARQL_PASSWORD", PASSWORD)
        foreign = database_for(f"{other.url}/query")
        for call in (lambda: foreign.graph_triples("urn:g"), lambda: foreign.replace_graph("urn:g", [])):
            with pytest.raises(Exception):  # noqa: B017 - the recorder answers 401
                call()
        assert not other.saw(PASSWORD) and len(other.requests) == 2
        assert not own_update.requests  # the foreign graph's update does not go to the user's endpoint
        own = database_for()
        for call in (lambda: own.graph_triples("urn:g"), lambda: own.replace_graph("urn:g", [])):
            with pytest.raises(Exception):  # noqa: B017
                call()
        assert own_query.saw(PASSWORD) and own_update.saw(PASSWORD)


# ----------------------------------------------------------------------------------------------------------
# The decisions, unit by unit
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("url", "other"), [
    ("https://api.openai.com/v1", "HTTPS://API.OpenAI.com:443/other"),
    ("https://api.openai.com/v1", "https://api.openai.com./v1"),
    ("https://api.openai.com/v1", "https://user:pass@api.openai.com/v1"),
    ("http://127.0.0.1:8000/v1", "http://2130706433:8000"),
    ("http://127.0.0.1:8000/v1", "http://127.1:8000"),
    ("http://[::1]:8000", "http://[0:0::1]:8000/v1"),
    ("bolt://db.example:7687", "neo4j://db.example"),
    ("bolt+s://db.example", "neo4j+s://db.example:7687"),
    ("redis://h:6379", "falkor://h"),
    ("http://bücher.example", "http://xn--bcher-kva.example"),
])
def test_the_same_server_in_other_spellings(url, other):
    assert same_server(url, other) and same_server(other, url)


@pytest.mark.parametrize(("url", "other"), [
    ("https://api.openai.com/v1", "https://api.openai.com.evil.example/v1"),
    ("https://api.openai.com/v1", "https://api.openai.com@evil.example/v1"),
    ("https://api.openai.com/v1", "https://evil.example/api.openai.com/v1"),
    ("https://api.openai.com/v1", "http://api.openai.com/v1"),
    ("https://api.openai.com/v1", "https://api.openai.com:8443/v1"),
    ("http://127.0.0.1:8000", "http://localhost:8000"),
    ("http://127.0.0.1:8000", "http://127.0.0.2:8000"),
    ("bolt://db.example", "bolt+s://db.example"),
    ("bolt://db.example", "http://db.example:7687"),
    ("http://h:80", "http://h:notaport"),
    ("http://h", "h"),
    ("http://h", ""),
    ("http://h", None),
    (None, None),
    ("http://", "http://"),
])
def test_other_servers(url, other):
    assert not same_server(url, other) and not same_server(other, url)


def test_server_of_and_hosts():
    assert str(server_of("HTTPS://Api.OpenAI.com/v1")) == "https://api.openai.com:443"
    assert str(server_of("http://[::1]/x")) == "http://[::1]:80"
    assert server_of("ftp://h/x") == server_of("ftp://H/y") and server_of("ftp://h").port is None
    assert normal_host("0x7f.0.0.1") == "127.0.0.1" and normal_host("cafe.example") == "cafe.example"
    assert normal_host("") is None and normal_host("a..b") is None


def test_which_key_goes_where():
    env = {"KGAGENTS_API_KEY": "k", "KGAGENTS_BASE_URL": "http://10.0.0.5:8000/v1", "OPENAI_API_KEY": "o"}
    assert key_for("http://10.0.0.5:8000/other", OPENAI_PROTOCOL, env) == ("KGAGENTS_API_KEY", "k")
    assert key_for("https://api.openai.com/v1", OPENAI_PROTOCOL, env) == ("OPENAI_API_KEY", "o")
    assert key_for("http://10.0.0.6:8000/v1", OPENAI_PROTOCOL, env) is None
    assert key_for("https://api.openai.com/v1", OPENAI_PROTOCOL, {**env, "OPENAI_BASE_URL": "http://h/v1"}) is None
    assert key_for("http://h/v1", (OPENAI,), {**env, "OPENAI_API_BASE": "http://h/v1"}) == ("OPENAI_API_KEY", "o")
    assert key_for("http://10.0.0.5:8000", (COMPATIBLE,), {"KGAGENTS_BASE_URL": "http://10.0.0.5:8000"}) is None
    assert key_for("anything", (COMPATIBLE,), {"KGAGENTS_API_KEY": "k"}) is None  # bound to nothing
    assert credentials_go(None, "bolt://h") and credentials_go("", None) and credentials_go("neo4j://h", "bolt://h")
    assert not credentials_go("bolt://other", "bolt://h") and not credentials_go("bolt://h", None)


# ----------------------------------------------------------------------------------------------------------
# Private data folders
# ----------------------------------------------------------------------------------------------------------
def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]
            if not p.is_symlink()}


def test_data_folders_are_private(monkeypatch, tmp_path, capsys):
    home = tmp_path / "home"
    monkeypatch.setenv("KGAGENTS_HOME", str(home))
    for name in ("KGAGENTS_RUNS_DIR", "KGAGENTS_GRAPHS_DIR"):
        monkeypatch.delenv(name)
    source = tmp_path / "kg.tsv"
    source.write_text("Alice\tknows\tBob\n", encoding="utf-8")
    assert main(["graph", "import", str(source), "--name", "people"]) == 0
    work = work_dir_for(Context(), {"configurable": {"thread_id": "t-1"}})  # a run's work folder
    assert work == (home / "runs" / "work" / "t-1").resolve()
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "z", "steps": [{"when": "", "content": "FINAL ANSWER: 4"}]}))
    main(["ask", "--workflow", "zeroshot", "--model", f"scripted:{script}", "--quiet", "--record", "2 + 2?"])
    found = modes(home)
    for path in (".", "runs", "graphs", "runs/work", "runs/work/t-1", "runs/recordings"):
        assert found[path] == 0o700, (path, oct(found[path]))
    for path, mode in found.items():
        if path.endswith((".sqlite", ".sqlite-wal", ".sqlite-shm")):
            assert mode == 0o600, (path, oct(mode))
    assert {"runs/runs.sqlite", "runs/checkpoints.sqlite"} <= set(found)
    assert any(p.startswith("runs/recordings/") and p.endswith(".sqlite") for p in found)
    assert "graphs/people/manifest.json" in found  # a graph's build: inside the private graphs folder


def test_our_folders_are_tightened_and_someone_elses_left_with_a_warning(monkeypatch, tmp_path, capsys):
    from kgagents.core.private import private_dir
    from kgagents.core.runs import RunRegistry

    home = tmp_path / "home"
    (home / "runs").mkdir(parents=True, mode=0o755)
    home.chmod(0o755)
    (home / "runs" / "runs.sqlite").touch(mode=0o644)
    monkeypatch.setenv("KGAGENTS_HOME", str(home))
    RunRegistry(home / "runs")
    assert stat.S_IMODE(home.stat().st_mode) == 0o700 and stat.S_IMODE((home / "runs").stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "runs" / "runs.sqlite").stat().st_mode) == 0o600
    assert f"made {home / 'runs'} private (mode 755 -> 700)" in capsys.readouterr().err
    results = tmp_path / "results"  # a folder the user chose for more than kgagents: created private, kept as is
    results.mkdir(mode=0o755)
    private_dir(results, tighten=False)
    assert stat.S_IMODE(results.stat().st_mode) == 0o755
    if os.getuid() == 0:  # only root can give a folder to another user here
        shared = tmp_path / "shared"
        shared.mkdir(mode=0o755)
        os.chown(shared, 65534, 65534)
        private_dir(shared)
        assert stat.S_IMODE(shared.stat().st_mode) == 0o755
        assert f"{shared} belongs to another user" in capsys.readouterr().err
