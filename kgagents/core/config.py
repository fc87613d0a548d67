"""Settings read from the environment and, in a folder the user trusts, its ``.env`` file.

This module is a leaf of the foundation: every other package may import it; it imports the exception root
(``kgagents.core.errors``), the folder trust store (``kgagents.core.trust``) and the private folders
(``kgagents.core.private``).
Every variable it reads is documented in ``.env.example``.
"""

from __future__ import annotations

import hashlib
import io
import os
import socket
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dotenv import dotenv_values

from kgagents.core.errors import KGAgentsError
from kgagents.core.private import private_dir
from kgagents.core.trust import DOTENV, PROJECT_DIR, FolderConfig, folder_config, read_env_file, trust_store_path

#: Roles that a chat model can play. KGoT's dual-LLM controller has a graph executor and a tool executor;
#: tools (LLM tool, surfer agent, text inspector, ...) have their own model. ARK-V1's agent, grounded
#: reasoning's reasoner and Agent-G have one role each (each workflow's context lists its own: ``ROLES``).
__all__ = ["DOTENV_VARIABLES", "HOME_VARIABLE", "MODEL_VARIABLES_HELP", "OLLAMA_DEFAULT_URL", "PROJECT_DIR", "ROLES",
           "ROLE_FALLBACKS", "ConfigurationError", "Settings", "allowed_hosts", "configuration_line", "data_folder",
           "data_home", "dotenv_may_set", "file_roots", "get_settings", "load_env", "ollama_available", "ollama_url",
           "read_dotenv", "user_data_dir"]

ROLES = ("graph_executor", "tool_executor", "tools", "ark_agent", "reasoner", "agent_g")
#: Roles that were called by another name before: ``KGAGENTS_<ROLE>_MODEL`` unset, the old name's variable is
#: read.
ROLE_FALLBACKS = {"ark_agent": "graph_executor", "reasoner": "graph_executor", "agent_g": "graph_executor"}

OLLAMA_DEFAULT_URL = "http://127.0.0.1:11434"
#: The variable that names the data directory.
HOME_VARIABLE = "KGAGENTS_HOME"


class ConfigurationError(KGAgentsError, RuntimeError):
    """Raised when the user's configuration cannot work; the message says what to set."""


#: What a ``.env`` may set besides kgagents' own ``KGAGENTS_*`` variables: the providers' and servers' names
#: kgagents reads (and LangSmith's, for ``langgraph dev``). Nothing else is taken from a ``.env``, trusted or not:
#: not ``PYTHONPATH``, ``LD_PRELOAD``, ``PATH``, ``HOME``, proxies or another program's settings, which would
#: change what the process and its children run or where they connect.
DOTENV_VARIABLES = frozenset({
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OLLAMA_HOST",
    "SERPAPI_API_KEY", "NEO4J_URI", "NEO4J_USER", "NEO4J_USERNAME", "NEO4J_PASSWORD", "NEO4J_DATABASE",
    "FALKORDB_URL", "SPARQL_ENDPOINT", "SPARQL_UPDATE_ENDPOINT", "SPARQL_USER", "SPARQL_PASSWORD", "CRAG_SERVER",
    "LANGSMITH_API_KEY", "LANGSMITH_TRACING", "LANGSMITH_ENDPOINT", "LANGSMITH_PROJECT",
})
#: kgagents' own variables that a ``.env`` cannot set: it is read because of them.
DOTENV_REFUSED = frozenset({"KGAGENTS_NO_DOTENV"})


def dotenv_may_set(name: str) -> bool:
    """Whether a ``.env`` may set the variable ``name``: kgagents' own and :data:`DOTENV_VARIABLES`."""
    if name in DOTENV_REFUSED:
        return False
    rest = name[len("KGAGENTS_"):].replace("_", "")
    return name in DOTENV_VARIABLES or (name.startswith("KGAGENTS_") and rest.isascii() and rest.isalnum())


#: What :func:`load_env` did with the working directory's ``.env``: the folder's state (``None``: not looked
#: at yet, or ``KGAGENTS_NO_DOTENV=1``), and the line to say about what it ignored (said by :func:`_announce`).
_dotenv_folder: FolderConfig | None = None
_dotenv_loaded = False
_notices: list[str] = []
_announced: set[str] = set()
_notices_lock = threading.Lock()


