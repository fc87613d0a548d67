"""Where each key and credential may go: an API key only to the base URL it was configured with, a database's
user and password only to the server its configured URL names.

A request can be aimed elsewhere from many places -- a run's context (``base_url``, ``kg_url``,
``embedding_base_url``), a graph's ``manifest.json``, a Python caller, another variable of the environment --
and none of them may take a key along: the key goes with a request only when the request's server is the one the
key is bound to (:data:`OPENAI`, :data:`ANTHROPIC`, :data:`COMPATIBLE`; the databases' variables in
:func:`credentials_go`). Servers are compared by scheme, host and port after normalising each
(:func:`server_of`), never by string prefix: ``https://api.openai.com.evil.example`` is another host,
``HTTPS://API.OpenAI.com:443/v1`` the same one. A Unicode host name is a server only when every encoding the
clients use gives it the same ASCII name (:func:`normal_host`). A request that goes without its key is said once
(:func:`say_once`).

This module is a leaf: it imports none of ours. Its decisions are pure functions of their arguments (the
environment is one), so that they can be tested and mutation-tested alone.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import idna

__all__ = ["ANTHROPIC", "AZURE", "COMPATIBLE", "DEFAULT_PORTS", "GRADER", "IDNA_ENCODINGS", "OLLAMA", "OPENAI",
           "OPENAI_PROTOCOL", "OPENAI_SDK_VARIABLES", "POSTGRES_PORT", "KeyBinding", "Server", "ascii_name",
           "bound_key", "credentials_go", "key_for", "normal_host", "openai_sdk_headers", "postgres_connection", "said",
           "same_host", "same_postgres", "same_server", "say_once", "sdk_headers_withheld", "server_of",
           "withheld_note"]

#: The port a URL without one reaches, per scheme (after :data:`SCHEME_ALIASES`).
DEFAULT_PORTS = {"http": 80, "https": 443, "bolt": 7687, "bolt+s": 7687, "bolt+ssc": 7687, "redis": 6379,
                 "rediss": 6379}

#: Schemes that reach the same server the same way as another one: Neo4j's routing schemes speak Bolt to the
#: server they name, FalkorDB's are Redis's. An encrypted scheme is never the same as a plain one (a key bound
#: to ``https`` does not go over ``http``).
SCHEME_ALIASES = {"neo4j": "bolt", "neo4j+s": "bolt+s", "neo4j+ssc": "bolt+ssc", "falkor": "redis",
                  "falkors": "rediss"}


@dataclass(frozen=True)
class Server:
    """Where a URL's requests go: its scheme, host and port, normalised (:func:`server_of`)."""

    scheme: str
    host: str
    port: int | None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}" + (f":{self.port}" if self.port is not None else "")


#: The ways the clients kgagents uses turn a Unicode host name into the ASCII name they resolve: Python's
#: ``idna`` codec (IDNA 2003: the ``socket`` module, so the Bolt and Redis drivers, and yarl's fallback), IDNA 2008
#: (httpx, httpx2) and IDNA 2008 with UTS 46 mapping (yarl, under aiohttp). They differ on a few characters:
#: IDNA 2003 maps ``ß`` to ``ss`` and the final sigma to the sigma, IDNA 2008 keeps them (``maß`` is
#: ``xn--ma-hia``, another name than ``mass``).
IDNA_ENCODINGS: tuple[Callable[[str], bytes], ...] = (
    lambda name: name.encode("idna"),
    lambda name: idna.encode(name),
    lambda name: idna.encode(name, uts46=True),
)


def ascii_name(name: str) -> str | None:
    """The one ASCII name every client resolves for the Unicode host ``name`` (lower case, no final dot), or
    ``None`` when they would resolve different names (an IDNA 2003 / 2008 deviation such as ``ß``) or none: such
    a host is no key's server, since the name a key was configured with may not be the name a request reaches."""
    names = set()
    for encode in IDNA_ENCODINGS:
        try:
            names.add(encode(name).decode("ascii").lower())
        except (UnicodeError, idna.IDNAError, ValueError):
            continue  # a client that cannot encode the name sends nothing there
    return names.pop() if len(names) == 1 else None


def normal_host(host: str) -> str | None:
    """``host`` as the resolver reads it: lower case without a final dot, an IP address in its one canonical
    form (``[0:0::1]`` is ``::1``; ``2130706433``, ``127.1`` and ``0x7f.0.0.1`` are ``127.0.0.1``, as
    ``inet_aton`` reads them), a Unicode name in the ASCII form every client gives it (:func:`ascii_name`);
    ``None`` when it is no host at all, or a name the clients would resolve differently."""
    host = host.strip().rstrip(".").lower()
    if not host:
        return None
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        pass
    if all(c in "0123456789abcdefx." for c in host):
        try:
            return socket.inet_ntoa(socket.inet_aton(host))
        except OSError:
            pass
    if not host.isascii():
        return ascii_name(host)
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return None


