"""Review of issue 34 (keys bound to their server): an IDNA deviation character makes another host "the same
server".

``kgagents.core.keys.normal_host`` puts a Unicode host in "its IDNA form" with Python's ``idna`` codec, which is
IDNA 2003: ``ß`` becomes ``ss`` (and ``ς`` becomes ``σ``). The HTTP clients that really connect (httpx / httpx2
under the OpenAI SDK and the SPARQL store, yarl under aiohttp) use IDNA 2008 / UTS 46 non-transitional, where
``ß`` is a letter of its own: ``llm.maß.test`` is ``llm.xn--ma-hia.test``, another name (another registrant) than
``llm.mass.test``. So a context ``base_url`` (or a ``kg_url``) naming the ß-twin of the configured host passes
``same_server`` and the key goes to the twin.

Name resolution is faked so that the twin resolves to a loopback recorder and the configured name to nothing.
These tests assert the issue's claim; they FAIL while the weakness is there.
"""

from __future__ import annotations

import socket

import pytest

from kgagents.core.keys import same_server
from tests.fakes.recording_listener import HttpRecorder

SECRET = "compatible-key-7a51"
PASSWORD = "sparql-password-90c2"
CONFIGURED = "llm.mass.test"   # the user's server (a name with "ss": class, pass, business, access, ...)
TWIN = "llm.maß.test"          # the attacker's: IDNA 2008 xn--ma-hia
TWIN_ACE = "llm.xn--ma-hia.test"


@pytest.fixture
def resolver(monkeypatch):
    """Only the twin's ACE name resolves (to loopback, where the recorder listens)."""
    real = socket.getaddrinfo

    def fake(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name == TWIN_ACE:
            return real("127.0.0.1", *args, **kwargs)
        if name in ("127.0.0.1", "localhost"):
            return real(host, *args, **kwargs)
        raise socket.gaierror(socket.EAI_NONAME, f"not resolvable in this test: {name}")

    monkeypatch.setattr(socket, "getaddrinfo", fake)


def test_normal_host_is_ascii_compatible_with_what_clients_connect_to():
    import httpx

    assert httpx.URL(f"https://{TWIN}/").raw_host.decode() == TWIN_ACE  # what the client resolves
    # the claim: the same server only when the client would reach the same name
    assert not same_server(f"https://{CONFIGURED}/v1", f"https://{TWIN}/v1")


def test_a_context_base_url_on_the_ss_twin_gets_the_compatible_key(monkeypatch, resolver):
    from kgagents.nodes.models import build_chat_model

    with HttpRecorder() as twin:
        port = twin.url.rsplit(":", 1)[1]
        monkeypatch.setenv("KGAGENTS_BASE_URL", f"http://{CONFIGURED}:{port}/v1")
        monkeypatch.setenv("KGAGENTS_API_KEY", SECRET)
        model = build_chat_model("gpt-4o-mini", base_url=f"http://{TWIN}:{port}/v1")
        try:
            model.invoke("hello")
        except Exception:  # noqa: BLE001 - the recorder answers 401
            pass
        assert twin.requests, "the request did not reach the twin at all"
        assert not twin.saw(SECRET), "KGAGENTS_API_KEY went to llm.xn--ma-hia.test, not KGAGENTS_BASE_URL's host"


def test_a_kg_url_on_the_ss_twin_gets_the_sparql_password(monkeypatch, resolver):
    from kgagents.tools.kg.sparql_store import database_for

    with HttpRecorder() as twin:
        port = twin.url.rsplit(":", 1)[1]
        monkeypatch.setenv("SPARQL_ENDPOINT", f"http://{CONFIGURED}:{port}/query")
        monkeypatch.setenv("SPARQL_USER", "me")
        monkeypatch.setenv("SPARQL_PASSWORD", PASSWORD)
        foreign = database_for(f"http://{TWIN}:{port}/query")
        with pytest.raises(Exception):  # noqa: B017 - the recorder answers 401
            foreign.graph_triples("urn:g")
        assert twin.requests
        assert not twin.saw(PASSWORD), "SPARQL_PASSWORD went to llm.xn--ma-hia.test"


def test_openai_embeddings_on_the_ss_twin_get_the_key(monkeypatch, resolver):
    from kgagents.tools.pgraph.embeddings import OpenAIEmbedder

    with HttpRecorder() as twin:
        port = twin.url.rsplit(":", 1)[1]
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://{CONFIGURED}:{port}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        embedder = OpenAIEmbedder("openai:text-embedding-3-small", base_url=f"http://{TWIN}:{port}/v1",
                                  max_retries=0)
        with pytest.raises(Exception):  # noqa: B017
            embedder.encode(["a text"])
        assert twin.requests
        assert not twin.saw(SECRET), "OPENAI_API_KEY went to llm.xn--ma-hia.test"
