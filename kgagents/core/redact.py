"""No secrets in what kgagents writes for others to read: credentials taken out of URLs and secret-named fields.

Recordings, bundles, results manifests and the run registry keep URLs -- a ``--checkpointer
postgresql://user:password@host/db``, a ``kg_url`` of ``bolt://neo4j:secret@host``, a ``base_url`` of
``https://user:token@host/v1`` or ``https://apim.example.net/openai/v1?subscription-key=...`` -- and a key can sit
in any part of one. So a URL keeps its scheme, host, port and path, never its user part (``user:password@``, or
a token in the user's place), and of its query only the parameters known to be harmless
(:data:`HARMLESS_PARAMETERS`: ``sslmode``, ``api-version``, ...): every other value is replaced by
:data:`REMOVED`, whatever the parameter is called (``?code=`` of Azure Functions, ``?subscription-key=`` of Azure
API Management, ``?auth_key=``, ``?sig=``: no list of secret names is complete). Outside URLs, a ``name=value``
after ``?``, ``&`` or ``;`` whose name says secret (``password``, ``token``, ``api_key``, ...) loses its value too.
A mapping's entry whose key names a secret (``api_key``, ``password``, ``token``, ...) is left out.

These are pure functions over text and JSON-like values: what they cannot recognise as a URL or a secret's
name they leave as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote

__all__ = ["HARMLESS_PARAMETERS", "MIN_SECRET_LENGTH", "REMOVED", "configured_secrets", "is_secret_name", "scrub",
           "scrub_text", "without_credentials", "without_secrets"]

#: A URL's user part: after ``scheme://``, up to the last ``@`` before the host's end (a password may hold an
#: ``@`` or ``:``, never an unescaped ``/``, ``?``, ``#`` or white space).
_USER_PART = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@]*(?:@[^/?#\s@]*)*@")
#: A URL in free text, up to white space, a quote, an angle bracket or a backslash (text serialised as JSON).
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s\"'<>\\`]*")
#: Outside URLs: a query-like parameter that names a secret, with its value.
_SECRET_PARAMETER = re.compile(
    r"(?i)([?&;])((?:[a-z0-9_.-]*(?:password|passwd|secret|token|api[_-]?key|apikey|access[_-]?key|credential)"
    r"[a-z0-9_.-]*|pwd|key|sig|signature|auth|code|[a-z0-9_.-]*[_-]key))=[^&;#\s]*")
_SECRET_NAME = re.compile(
    r"(?i)^(?:.*[_-])?(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|credentials?)$")
#: What stands for a removed query value.
REMOVED = "REMOVED"
#: Query parameters of the URLs kgagents keeps whose values are settings, never secrets (PostgreSQL's connection
#: settings, Azure OpenAI's API version, a SPARQL endpoint's graphs); every other parameter's value is removed.
HARMLESS_PARAMETERS = frozenset({
    "sslmode", "gssencmode", "channel_binding", "connect_timeout", "application_name", "target_session_attrs",
    "load_balance_hosts", "api-version", "api_version", "default-graph-uri", "named-graph-uri", "timeout",
})


def is_secret_name(name: str) -> bool:
    """Whether a field or parameter called ``name`` holds a secret (``api_key``, ``NEO4J_PASSWORD``, ``token``,
    ``client_secret``, ...)."""
    return bool(_SECRET_NAME.match(name))


def _harmless(parameter: str) -> bool:
    return unquote(parameter).strip().lower() in HARMLESS_PARAMETERS


def _query_without_values(query: str) -> str:
    """A URL's query with the value of every parameter but the harmless ones replaced by :data:`REMOVED` (a
    parameter without a value, which may be a key itself, becomes :data:`REMOVED`)."""
    kept = []
    for part in re.split(r"([&;])", query):
        if part in ("&", ";", ""):
            kept.append(part)
            continue
        name, equals, _ = part.partition("=")
        if not equals:
            kept.append(part if _harmless(name) else REMOVED)
        else:
            kept.append(part if _harmless(name) else f"{name}={REMOVED}")
    return "".join(kept)


def _url_without_query_values(match: re.Match[str]) -> str:
    url = match.group(0)
    head, question, rest = url.partition("?")
    if not question:
        head, hash_mark, fragment = url.partition("#")
        return f"{head}#{_query_without_values(fragment)}" if "=" in fragment else url
    query, hash_mark, fragment = rest.partition("#")
    if "=" in fragment:  # ``#access_token=...``: a fragment of parameters is read as a query
        fragment = _query_without_values(fragment)
    return f"{head}?{_query_without_values(query)}{hash_mark}{fragment}"


def without_credentials(url: str) -> str:
    """``url`` without its user part and with the values of its query's parameters removed (but the harmless
    ones: :data:`HARMLESS_PARAMETERS`)."""
    return scrub_text(url)


def scrub_text(text: str) -> str:
    """``text`` with every URL in it stripped of its user part and of its query's values (but the harmless ones),
    and secret-named parameters outside URLs without their values (for free text: a command line, an error
    message, a serialised request)."""
    text = _USER_PART.sub(r"\1", text)
    text = _URL.sub(_url_without_query_values, text)
    return _SECRET_PARAMETER.sub(rf"\1\2={REMOVED}", text)


def scrub(value: Any) -> Any:
    """A JSON-like ``value`` (mappings, lists, strings, numbers) with :func:`scrub_text` applied to every string
    and every mapping entry whose key names a secret (:func:`is_secret_name`) left out."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {key: scrub(item) for key, item in value.items() if not (isinstance(key, str) and is_secret_name(key))}
    if isinstance(value, (list, tuple)):
        return [scrub(item) for item in value]
    return value


#: Values shorter than this are never masked as secrets: a placeholder key (``x``, ``none``) would otherwise mask
#: every occurrence of a common word. Real keys and passwords are longer.
MIN_SECRET_LENGTH = 8


def configured_secrets(env: Mapping[str, str]) -> set[str]:
    """The values of the variables of ``env`` whose names say secret (:func:`is_secret_name`:
    ``KGAGENTS_API_KEY``, ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``NEO4J_PASSWORD``, ...)."""
    return {value.strip() for name, value in env.items() if is_secret_name(name) and value and value.strip()}


def without_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each of ``secrets`` (as it is, and URL-quoted) replaced by
    :data:`REMOVED`, longest first; values shorter than :data:`MIN_SECRET_LENGTH` are left alone. For text a
    server may have echoed a key into (an error message), before it is shown or kept."""
    for secret in sorted({s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH},
                         key=len, reverse=True):
        for form in dict.fromkeys((secret, quote(secret, safe=""))):
            text = text.replace(form, REMOVED)
    return text