def server_of(url: str | None) -> Server | None:
    """The server a URL's requests reach, or ``None`` when ``url`` names none (no scheme, no host, a port that is
    not a number): such a URL is never any key's server."""
    if not url or "://" not in url:
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    scheme = SCHEME_ALIASES.get(scheme, scheme)
    host = normal_host(parts.hostname or "")
    if host is None:
        return None
    return Server(scheme, host, port if port is not None else DEFAULT_PORTS.get(scheme))


def same_server(url: str | None, other: str | None) -> bool:
    """Whether two URLs reach the same server (scheme, host and port; paths and users do not matter)."""
    first, second = server_of(url), server_of(other)
    return first is not None and first == second


def same_host(url: str | None, other: str | None) -> bool:
    """Whether two URLs name the same host (normalised as :func:`server_of` does; scheme and port aside): another
    service of the same server, such as ArcadeDB's HTTP API beside its Bolt port."""
    first, second = server_of(url), server_of(other)
    return first is not None and second is not None and first.host == second.host


@dataclass(frozen=True)
class KeyBinding:
    """An API key and the one server it goes to: the base URL its variables name, else the provider's own."""

    key: str
    """The variable that holds the key."""
    bases: tuple[str, ...]
    """The variables that name its base URL, the first one set wins."""
    default: str | None = None
    """The provider's own base URL, when no variable names one (``None``: the key goes nowhere without one)."""

    def base(self, env: Mapping[str, str]) -> str | None:
        """The base URL the key is bound to in ``env``."""
        for name in self.bases:
            value = (env.get(name) or "").strip()
            if value:
                return value
        return self.default

    def secret(self, env: Mapping[str, str]) -> str | None:
        """The key in ``env`` (``None`` when unset or blank)."""
        return (env.get(self.key) or "").strip() or None


