"""OpenAI SDK clients that send the SDK's own environment headers only to the server they belong to.

Given an explicit base URL and key, the OpenAI SDK still reads ``OPENAI_CUSTOM_HEADERS``, ``OPENAI_ORG_ID`` and
``OPENAI_PROJECT_ID`` (LangChain's ``ChatOpenAI`` also ``OPENAI_ORGANIZATION``) whenever a client is made, and adds
them to every request, ``Authorization`` included (:data:`kgagents.core.keys.OPENAI_SDK_VARIABLES`). They belong
with ``OPENAI_API_KEY``'s server. A client aimed anywhere else is built (or rebuilt, :func:`confine_openai_client`)
with each of them taken out through the SDK's own ``default_headers`` (its ``Omit`` marker) and with the
``Authorization`` kgagents chose; its headers are then read back (:func:`check_openai_client`), and a client that
would still send one of them is refused: another SDK version cannot send them silently.

This module imports the OpenAI SDK only when a client needs its headers confined.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgagents.core.config import ConfigurationError
from kgagents.core.keys import OPENAI, OPENAI_SDK_VARIABLES, say_once, sdk_headers_withheld

__all__ = ["check_openai_client", "confine_openai_client", "confined_headers", "sent_headers"]


def confined_headers(url: str, api_key: str, env: Mapping[str, str]) -> dict[str, Any] | None:
    """The ``default_headers`` an OpenAI SDK client for ``url`` is built with so that none of the SDK's
    environment headers goes there (``None`` when none has to be held back: ``url`` is their server, or none is
    set); said once."""
    withheld = sdk_headers_withheld(url, env)
    if not withheld:
        return None
    # the SDK's marker that takes a header out; the SDK is there whenever one of its clients is made
    from openai import Omit

    headers: dict[str, Any] = {name: Omit() for name in withheld if name.lower() != "authorization"}
    headers["Authorization"] = f"Bearer {api_key}"  # replaces a custom Authorization of the environment
    variables = ", ".join(name for name in OPENAI_SDK_VARIABLES if (env.get(name) or "").strip())
    say_once(f"requests to {url} go without the headers of {variables} ({', '.join(sorted(withheld))}): they go "
             f"only to {OPENAI.base(env)}")
    return headers


def sent_headers(client: Any) -> dict[str, str]:
    """The headers an OpenAI SDK client puts on every request (its key's and its defaults, by lower-case name),
    read back from its public ``auth_headers`` and ``default_headers``."""
    merged: dict[str, str] = {}
    for headers in (client.auth_headers, client.default_headers):
        for name, value in headers.items():
            if isinstance(value, str):
                merged[name.lower()] = value
            else:  # the SDK's Omit: taken out
                merged.pop(name.lower(), None)
    return merged


def check_openai_client(client: Any, url: str, api_key: str, env: Mapping[str, str]) -> None:
    """Raise :class:`ConfigurationError` when ``client`` (aimed at ``url``, with ``api_key``) would send a header
    of the SDK's environment that does not belong there, or another ``Authorization`` than its key."""
    withheld = sdk_headers_withheld(url, env)
    if not withheld:
        return
    sent = sent_headers(client)
    leaked = sorted(name for name in withheld if name.lower() != "authorization" and name.lower() in sent)
    if sent.get("authorization") != f"Bearer {api_key}":
        leaked.append("Authorization")
    if leaked:
        raise ConfigurationError(
            f"this openai SDK would send {', '.join(leaked)} from {', '.join(OPENAI_SDK_VARIABLES)} to {url}, "
            f"not {OPENAI.base(env)}'s server: unset those variables for this run")


def confine_openai_client(client: Any, url: str, api_key: str, env: Mapping[str, str]) -> Any:
    """``client`` (an OpenAI SDK client aimed at ``url`` with ``api_key``), or a copy of it that sends none of the
    SDK's environment headers when they do not belong at ``url`` (:func:`confined_headers`), checked
    (:func:`check_openai_client`)."""
    headers = confined_headers(url, api_key, env)
    if headers is not None:
        client = client.with_options(default_headers=headers)
    check_openai_client(client, url, api_key, env)
    return client
