"""Which model a chat-model object is and where it sends its requests: for messages that name both, and for
the rule that a model which never answered in this process is not retried when it cannot be reached
(:func:`kgagents.core.retry.retry_model_call`).

This module is a leaf: it imports none of ours.
"""

from __future__ import annotations

from typing import Any

from kgagents.core.redact import without_credentials

#: Where each provider's chat model sends its requests when it names no URL of its own.
DEFAULT_ENDPOINTS = {"ChatOpenAI": "https://api.openai.com/v1", "ChatAnthropic": "https://api.anthropic.com",
                     "ChatOllama": "http://127.0.0.1:11434"}


#: The attributes of LangChain's chat models that hold their SDK client (the async one first: runs call it).
CLIENT_ATTRIBUTES = ("root_async_client", "root_client", "_async_client", "_client")


def client_endpoint(model: Any) -> str | None:
    """The base URL a chat model's SDK client really sends to, read back from the client (``ChatOpenAI``'s
    ``root_async_client``, ``ChatAnthropic``'s and ``ChatOllama``'s ``_client``); ``None`` without one."""
    for attr in CLIENT_ATTRIBUTES:
        try:
            client = getattr(model, attr, None)
        except Exception:  # noqa: BLE001 - a client that cannot be built here has no endpoint to report
            continue
        for holder in (client, getattr(client, "_client", None)):
            base = getattr(holder, "base_url", None)
            if isinstance(base, str) or type(base).__name__ == "URL":
                text = str(base).rstrip("/")
                if "://" in text:
                    return text
    return None


def model_endpoint(model: Any) -> str | None:
    """The URL a chat model sends its requests to, as its SDK client has it (:func:`client_endpoint`), else as
    the model's settings say (None for an in-process model, such as the scripted one)."""
    endpoint = client_endpoint(model)
    if endpoint:
        return endpoint
    for attr in ("openai_api_base", "anthropic_api_url", "base_url"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    for cls in type(model).__mro__:
        if cls.__name__ in DEFAULT_ENDPOINTS:
            return DEFAULT_ENDPOINTS[cls.__name__]
    return None


def model_key(model: Any) -> str:
    """The model and its endpoint, as one string (what :func:`kgagents.core.retry.retry_model_call` remembers)."""
    return f"{type(model).__name__} {model_label(model)} {model_endpoint(model) or ''}".strip()


def describe_model(model: Any) -> str:
    """The model's name and where it is, for people: ``gpt-4o-mini at http://127.0.0.1:8000/v1``; a URL's user
    part and its query's values (a key passed as ``?api-key=``) are left out: this text goes to the terminal, the
    logs, the run's state and an evaluation's results."""
    endpoint = model_endpoint(model)
    return f"{model_label(model)} at {without_credentials(endpoint)}" if endpoint else model_label(model)


def model_label(model: Any) -> str:
    """A readable model name (usage accounting, messages)."""
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__