#: An OpenAI-compatible server's key (vLLM, llama.cpp, LM Studio, ...): only to ``KGAGENTS_BASE_URL``.
COMPATIBLE = KeyBinding("KGAGENTS_API_KEY", ("KGAGENTS_BASE_URL",))
#: An evaluation's LLM grader's key (its judge on another OpenAI-compatible server): only to
#: ``KGAGENTS_GRADER_BASE_URL``.
GRADER = KeyBinding("KGAGENTS_GRADER_API_KEY", ("KGAGENTS_GRADER_BASE_URL",))
#: OpenAI's key: to ``OPENAI_BASE_URL`` (or LangChain's ``OPENAI_API_BASE``), else OpenAI's API.
OPENAI = KeyBinding("OPENAI_API_KEY", ("OPENAI_BASE_URL", "OPENAI_API_BASE"), "https://api.openai.com/v1")
#: Anthropic's key: to ``ANTHROPIC_BASE_URL`` (or ``ANTHROPIC_API_URL``), else Anthropic's API.
ANTHROPIC = KeyBinding("ANTHROPIC_API_KEY", ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL"), "https://api.anthropic.com")
#: Azure OpenAI's key: only to ``AZURE_OPENAI_ENDPOINT`` (Azure has no default server). LangChain's
#: ``AzureChatOpenAI`` falls back to ``OPENAI_API_KEY`` when this one is unset; kgagents never lets it.
AZURE = KeyBinding("AZURE_OPENAI_API_KEY", ("AZURE_OPENAI_ENDPOINT",))
#: The keys a client of the OpenAI protocol (chat, transcription, embeddings) may send, each to its own server.
OPENAI_PROTOCOL = (COMPATIBLE, GRADER, OPENAI)
#: Ollama's key (Ollama's cloud, which issues it): the Ollama client sends it wherever ``OLLAMA_HOST`` points, so
#: it is bound to ``https://ollama.com`` only. A self-hosted server behind an authenticating proxy is an
#: OpenAI-compatible one (``KGAGENTS_BASE_URL`` + ``KGAGENTS_API_KEY``: Ollama serves ``/v1``).
OLLAMA = KeyBinding("OLLAMA_API_KEY", (), "https://ollama.com")

#: The variables the OpenAI SDK (and LangChain's ``ChatOpenAI``) turn into headers of every request on their own,
#: besides the key and base URL kgagents passes: ``OPENAI_ORG_ID`` (or ``OPENAI_ORGANIZATION``) and
#: ``OPENAI_PROJECT_ID`` as ``OpenAI-Organization`` / ``OpenAI-Project``, and ``OPENAI_CUSTOM_HEADERS`` (one
#: ``Name: value`` a line, ``Authorization`` included: how gateways take their credentials). They belong with
#: ``OPENAI_API_KEY``'s server (:func:`sdk_headers_withheld`).
OPENAI_SDK_VARIABLES = ("OPENAI_ORG_ID", "OPENAI_ORGANIZATION", "OPENAI_PROJECT_ID", "OPENAI_CUSTOM_HEADERS")


def openai_sdk_headers(env: Mapping[str, str]) -> dict[str, str]:
    """The headers the OpenAI SDK adds to every request from ``env`` (:data:`OPENAI_SDK_VARIABLES`), by name."""
    headers = {}
    organization = (env.get("OPENAI_ORG_ID") or env.get("OPENAI_ORGANIZATION") or "").strip()
    if organization:
        headers["OpenAI-Organization"] = organization
    project = (env.get("OPENAI_PROJECT_ID") or "").strip()
    if project:
        headers["OpenAI-Project"] = project
    for line in (env.get("OPENAI_CUSTOM_HEADERS") or "").split("\n"):
        name, sep, value = line.partition(":")
        if sep and name.strip():
            headers[name.strip()] = value.strip()
    return headers


def sdk_headers_withheld(url: str | None, env: Mapping[str, str]) -> dict[str, str]:
    """The headers of :func:`openai_sdk_headers` that must not go to ``url``: every one, unless ``url`` is on the
    server ``OPENAI_API_KEY`` is bound to (``OPENAI_BASE_URL``, else OpenAI's API), where the SDK sends them."""
    if same_server(url, OPENAI.base(env)):
        return {}
    return openai_sdk_headers(env)


def key_for(url: str | None, bindings: Iterable[KeyBinding], env: Mapping[str, str]) -> tuple[str, str] | None:
    """``(variable, key)`` of the first binding whose key is set in ``env`` and whose base URL is ``url``'s
    server; ``None`` when no key belongs there (the request then goes without one)."""
    for binding in bindings:
        secret = binding.secret(env)
        if secret is not None and same_server(url, binding.base(env)):
            return binding.key, secret
    return None


def withheld_note(url: str, bindings: Iterable[KeyBinding], env: Mapping[str, str]) -> str | None:
    """What to say when a request to ``url`` goes without a key although keys are set (``None`` when no key of
    ``bindings`` is set: nothing was held back). Names each key and the server it goes to instead."""
    held = []
    for binding in bindings:
        if binding.secret(env) is None:
            continue
        base = binding.base(env)
        held.append(f"{binding.key} goes only to {base}" if base else
                     f"{binding.key} goes only to {' / '.join(binding.bases)}, which is not set")
    if not held:
        return None
    return f"requests to {url} go without a key ({'; '.join(held)})"


def bound_key(url: str, bindings: Iterable[KeyBinding], env: Mapping[str, str]) -> str | None:
    """The key of ``bindings`` bound to ``url``'s server (:func:`key_for`), else ``None``, said once when keys
    are set that do not go there (:func:`withheld_note`)."""
    found = key_for(url, bindings, env)
    if found is not None:
        return found[1]
    note = withheld_note(url, bindings, env)
    if note:
        say_once(note)
    return None


def credentials_go(url: str | None, configured: str | None) -> bool:
    """Whether a database's user and password (configured together with the URL ``configured``) go to ``url``:
    with no URL of its own the request goes to the configured server itself; else only to that server."""
    if not (url or "").strip():
        return True
    return same_server(url, configured)


#: The port of a PostgreSQL server whose connection string names none (libpq's default).
POSTGRES_PORT = "5432"


def postgres_connection(params: Mapping[str, str]) -> tuple[tuple[str, str], ...] | None:
    """What a PostgreSQL connection reaches and how, from the parameters libpq reads in its connection string
    (``psycopg.conninfo.conninfo_to_dict``, which applies a URL's ``?host=`` and other query parameters as libpq
    does): every parameter but the password, each host normalised (:func:`normal_host`; a Unix socket folder as
    written), a port for each host (5432 unless named). ``None`` when a host is no host name.

    libpq sends ``PGPASSWORD``, a matching ``~/.pgpass`` line or a service file's password to whatever server the
    string names, so two strings are the same checkpointer only when every parameter agrees: server, port,
    database, user, TLS mode, service, password file (:func:`same_postgres`)."""
    hosts = []
    for host in (params.get("host") or "").split(","):
        host = host.strip()
        if host.startswith(("/", "@")) or not host:  # a socket folder (or abstract socket), or libpq's default
            hosts.append(host)
            continue
        name = normal_host(host)
        if name is None:
            return None
        hosts.append(name)
    ports = [port.strip() or POSTGRES_PORT for port in (params.get("port") or "").split(",")]
    if len(ports) == 1:
        ports *= len(hosts)
    rest = {name: value.strip() for name, value in params.items() if name not in ("host", "port", "password")}
    return tuple(sorted({**rest, "host": ",".join(hosts), "port": ",".join(ports)}.items()))


def same_postgres(params: Mapping[str, str], other: Mapping[str, str]) -> bool:
    """Whether two PostgreSQL connection strings' parameters (as libpq reads them) open the same connection,
    the password aside (:func:`postgres_connection`)."""
    first = postgres_connection(params)
    return first is not None and first == postgres_connection(other)


_said: set[str] = set()
_said_lock = threading.Lock()


def say_once(message: str) -> None:
    """Print ``kgagents: message`` on standard error, once per process and message."""
    with _said_lock:
        if message in _said:
            return
        _said.add(message)
    print(f"kgagents: {message}", file=sys.stderr, flush=True)


def said() -> frozenset[str]:
    """The messages :func:`say_once` printed in this process."""
    with _said_lock:
        return frozenset(_said)