def load_env(dotenv_path: str | os.PathLike[str] | None = None) -> None:
    """Load the working directory's ``.env`` when the user trusts this folder (``kgagents trust``), or the file
    ``dotenv_path`` a Python caller names, without overriding real variables.

    The working directory's ``.env`` is looked at once per process (at import), so that reading settings inside
    a running graph never touches the filesystem; an untrusted or changed one is ignored, and the first reading
    of the settings says so on standard error. Only kgagents' and its providers' variables are taken
    (:func:`dotenv_may_set`). ``KGAGENTS_NO_DOTENV=1`` turns it off (the test suite sets it).
    """
    global _dotenv_loaded, _dotenv_folder
    if os.environ.get("KGAGENTS_NO_DOTENV") == "1" or (dotenv_path is None and _dotenv_loaded):
        return
    if dotenv_path is not None:
        _apply_dotenv(Path(dotenv_path))
        return
    _dotenv_loaded = True
    folder = folder_config()
    _dotenv_folder = folder
    if folder.env_state == "trusted":
        data = read_env_file(folder.env)
        # the very bytes that were judged (a .env swapped since is ignored)
        if data is not None and hashlib.sha256(data).hexdigest() == folder.env_sha256:
            _set_from_dotenv(folder.env, data.decode("utf-8", errors="replace"))
    # one line for the folder: its .kgagents too, unless KGAGENTS_HOME makes it irrelevant (data_home then
    # finds its own line about it said already)
    with_home = not (os.environ.get(HOME_VARIABLE) or "").strip()
    notice = folder.ignored(env=True, kgagents=with_home)
    if notice:
        _notices.append(notice)
        home_only = folder.ignored(env=False, kgagents=True)
        if with_home and home_only and home_only != notice:
            _announced.add(home_only)


def _apply_dotenv(path: Path) -> None:
    """Set the variables of the ``.env`` at ``path`` (:func:`_set_from_dotenv`)."""
    data = read_env_file(path)
    if data is not None:
        _set_from_dotenv(path, data.decode("utf-8", errors="replace"))


def read_dotenv(text: str) -> dict[str, str | None]:
    """The variables of a ``.env`` text as written: no ``${NAME}`` is expanded (python-dotenv would expand it from
    the process environment, so a ``.env`` could copy any of the user's variables, a key included, into one that
    goes to its own server)."""
    return dotenv_values(stream=io.StringIO(text), interpolate=False)


def _set_from_dotenv(path: Path, text: str) -> None:
    """Set the variables of the ``.env`` text (read from ``path``) that are not set already and that a ``.env``
    may set; note the names it may not set, and the values kept with a ``${...}`` in them."""
    refused, literal = [], []
    for name, value in read_dotenv(text).items():
        if value is None:
            continue
        if not dotenv_may_set(name):
            refused.append(name)
            continue
        if "${" in value:
            literal.append(name)
        if name not in os.environ:
            os.environ[name] = value
    if refused:
        _notices.append(f"{path}: ignored {', '.join(sorted(refused))}: a .env sets only kgagents' own "
                        "variables (KGAGENTS_*) and its providers' and servers' (docs/security.md)")
    if literal:
        _notices.append(f"{path}: {', '.join(sorted(literal))} kept as written: kgagents expands no ${{...}} in a "
                        ".env (docs/security.md)")


def _announce() -> None:
    """Say, once each, what was ignored of this folder's configuration."""
    with _notices_lock:
        pending = [notice for notice in dict.fromkeys(_notices) if notice not in _announced]
        _notices.clear()
        _announced.update(pending)
    for notice in pending:
        print(f"kgagents: {notice}", file=sys.stderr, flush=True)


def _env(name: str, default: str | None = None) -> str | None:
    _read.add(name)
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip()


