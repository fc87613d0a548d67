"""No secrets in what kgagents writes for others to read: credentials taken out of URLs and secret-named fields.

Recordings, bundles and results manifests travel (they are what a user shares); the URLs they record — a
``--checkpointer postgresql://user:password@host/db``, a ``kg_url`` of ``bolt://neo4j:secret@host``, a
``base_url`` of ``https://user:token@host/v1`` — keep their scheme, host, port and path, never their user part
(``user:password@``, or a token in the user's place) nor a query parameter that names a secret
(``?password=...``, ``?api_key=...``, ``?token=...``). A mapping's entry whose key names a secret (``api_key``,
``password``, ``token``, ...) is left out.

These are pure functions over text and JSON-like values: what they cannot recognise as a URL or a secret's
name they leave as it is.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REMOVED", "is_secret_name", "scrub", "scrub_text", "without_credentials"]

#: A URL's user part: after ``scheme://``, up to the last ``@`` before the host's end (a password may hold an
#: ``@`` or ``:``, never an unescaped ``/``, ``?``, ``#`` or white space).
_USER_PART = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@]*(?:@[^/?#\s@]*)*@")
#: A query parameter that names a secret, with its value.
_SECRET_PARAMETER = re.compile(
    r"(?i)([?&;])((?:[a-z0-9_.-]*(?:password|passwd|secret|token|api[_-]?key|apikey|access[_-]?key|credential)"
    r"[a-z0-9_.-]*|pwd|key|sig|signature|auth))=[^&;#\s]*")
_SECRET_NAME = re.compile(
    r"(?i)^(?:.*[_-])?(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|credentials?)$")
#: What stands for a removed query value.
REMOVED = "REMOVED"


def is_secret_name(name: str) -> bool:
    """Whether a field or parameter called ``name`` holds a secret (``api_key``, ``NEO4J_PASSWORD``, ``token``,
    ``client_secret``, ...)."""
    return bool(_SECRET_NAME.match(name))


def without_credentials(url: str) -> str:
    """``url`` without its user part and with the values of query parameters that name a secret removed."""
    return scrub_text(url)


def scrub_text(text: str) -> str:
    """``text`` with every URL in it stripped of its user part, and secret query values replaced by
    :data:`REMOVED` (for free text: a command line, an error message, a serialised request)."""
    text = _USER_PART.sub(r"\1", text)
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
