"""Review of issue 34: "The OpenAI and Anthropic clients are built with an explicit base URL and key, so the SDKs'
own environment lookups choose nothing" -- but they still choose what else goes with every request.

The OpenAI SDK adds ``OPENAI_CUSTOM_HEADERS`` (one ``Name: value`` a line, ``Authorization`` included: how
gateways such as Portkey, Helicone or an internal proxy take their credentials), ``OPENAI_ORG_ID`` and
``OPENAI_PROJECT_ID`` to every request, wherever the client points. A run's context ``base_url`` elsewhere (the
threat docs/security.md names: "a context with base_url pointing elsewhere ... to receive KGAGENTS_API_KEY as a
bearer token") gets them, while kgagents says "requests to ... go without a key". ``OPENAI_CUSTOM_HEADERS``'s
``Authorization`` even replaces the ``not-needed`` placeholder.

The Ollama client sends ``OLLAMA_API_KEY`` as a bearer token to whatever ``OLLAMA_HOST`` names (a variable a
trusted ``.env`` may set); no binding covers it.

These tests assert the issue's claim; they FAIL while the weakness is there.
"""

from __future__ import annotations

import asyncio

from kgagents.nodes.context import Context
from kgagents.nodes.models import build_chat_model, resolve_model
from tests.fakes.recording_listener import HttpRecorder

GATEWAY = "gateway-credential-61b0"
GATEWAY_2 = "gateway-credential-2-c3d8"


def test_openai_custom_headers_go_to_a_context_base_url_elsewhere(monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-user-1f")
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", f"Authorization: Bearer {GATEWAY}\nX-Portkey-Api-Key: {GATEWAY_2}")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-user-77")
    with HttpRecorder() as other:
        model = resolve_model(Context(model="openai:gpt-4o-mini", base_url=f"{other.url}/v1"), "graph_executor")
        for call in (lambda: model.invoke("hello"), lambda: asyncio.run(model.ainvoke("hello"))):
            try:
                call()
            except Exception:  # noqa: BLE001 - the recorder answers 401
                pass
        assert other.requests
        assert "go without a key" in capsys.readouterr().err  # what kgagents says
        leaked = [r.headers for r in other.requests if other.saw(GATEWAY) or other.saw(GATEWAY_2)]
        assert not leaked, f"the user's OPENAI_CUSTOM_HEADERS went to the context's base_url: {leaked[0]}"
        assert not any("openai-organization" in r.headers for r in other.requests)


def test_the_ollama_api_key_is_bound_to_no_server(monkeypatch):
    with HttpRecorder() as other:
        monkeypatch.setenv("OLLAMA_API_KEY", "ollama-cloud-key-4e2a")
        monkeypatch.setenv("OLLAMA_HOST", other.url)  # e.g. from a trusted folder's .env
        try:
            build_chat_model("ollama:qwen2.5:7b").invoke("hello")
        except Exception:  # noqa: BLE001
            pass
        assert other.requests
        assert not other.saw("ollama-cloud-key-4e2a"), "OLLAMA_API_KEY went to OLLAMA_HOST's server, unbound"
