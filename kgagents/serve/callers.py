"""Who may call a served kgagents, and from where: the tokens and origins the auth handler checks.

Pure functions of the server's environment and of one request's headers, so that they can be tested (and
mutation-tested) on their own; :mod:`kgagents.serve.auth` wires them into LangGraph's auth handler.

Callers, from the server's environment (docs/security.md, "A served kgagents"):

- ``KGAGENTS_SERVE_TOKEN=<token>``: one caller (identity ``user``);
- ``KGAGENTS_SERVE_TOKENS=alice:<token>,bob:<token>``: several callers, each with its identity;
- ``KGAGENTS_SERVE_TOKENS_FILE=<file>``: the same, one ``name:token`` a line (``#`` comments), in a file only
  its owner may read (``chmod 600``).

A caller sends its token as ``Authorization: Bearer <token>`` (or ``X-Api-Key: <token>``, as the LangGraph SDK's
``api_key`` does); tokens are compared in constant time. With no token configured the server is **one-user**:
it takes requests from this machine only (a loopback client that addressed a loopback host), and only without
an ``Origin`` or from an allowed one, so that no web page of another origin that the user opens can drive it.

The allowed origins are the server's CORS configuration (``langgraph.json``'s ``http.cors``: LangGraph Studio's;
the ``CORS_CONFIG`` variable overrides it, as for LangGraph itself): a browser request of another origin is
refused whether or not it carries a token.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kgagents.core.config import ConfigurationError
from kgagents.core.errors import KGAgentsError

__all__ = ["LOCAL_IDENTITY", "ONE_TOKEN_IDENTITY", "TOKENS_ENV", "TOKENS_FILE_ENV", "TOKEN_ENV", "Callers",
           "Refusal", "allowed_origins", "callers_from", "check_request", "is_loopback_host", "origin_allowed",
           "token_of"]

TOKEN_ENV = "KGAGENTS_SERVE_TOKEN"
TOKENS_ENV = "KGAGENTS_SERVE_TOKENS"
TOKENS_FILE_ENV = "KGAGENTS_SERVE_TOKENS_FILE"
#: The identity of ``KGAGENTS_SERVE_TOKEN``'s caller, and of the one user of a server without tokens.
ONE_TOKEN_IDENTITY = "user"
LOCAL_IDENTITY = "local"
#: What a caller's name may be, and how short a token may be.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
MIN_TOKEN_CHARS = 16
#: Studio's origins: what ``langgraph.json`` allows when nothing overrides it.
STUDIO_ORIGINS = ("https://smith.langchain.com", "https://eu.smith.langchain.com")


class Refusal(KGAgentsError):
    """A request the server does not take: its HTTP status (401: no or a wrong token, 403: a forbidden origin or
    address) and a message the caller can act on."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Callers:
    """The callers a server takes: ``identity -> token`` (none: the one-user mode)."""

    tokens: tuple[tuple[str, str], ...] = ()

    @property
    def one_user(self) -> bool:
        return not self.tokens

    def identify(self, token: str | None) -> str | None:
        """The identity whose token ``token`` is (every token compared, in constant time), else ``None``."""
        if not token:
            return None
        given = token.encode("utf-8", "surrogateescape")
        found = None
        for identity, known in self.tokens:
            if hmac.compare_digest(given, known.encode("utf-8", "surrogateescape")):
                found = identity
        return found


def _pairs(text: str, where: str) -> list[tuple[str, str]]:
    """``name:token`` entries of ``text`` (comma- or line-separated; ``#`` starts a comment line)."""
    out = []
    for raw in re.split(r"[,\n]", text):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        name, sep, token = entry.partition(":")
        if not sep:
            raise ConfigurationError(f"{where}: each caller is name:token, not {entry[:20]!r}…")
        out.append((name.strip(), token.strip()))
    return out


def _file_pairs(path: Path) -> list[tuple[str, str]]:
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"{TOKENS_FILE_ENV}: cannot read {path}: {exc}") from None
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigurationError(f"{TOKENS_FILE_ENV}: {path} may be read by other users "
                                 f"(mode {stat.filemode(mode)}): chmod 600 {path}")
    return _pairs(text, str(path))


