"""Keys go only where they were configured to go: an API key to its base URL, a database's user and password to
its server, whatever names another address (a run's context, a Python caller, a graph's manifest).

Loopback listeners record what reaches them (:mod:`tests.fakes.recording_listener`); each test aims a request
at one of them from one path and checks that no key or password arrived, while the server the key belongs to
still gets it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
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
    same_postgres,
    same_server,
    server_of,
)
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.models import build_chat_model, resolve_model
from kgagents.nodes.runtime import work_dir_for
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.recording_listener import BoltRecorder, HttpRecorder, PostgresRecorder

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
        ask(resolve_model(KGoTContext(model="openai:gpt-4o-mini", base_url=f"{other.url}/v2"), "graph_executor"))
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
        ask(resolve_model(KGoTContext(model="openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1"), "tools"))
        assert "KGAGENTS_API_KEY goes only to KGAGENTS_BASE_URL, which is not set" in capsys.readouterr().err


def test_embeddings_elsewhere_get_no_openai_key(monkeypatch):
    from kgagents.tools.pgraph.embeddings import OpenAIEmbedder

    with HttpRecorder() as other:
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        embedder = OpenAIEmbedder("openai:text-embedding-3-small", base_url=f"{other.url}/v1", max_retries=0)
        with pytest.raises(Exception):  # noqa: B017 - the recorder refuses; what reached it matters
            embedder.encode(["a text"])
        assert other.requests and not other.saw(OPENAI_KEY)


GATEWAY = "gateway-credential-61b0"
GATEWAY_2 = "gateway-credential-2-c3d8"


def test_the_openai_sdks_own_headers_go_only_to_openai_api_keys_server(monkeypatch, capsys):
    """The OpenAI SDK adds ``OPENAI_CUSTOM_HEADERS`` (a gateway's ``Authorization`` included), ``OPENAI_ORG_ID``
    and ``OPENAI_PROJECT_ID`` to every request, whatever base URL and key it is given: a context's ``base_url``
    elsewhere, OpenAI embeddings elsewhere and the transcription client (the chat model's) get none of them."""
    from kgagents.tools.pgraph.embeddings import OpenAIEmbedder

    with HttpRecorder() as own, HttpRecorder() as other:
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{own.url}/v1")  # a gateway, which takes these headers
        monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", f"Authorization: Bearer {GATEWAY}\nX-Portkey-Api-Key: {GATEWAY_2}")
        monkeypatch.setenv("OPENAI_ORG_ID", "org-user-77")
        monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-user-78")
        model = resolve_model(KGoTContext(model="openai:gpt-4o-mini", base_url=f"{other.url}/v1"), "graph_executor")
        ask(model)
        with pytest.raises(Exception):  # noqa: B017 - the recorder answers 401
            asyncio.run(model.ainvoke("hello"))
        with pytest.raises(Exception):  # noqa: B017
            asyncio.run(model.root_async_client.audio.transcriptions.create(model="whisper-1", file=("a.mp3", b"x")))
        with pytest.raises(Exception):  # noqa: B017
            OpenAIEmbedder("openai:text-embedding-3-small", base_url=f"{other.url}/v1", max_retries=0).encode(["t"])
        assert len(other.requests) == 4
        assert not other.saw(GATEWAY) and not other.saw(GATEWAY_2) and not other.saw(OPENAI_KEY)
        assert not other.saw("org-user-77") and not other.saw("proj-user-78")
        assert {r.headers.get("authorization") for r in other.requests} == {"Bearer not-needed", "Bearer unset"}
        # their own server still gets them, as the SDK sends them there
        ask(resolve_model(KGoTContext(model="openai:gpt-4o-mini"), "graph_executor"))
        assert own.saw(GATEWAY_2) and own.saw("org-user-77") and own.saw("proj-user-78")
    err = capsys.readouterr().err
    assert (f"requests to {other.url}/v1 go without the headers of OPENAI_ORG_ID, OPENAI_PROJECT_ID, "
            "OPENAI_CUSTOM_HEADERS") in err


def test_the_ollama_key_goes_only_to_ollamas_cloud(monkeypatch, capsys):
    """Ollama's client sends ``OLLAMA_API_KEY`` to whatever ``OLLAMA_HOST`` names (a trusted folder's ``.env`` may
    set it): the key is bound to ``https://ollama.com``, which issues it."""
    from kgagents.nodes.models import ollama_authorization

    pytest.importorskip("langchain_ollama")
    with HttpRecorder() as other:
        monkeypatch.setenv("OLLAMA_API_KEY", "ollama-cloud-key-4e2a")
        monkeypatch.setenv("OLLAMA_HOST", other.url)
        model = build_chat_model("ollama:qwen2.5:7b")
        ask(model)
        with pytest.raises(Exception):  # noqa: B017 - the recorder answers 401
            asyncio.run(model.ainvoke("hello"))
        assert len(other.requests) == 2 and not other.saw("ollama-cloud-key-4e2a")
    assert f"requests to {other.url} go without a key (OLLAMA_API_KEY goes only to https://ollama.com)" in \
        capsys.readouterr().err
    assert ollama_authorization("https://ollama.com:443/") == {
        "client_kwargs": {"headers": {"Authorization": "Bearer ollama-cloud-key-4e2a"}}}


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


def test_an_arcadedb_http_address_elsewhere_gets_no_neo4j_password(monkeypatch, capsys):
    """``KGAGENTS_ARCADEDB_HTTP`` (a trusted folder's ``.env`` may set it) receives ``NEO4J_USER`` /
    ``NEO4J_PASSWORD`` as HTTP basic authentication once the Bolt server says it is ArcadeDB: only on
    ``NEO4J_URI``'s host."""
    from kgagents.tools.kg.cypher_store import _ArcadeDBAdmin, bolt_config

    with HttpRecorder() as other:
        monkeypatch.setenv("NEO4J_URI", "bolt://db.internal.example:7687")
        monkeypatch.setenv("NEO4J_USER", "root")
        monkeypatch.setenv("NEO4J_PASSWORD", PASSWORD)
        monkeypatch.setenv("KGAGENTS_ARCADEDB_HTTP", other.url)
        config = bolt_config()
        if config.admin_url:  # what BoltServer does once the Bolt server's agent says ArcadeDB
            with pytest.raises(Exception):  # noqa: B017 - the recorder answers 401, not JSON of databases
                _ArcadeDBAdmin(config.admin_url, config.user, config.password).create("kg-x")
        assert not other.saw(PASSWORD)
        assert config.admin_url is None and config.password == PASSWORD  # the Bolt server keeps its password
        assert f"KGAGENTS_ARCADEDB_HTTP ({other.url}) is not on the host of NEO4J_URI" in capsys.readouterr().err
        monkeypatch.setenv("KGAGENTS_ARCADEDB_HTTP", "http://DB.internal.example.:2480/")  # the same host
        assert bolt_config().admin_url == "http://DB.internal.example.:2480"


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
# PostgreSQL: libpq sends PGPASSWORD (or a ~/.pgpass line, a service file's password) to whatever server a
# connection string names, so only the user's own checkpointer is opened
# ----------------------------------------------------------------------------------------------------------
PGPASSWORD = "user-pg-password-5e1d"


def test_a_handed_over_run_registry_opens_no_postgres_server(monkeypatch, tmp_path, capsys):
    """``--runs-dir`` at a runs folder someone else made (an archive, a cloned repository's ``.kgagents/runs``)
    whose ``runs.sqlite`` records their PostgreSQL server for a thread."""
    from kgagents.core.runs import RunRegistry

    pytest.importorskip("psycopg")
    with PostgresRecorder() as theirs:
        runs = tmp_path / "their-runs"
        RunRegistry(runs).record("t-1", "zeroshot", "2 + 2?", {}, checkpointer=theirs.url)
        monkeypatch.setenv("PGPASSWORD", PGPASSWORD)  # the user's own database password
        script = tmp_path / "none.json"
        script.write_text(json.dumps({"name": "none", "steps": []}))
        for command in (["show", "t-1"], ["resume", "t-1"],
                        ["ask", "--workflow", "rag", "--kgot-thread", "t-1", "--model", f"scripted:{script}", "?"]):
            assert main(["--runs-dir", str(runs), *command]) in (1, 2), command
            err = capsys.readouterr().err
            assert not theirs.saw(PGPASSWORD), f"PGPASSWORD went to the server their runs.sqlite names ({command})"
            assert f"the PostgreSQL checkpointer {theirs.url} is not one you chose" in err, err
            assert f"--checkpointer {theirs.url}" in err  # how to open it, if it is the user's after all
        monkeypatch.setenv("KGAGENTS_CHECKPOINTER", theirs.url.replace("/runs", "/mine"))  # another database
        assert main(["--runs-dir", str(runs), "show", "t-1"]) == 2
        assert theirs.connections == 0
        # given on the command line, it is the user's choice: then libpq connects (and the recorder sees the login)
        assert main(["--runs-dir", str(runs), "show", "t-1", "--checkpointer", theirs.url]) == 2
        assert theirs.connections >= 1


def test_a_context_kgot_checkpointer_opens_no_postgres_server(monkeypatch):
    import asyncio

    from kgagents.core.checkpointer import CheckpointerRefused, name_checkpointer
    from kgagents.nodes.baselines import BaselineContext, kgot_checkpointer_for, read_kgot_tool_calls

    pytest.importorskip("psycopg")
    with PostgresRecorder() as theirs:
        monkeypatch.setenv("PGPASSWORD", PGPASSWORD)
        ctx = BaselineContext(kgot_checkpointer=theirs.url)  # e.g. from a resumed run's recorded context
        with pytest.raises(Exception) as refused:  # what reached the recorder is checked first
            asyncio.run(read_kgot_tool_calls("t-1", kgot_checkpointer_for(ctx, "t-1")))
        assert not theirs.saw(PGPASSWORD), "PGPASSWORD went to the context's kgot_checkpointer"
        assert theirs.connections == 0
        assert isinstance(refused.value, CheckpointerRefused) and "is not one you chose" in str(refused.value)
        name_checkpointer(theirs.url.replace("127.0.0.1", "127.0.0.1."))  # the user's (--set kgot_checkpointer=)
        with pytest.raises(ValueError, match="recorded"):
            asyncio.run(read_kgot_tool_calls("t-1", kgot_checkpointer_for(ctx, "t-1")))
        assert theirs.connections >= 1


@pytest.mark.parametrize(("url", "other"), [
    ("postgresql://me:secret@DB.example/runs", "postgres://me@db.example.:5432/runs"),
    ("postgresql://me@db.example/runs?sslmode=require", "postgresql://me@db.example/runs?sslmode=require&password=x"),
    ("postgresql://me@[::1]/runs", "postgresql://me@[0:0::1]:5432/runs"),
    ("postgresql://me@%2Fvar%2Frun%2Fpostgresql/runs", "postgresql://me@/runs?host=/var/run/postgresql"),
    ("postgresql:///runs?service=mine", "postgresql:///runs?service=mine"),
    ("postgresql://a,b:5433/runs", "postgresql://A,B:5433/runs"),
])
def test_the_same_postgres_connection(url, other):
    from psycopg.conninfo import conninfo_to_dict

    from kgagents.core.checkpointer import postgres_refusal

    assert same_postgres(conninfo_to_dict(url), conninfo_to_dict(other))
    assert postgres_refusal(other, [url]) is None and postgres_refusal(url, ["postgresql://x/y", other]) is None


@pytest.mark.parametrize(("url", "other"), [
    ("postgresql://me@db.example/runs", "postgresql://me@db.example/runs?host=evil.example"),
    ("postgresql://me@db.example/runs", "postgresql://me@db.example/runs?hostaddr=192.0.2.7"),
    ("postgresql://me@db.example/runs", "postgresql://me@db.example/runs?sslmode=disable"),
    ("postgresql://me@db.example/runs", "postgresql://me@db.example/runs?passfile=/tmp/theirs"),
    ("postgresql://me@db.example/runs", "postgresql://me@db.example:5433/runs"),
    ("postgresql://me@db.example/runs", "postgresql://me@db.example/other"),
    ("postgresql://me@db.example/runs", "postgresql://you@db.example/runs"),
    ("postgresql://me@db.example/runs", "postgresql://me@db.example,evil.example/runs"),
    ("postgresql://me@db.example/runs", "postgresql://me@db.example.evil.example/runs"),
    ("postgresql:///runs?service=mine", "postgresql://evil.example/runs?service=mine"),
    ("postgresql:///runs?service=mine", "postgresql:///runs?service=theirs"),
    ("postgresql://me@llm.mass.test/runs", "postgresql://me@llm.maß.test/runs"),
])
def test_other_postgres_connections(url, other):
    from psycopg.conninfo import conninfo_to_dict

    from kgagents.core.checkpointer import postgres_refusal

    assert not same_postgres(conninfo_to_dict(url), conninfo_to_dict(other))
    assert "is not one you chose" in (postgres_refusal(other, [url]) or "")
    assert "cannot read" in (postgres_refusal("postgresql://h/db?bogus=1", [url]) or "")


# ----------------------------------------------------------------------------------------------------------
# A Unicode look-alike of the configured host: IDNA 2003 (``ß`` -> ``ss``) against IDNA 2008 (``ß`` kept)
# ----------------------------------------------------------------------------------------------------------
CONFIGURED_HOST = "llm.mass.test"  # the user's server (class, pass, business, access, ...)
TWIN_HOST = "llm.maß.test"  # another name for the HTTP clients: llm.xn--ma-hia.test
TWIN_ACE = "llm.xn--ma-hia.test"


@pytest.fixture
def twin_resolves_to_loopback(monkeypatch):
    """Only the twin's ASCII name resolves (to loopback, where a recorder listens); the configured one does not."""
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name == TWIN_ACE:
            return real("127.0.0.1", *args, **kwargs)
        if name in ("127.0.0.1", "localhost"):
            return real(host, *args, **kwargs)
        raise socket.gaierror(socket.EAI_NONAME, f"not resolvable in this test: {name}")

    monkeypatch.setattr(socket, "getaddrinfo", resolve)


def test_the_eszett_twin_of_the_configured_host_gets_no_key_nor_password(monkeypatch, twin_resolves_to_loopback):
    from kgagents.tools.kg.sparql_store import database_for
    from kgagents.tools.pgraph.embeddings import OpenAIEmbedder

    with HttpRecorder() as twin:
        port = twin.url.rsplit(":", 1)[1]
        monkeypatch.setenv("KGAGENTS_BASE_URL", f"http://{CONFIGURED_HOST}:{port}/v1")
        monkeypatch.setenv("KGAGENTS_API_KEY", SECRET)
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://{CONFIGURED_HOST}:{port}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        monkeypatch.setenv("SPARQL_ENDPOINT", f"http://{CONFIGURED_HOST}:{port}/query")
        monkeypatch.setenv("SPARQL_USER", "me")
        monkeypatch.setenv("SPARQL_PASSWORD", PASSWORD)
        ask(build_chat_model("gpt-4o-mini", base_url=f"http://{TWIN_HOST}:{port}/v1"))
        embedder = OpenAIEmbedder("openai:text-embedding-3-small", base_url=f"http://{TWIN_HOST}:{port}/v1",
                                  max_retries=0)
        with pytest.raises(Exception):  # noqa: B017 - the recorder answers 401
            embedder.encode(["a text"])
        with pytest.raises(Exception):  # noqa: B017
            database_for(f"http://{TWIN_HOST}:{port}/query").graph_triples("urn:g")
        assert len(twin.requests) == 3, "every request reached the twin (llm.xn--ma-hia.test)"
        assert not twin.saw(SECRET) and not twin.saw(OPENAI_KEY) and not twin.saw(PASSWORD)


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
    ("https://llm.mass.test/v1", "https://llm.maß.test/v1"),  # IDNA 2003 says ss, the HTTP clients xn--ma-hia
    ("https://llm.xn--ma-hia.test/v1", "https://llm.maß.test/v1"),  # the socket module would resolve mass
    ("https://\u03c3.example", "https://\u03c2.example"),  # sigma, final sigma
])
def test_other_servers(url, other):
    assert not same_server(url, other) and not same_server(other, url)