@dataclass(frozen=True)
class Settings:
    """A snapshot of the environment, taken when :func:`get_settings` is called."""

    model: str | None = None
    role_models: dict[str, str] = field(default_factory=dict)
    base_url: str | None = None
    api_key: str | None = None
    runs_dir: Path = Path(".kgagents/runs")
    """Checkpoints, the run registry and work directories: ``KGAGENTS_RUNS_DIR``, else ``runs`` in
    :func:`data_home`."""
    prices_file: Path | None = None
    allow_weak_sandbox: bool = False
    serpapi_api_key: str | None = None
    search_api_base: str | None = None
    wikipedia_api_base: str | None = None
    wayback_api_base: str | None = None
    transcription_model: str = "whisper-1"
    ollama_url: str = OLLAMA_DEFAULT_URL
    file_roots: tuple[Path, ...] = ()
    """Folders the file tools may read besides the task's attachments and the run's work directory
    (``KGAGENTS_FILE_ROOTS``, ``os.pathsep``-separated)."""
    allow_private_urls: bool = False
    """Whether the web tools may fetch loopback, private and link-local addresses
    (``KGAGENTS_ALLOW_PRIVATE_URLS``)."""
    allowed_hosts: tuple[str, ...] = ()
    """Hosts (``host`` or ``host:port``) the web tools may fetch whatever their address: ``KGAGENTS_ALLOWED_HOSTS``
    (comma-separated) and the hosts of the API bases configured here."""

    def model_for(self, role: str) -> str | None:
        """The ``provider:model`` string configured for ``role`` (role override, then the default)."""
        if role not in ROLES:
            raise ValueError(f"unknown model role {role!r}; expected one of {', '.join(ROLES)}")
        return self.role_models.get(role) or self.role_models.get(ROLE_FALLBACKS.get(role, "")) or self.model


#: The variables the settings were last read from, and that snapshot (see :func:`get_settings`).
_read: set[str] = {"HOME"}  # HOME: ``~`` in KGAGENTS_FILE_ROOTS
_snapshot: tuple[tuple[Any, ...], tuple[Any, ...], Settings] | None = None


def _environment() -> tuple[Any, Any]:
    """The process environment's own mapping and its key encoder where ``os.environ`` has them (its lookups
    cost microseconds each, and the settings are read on every model call), else ``os.environ`` itself."""
    data = getattr(os.environ, "_data", None)
    encode = getattr(os.environ, "encodekey", None)
    if isinstance(data, dict) and callable(encode):
        return data, encode
    return os.environ, lambda name: name  # pragma: no cover - another Python


def get_settings() -> Settings:
    """The settings from the environment (and ``.env``): read again whenever a variable they read has changed."""
    global _snapshot
    load_env()
    if _notices:
        _announce()
    data, encode = _environment()
    snapshot = _snapshot
    if snapshot is not None and tuple(map(data.get, snapshot[0])) == snapshot[1]:
        return snapshot[2]
    settings = _read_settings()
    keys = tuple(encode(name) for name in sorted(_read))
    _snapshot = (keys, tuple(map(data.get, keys)), settings)
    return settings


#: The trust store's answer about the working directory, while the store and the folder are unchanged.
_project_cache: dict[tuple[Any, ...], FolderConfig] = {}


def _project_folder() -> FolderConfig:
    """:func:`kgagents.core.trust.folder_config` of the working directory, cached while the trust store, the
    folder's ``.kgagents`` and its ``.env`` are unchanged (the settings read it whenever a variable changes)."""
    marks: list[Any] = [os.getcwd()]
    for path in (trust_store_path(), Path(PROJECT_DIR), Path(DOTENV)):
        try:
            info = path.stat()
            marks.append((info.st_ino, info.st_mtime_ns, info.st_size))
        except OSError:
            marks.append(None)
    key = tuple(marks)
    found = _project_cache.get(key)
    if found is None:
        _project_cache.clear()
        found = _project_cache[key] = folder_config()
    return found