def callers_from(environ: Mapping[str, str]) -> Callers:
    """The callers the environment configures (:data:`TOKEN_ENV`, :data:`TOKENS_ENV`, :data:`TOKENS_FILE_ENV`,
    all of them together); a clear error for a bad name, a short token, or a name or token given twice."""
    pairs: list[tuple[str, str]] = []
    if environ.get(TOKEN_ENV, "").strip():
        pairs.append((ONE_TOKEN_IDENTITY, environ[TOKEN_ENV].strip()))
    if environ.get(TOKENS_ENV, "").strip():
        pairs += _pairs(environ[TOKENS_ENV], TOKENS_ENV)
    if environ.get(TOKENS_FILE_ENV, "").strip():
        pairs += _file_pairs(Path(environ[TOKENS_FILE_ENV].strip()).expanduser())
    names: set[str] = set()
    tokens: set[str] = set()
    for name, token in pairs:
        if not NAME.fullmatch(name) or name == LOCAL_IDENTITY:
            raise ConfigurationError(f"a caller's name uses letters, digits, '.', '_', '@' and '-' (at most 64, not "
                                     f"{LOCAL_IDENTITY!r}): {name[:70]!r}")
        if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
            raise ConfigurationError(f"the token of {name} is too weak: at least {MIN_TOKEN_CHARS} characters, no "
                                     "spaces (e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)")
        if name in names:
            raise ConfigurationError(f"the caller {name} is configured twice")
        if token in tokens:
            raise ConfigurationError(f"two callers have the same token ({name} and another)")
        names.add(name)
        tokens.add(token)
    return Callers(tuple(pairs))


def allowed_origins(environ: Mapping[str, str]) -> tuple[tuple[str, ...], str | None]:
    """The browser origins the server takes requests from, and its origin pattern: the CORS configuration
    LangGraph's server uses (``CORS_CONFIG``, else ``langgraph.json``'s ``http.cors`` as ``langgraph dev`` hands
    it over in ``LANGGRAPH_HTTP``, else ``CORS_ALLOW_ORIGINS``), Studio's origins if none says otherwise."""
    cors: dict[str, object] | None = None
    for variable, key in (("CORS_CONFIG", None), ("LANGGRAPH_HTTP", "cors")):
        text = environ.get(variable, "").strip()
        if not text:
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise ConfigurationError(f"{variable} is not JSON") from None
        value = value.get(key) if key and isinstance(value, dict) else value
        if isinstance(value, dict):
            cors = value
            break
    listed = environ.get("CORS_ALLOW_ORIGINS", "").strip()
    if cors is None:
        return (tuple(o.strip() for o in listed.split(",") if o.strip()) if listed else STUDIO_ORIGINS), None
    origins = cors.get("allow_origins")
    if origins is None and listed and listed != "*":
        origins = [o.strip() for o in listed.split(",") if o.strip()]
    regex = cors.get("allow_origin_regex")
    return (tuple(str(o) for o in origins) if isinstance(origins, list | tuple) else (),
            str(regex) if regex else None)


def origin_allowed(origin: str, origins: tuple[str, ...], regex: str | None) -> bool:
    """Whether a request's ``Origin`` is one the server takes (``*`` among the origins: any)."""
    return "*" in origins or origin in origins or bool(regex and re.fullmatch(regex, origin))


def is_loopback_host(host: str | None) -> bool:
    """Whether ``host`` (an address, or a ``Host`` header's name with or without its port) is this machine's
    loopback: ``localhost``, ``127.0.0.0/8``, ``::1``."""
    if not host:
        return False
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    if name in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def token_of(headers: Mapping[str, str]) -> str | None:
    """The token a request carries: ``Authorization: Bearer <token>``, else ``X-Api-Key``."""
    authorization = headers.get("authorization", "").strip()
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return headers.get("x-api-key", "").strip() or None


def check_request(callers: Callers, headers: Mapping[str, str], client_host: str | None,
                  origins: tuple[tuple[str, ...], str | None]) -> str:
    """The identity of the caller of a request (``headers`` lower-cased; ``client_host``: the peer's address),
    or a :class:`Refusal`: a browser origin the server does not take (always), then a missing or wrong token;
    without tokens, a request that does not come from this machine to a loopback address."""
    origin = headers.get("origin")
    if origin is not None and not origin_allowed(origin, *origins):
        raise Refusal(403, f"requests from the web origin {origin[:100]} are not taken by this server (its CORS "
                      "configuration: langgraph.json's http.cors, or CORS_CONFIG)")
    if not callers.one_user:
        identity = callers.identify(token_of(headers))
        if identity is None:
            raise Refusal(401, "this server takes requests with a caller's token only: send "
                          "'Authorization: Bearer <token>' (the server's KGAGENTS_SERVE_TOKEN(S))")
        return identity
    if not is_loopback_host(client_host) or not is_loopback_host(headers.get("host")):
        raise Refusal(403, f"this server has no caller tokens ({TOKEN_ENV}), so it takes requests from this "
                      "machine only, addressed to 127.0.0.1 or localhost; set a token to share it")
    return LOCAL_IDENTITY