def test_server_of_and_hosts():
    assert str(server_of("HTTPS://Api.OpenAI.com/v1")) == "https://api.openai.com:443"
    assert str(server_of("http://[::1]/x")) == "http://[::1]:80"
    assert server_of("ftp://h/x") == server_of("ftp://H/y") and server_of("ftp://h").port is None
    assert normal_host("0x7f.0.0.1") == "127.0.0.1" and normal_host("cafe.example") == "cafe.example"
    assert normal_host("") is None and normal_host("a..b") is None


def test_a_unicode_host_is_a_server_only_when_every_client_resolves_the_same_name():
    import httpx

    assert httpx.URL("https://llm.maß.test/").raw_host == b"llm.xn--ma-hia.test"  # what the HTTP clients resolve
    assert "llm.maß.test".encode("idna") == b"llm.mass.test"  # what the socket module (Bolt, Redis) resolves
    assert normal_host("llm.maß.test") is None and normal_host("\u03c2.example") is None
    assert normal_host("Bücher.Example.") == "xn--bcher-kva.example"  # every encoding agrees
    assert normal_host("\uff21\uff22\uff23.example") == "abc.example"  # full-width: httpx sends nothing, others agree
    assert normal_host("llm.xn--ma-hia.test") == "llm.xn--ma-hia.test"  # ASCII is taken as written


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
    work = work_dir_for(KGoTContext(), {"configurable": {"thread_id": "t-1"}})  # a run's work folder
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