def user_data_dir(app: str = "kgagents") -> Path:
    """The platform's usual per-user data folder for ``app``: ``$XDG_DATA_HOME/app`` or ``~/.local/share/app``
    (Linux and other Unix), ``~/Library/Application Support/app`` (macOS), ``%LOCALAPPDATA%\\app``
    (Windows)."""
    if sys.platform == "win32":
        base = _env("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / app
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / app
    xdg = _env("XDG_DATA_HOME")
    # the XDG specification: a relative XDG_DATA_HOME is invalid and ignored
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return base / app


def data_home() -> tuple[Path, str]:
    """Where imported graphs and runs live, and why there.

    ``KGAGENTS_HOME`` when set; else a ``.kgagents`` folder in the working directory when one exists and the user
    trusts this folder (``kgagents trust``: a project that keeps its own state opts in by creating it; a folder
    someone else made is ignored, said once); else the platform's per-user data folder (:func:`user_data_dir`),
    so that the graphs and runs follow the user from folder to folder. ``KGAGENTS_RUNS_DIR`` and
    ``KGAGENTS_GRAPHS_DIR`` still move one part alone.
    """
    named = _env(HOME_VARIABLE)
    if named:
        return Path(named).expanduser(), HOME_VARIABLE
    if Path(PROJECT_DIR).is_dir():
        project = _project_folder()
        if project.kgagents_state == "trusted":
            # an absolute path: the settings keep it if the process changes folder
            return Path(PROJECT_DIR).absolute(), f"this folder's {PROJECT_DIR}"
        notice = project.ignored(env=False, kgagents=True)
        if notice:
            _notices.append(notice)
            _announce()
        return user_data_dir(), f"the per-user data folder; this folder's {PROJECT_DIR} is not trusted"
    return user_data_dir(), "the per-user data folder"


def data_folder(path: str | os.PathLike[str]) -> Path:
    """``path``, a folder kgagents keeps runs, graphs or caches in, created (or tightened) readable by its owner
    only, and the data home too when ``path`` lies in it (:mod:`kgagents.core.private`)."""
    folder = Path(path)
    home = data_home()[0]
    if folder.absolute().is_relative_to(home.absolute()) and folder.absolute() != home.absolute():
        private_dir(home)
    return private_dir(folder)


def configuration_line() -> str:
    """Which configuration and which data home this process uses, and why: the start line of ``ask``,
    ``eval``, ``demo`` and ``doctor``."""
    load_env()
    folder = _dotenv_folder
    if os.environ.get("KGAGENTS_NO_DOTENV") == "1":
        where = "the environment only (KGAGENTS_NO_DOTENV=1)"
    elif folder is None or folder.env_state == "absent":
        where = "the environment only (no .env in the folder it started in)"
    elif folder.env_state == "trusted":
        where = f"{folder.env} (a folder you trusted) and the environment"
    else:
        state = "changed since you trusted it" if folder.env_state == "changed" else "not trusted"
        where = f"the environment only ({folder.env} is {state})"
    home, why = data_home()
    if _notices:
        _announce()
    return f"configuration: {where}; data home: {home} ({why})"


def _read_settings() -> Settings:
    role_models = {}
    for role in ROLES:
        value = _env(f"KGAGENTS_{role.upper()}_MODEL")
        if value:
            role_models[role] = value
    prices = _env("KGAGENTS_PRICES_FILE")
    return Settings(
        model=_env("KGAGENTS_MODEL"),
        role_models=role_models,
        base_url=_env("KGAGENTS_BASE_URL"),
        api_key=_env("KGAGENTS_API_KEY"),
        runs_dir=Path(_env("KGAGENTS_RUNS_DIR") or data_home()[0] / "runs").expanduser(),
        prices_file=Path(prices) if prices else None,
        allow_weak_sandbox=(_env("KGAGENTS_ALLOW_WEAK_SANDBOX", "0") or "0").lower() in {"1", "true", "yes"},
        serpapi_api_key=_env("SERPAPI_API_KEY"),
        search_api_base=_env("KGAGENTS_SEARCH_API_BASE"),
        wikipedia_api_base=_env("KGAGENTS_WIKIPEDIA_API_BASE"),
        wayback_api_base=_env("KGAGENTS_WAYBACK_API_BASE"),
        transcription_model=_env("KGAGENTS_TRANSCRIPTION_MODEL", "whisper-1") or "whisper-1",
        ollama_url=ollama_url(_env("OLLAMA_HOST", OLLAMA_DEFAULT_URL) or OLLAMA_DEFAULT_URL),
        file_roots=file_roots(_env("KGAGENTS_FILE_ROOTS")),
        allow_private_urls=(_env("KGAGENTS_ALLOW_PRIVATE_URLS", "0") or "0").lower() in {"1", "true", "yes"},
        allowed_hosts=allowed_hosts(_env("KGAGENTS_ALLOWED_HOSTS"),
                                    *(_env(f"KGAGENTS_{api}_API_BASE") for api in ("SEARCH", "WIKIPEDIA", "WAYBACK"))),
    )


def file_roots(value: str | None) -> tuple[Path, ...]:
    """The folders of ``KGAGENTS_FILE_ROOTS``: ``os.pathsep``-separated, ``~`` expanded, blanks ignored."""
    return tuple(Path(part.strip()).expanduser() for part in (value or "").split(os.pathsep) if part.strip())


def allowed_hosts(listed: str | None, *api_bases: str | None) -> tuple[str, ...]:
    """``KGAGENTS_ALLOWED_HOSTS`` (comma-separated ``host`` or ``host:port``) plus the ``host:port`` of each API
    base the user configured (a local search or Wikipedia mirror is the user's choice, not the model's)."""
    hosts = [part.strip().lower() for part in (listed or "").split(",") if part.strip()]
    for base in api_bases:
        parsed = urlparse(base or "")
        if parsed.hostname:
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
            hosts.append(f"{parsed.hostname.lower()}:{port}")
    return tuple(dict.fromkeys(hosts))


load_env()

#: What to set when no chat model is configured. Its first line stands alone (a one-line report, such as
#: ``kgagents doctor``'s, shows only it); the lines under it give an example per kind of server.
MODEL_VARIABLES_HELP = (
    "No chat model is configured: set KGAGENTS_MODEL (and the key of its provider), e.g. "
    "`export OPENAI_API_KEY=sk-... KGAGENTS_MODEL=openai:gpt-4o-mini`.\n"
    "Examples, one per kind of server:\n"
    "  export OPENAI_API_KEY=sk-... KGAGENTS_MODEL=openai:gpt-4o-mini\n"
    "  export ANTHROPIC_API_KEY=sk-ant-... KGAGENTS_MODEL=anthropic:claude-sonnet-4-5\n"
    "  export KGAGENTS_MODEL=ollama:qwen2.5:7b       (a local Ollama server; OLLAMA_HOST if not on port 11434)\n"
    "  export KGAGENTS_BASE_URL=http://localhost:8000/v1 KGAGENTS_MODEL=Qwen/Qwen2.5-7B-Instruct\n"
    "      (any OpenAI-compatible server: vLLM, llama.cpp, LM Studio; KGAGENTS_API_KEY if it needs one)\n"
    "Per-role overrides: KGAGENTS_GRAPH_EXECUTOR_MODEL, KGAGENTS_TOOL_EXECUTOR_MODEL, KGAGENTS_TOOLS_MODEL\n"
    "  (KGoT); KGAGENTS_ARK_AGENT_MODEL, KGAGENTS_REASONER_MODEL (grounded), KGAGENTS_AGENT_G_MODEL.\n"
    "Put them in the environment or in a .env file (see .env.example).\n"
    "To try kgagents without a model: `kgagents demo` (or `make demo`) runs scripted examples offline."
)


def ollama_url(host: str) -> str:
    """``OLLAMA_HOST`` as a URL. Like Ollama's own tools, it accepts ``host`` or ``host:port`` (http, port 11434)."""
    if "://" in host:
        return host.rstrip("/")
    parsed = urlparse(f"http://{host}")
    try:
        has_port = parsed.port is not None
    except ValueError:
        has_port = True  # let the client report the malformed port
    return (parsed.geturl() if has_port else parsed._replace(netloc=f"{parsed.netloc}:11434").geturl()).rstrip("/")


def ollama_available(url: str = OLLAMA_DEFAULT_URL, timeout: float = 0.3) -> bool:
    """True when something accepts TCP connections at the Ollama server's address."""
    parsed = urlparse(url if "://" in url else f"http://{url}")
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 11434
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