def test_our_folders_are_tightened_and_someone_elses_refused(monkeypatch, tmp_path, capsys):
    from kgagents.core.private import OwnedByAnotherUser, belongs_to_another_user, private_dir, private_file
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
        os.chown(shared, NOBODY, NOBODY)
        with pytest.raises(OwnedByAnotherUser, match=f"{shared} belongs to another user"):
            private_dir(shared)
        assert stat.S_IMODE(shared.stat().st_mode) == 0o755
        private_dir(shared, tighten=False)  # a folder the user chose for more than kgagents: its files are private
        planted = shared / "checkpoints.sqlite"
        planted.touch(mode=0o666)
        os.chown(planted, NOBODY, NOBODY)
        with pytest.raises(OwnedByAnotherUser, match=f"{planted} belongs to another user"):
            private_file(planted)
    assert belongs_to_another_user(0, 1000) and belongs_to_another_user(1000, 0)
    assert not belongs_to_another_user(1000, 1000)


NOBODY = 65534


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give files to another user")
def test_a_runs_folder_of_another_user_gets_no_run(monkeypatch, tmp_path, capsys):
    """A runs folder in a shared place (``KGAGENTS_RUNS_DIR=/tmp/kgagents-runs``, a ``--runs-dir`` on a shared disk)
    that someone else made first, with a ``runs.sqlite`` and ``checkpoints.sqlite`` of theirs, mode 0666: the
    user's run (its question, what it read) is written into none of them."""
    question = "What is the secret project codename 7f3a?"
    shared = tmp_path / "shared-runs"
    shared.mkdir()
    shared.chmod(0o777)
    os.chown(shared, NOBODY, NOBODY)
    for name in ("runs.sqlite", "checkpoints.sqlite"):
        planted = shared / name
        planted.touch()
        planted.chmod(0o666)
        os.chown(planted, NOBODY, NOBODY)
    monkeypatch.setenv("KGAGENTS_RUNS_DIR", str(shared))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "z", "steps": [{"when": "", "content": "FINAL ANSWER: 4"}]}))
    code = main(["ask", "--workflow", "zeroshot", "--model", f"scripted:{script}", "--quiet", question])
    written = [p.name for p in shared.iterdir() if p.is_file() and question.encode() in p.read_bytes()]
    assert not written, f"the run went into {written} of another user's folder"
    assert code == 2 and f"{shared} belongs to another user (uid {NOBODY})" in capsys.readouterr().err
    # the folder given on the command line: the same
    code = main(["--runs-dir", str(shared), "ask", "--workflow", "zeroshot", "--model", f"scripted:{script}",
                 "--quiet", question])
    assert code == 2 and not any(question.encode() in p.read_bytes() for p in shared.iterdir() if p.is_file())
