"""Recorded model exchanges: record a run's calls, replay them offline, or keep a persistent reply cache.

Every chat model call goes through LangChain's cache interface (``BaseCache``: ``lookup`` before the call,
``update`` after it), for any provider and for models given as instances. :class:`Recording` is such a cache
over one SQLite file, in one of three modes:

- ``record``: every call reaches its model; each exchange is kept — the request's fingerprint, the node that made
  it, the request itself and the reply with its usage. Identical requests are told apart by the call's place in
  the graph (:func:`place_of`: the node, its task's path — which ``Send`` branch —, the call's stage, which
  sample of a decision, and an evaluation's item and run, :func:`run_place`), so that concurrent identical
  requests (ToT's k candidates of one state, a vote's samples, two runs of one item) are replayed to the branch
  that made them whatever order they were answered in; identical requests
  made more than once at one place (a call retried) are kept in the order they were made and replayed in that
  order.
- ``replay``: no call reaches a model. Each request is answered from the recording; a request the recording
  lacks is a :class:`ReplayDivergence` naming the node and the request (raised to the caller and kept in
  :attr:`Recording.divergences`, so that a caller that degrades around failed calls cannot hide it).

  Calls that failed are recorded too, in their place among the request's exchanges (:func:`attempt` and
  :func:`note_failure`, which the workflows' model caller uses for every attempt): the replay raises the same
  error — its type's name, message, HTTP status and whether it was worth retrying — at the same attempt, so that
  a run that met a rate limit, a timeout or a call that failed for good is replayed along the same path.
- ``cache``: a persistent cache of replies across runs, off unless asked for. A request seen before is answered
  from it; sampled requests (a temperature above 0, or none given: the provider's default samples) are never
  served from it unless ``cache_sampled`` is set.

The fingerprint is a SHA-256 of the request as LangChain serialises it (the messages, the model and its
parameters, the bound tools or output schema, ``n``), with the ids LangChain and LangGraph give messages left
out: they are new in every run, and the model never reads them. A call made in a graph is kept under the
fingerprint of its request and its place (:func:`placed_key`); a recording made before places were kept is
replayed by the request's fingerprint alone, in the order of the requests, and one made before items and runs
were part of places by the place without them.

A recording is made to be shared, and one from someone else is data: the request text and failure messages it
keeps have every URL stripped of its credentials (the model's ``base_url`` is part of the request; the fingerprint
is taken before), a recording is opened with SQLite's ``trusted_schema`` off, and :func:`check_recording` refuses
a file whose schema is anything but a recording's two tables (no view, no trigger, no other table) before
anything is read from it. The replies a replay serves play the part of the model: as untrusted as any model's
replies, they meet the same walls (the sandbox, the file tools' access check, the URL guard).
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import sqlite3
import threading
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from langchain_core.caches import BaseCache
from langchain_core.globals import get_llm_cache, set_llm_cache
from langchain_core.load import dumps, loads
from langchain_core.outputs import Generation
from langchain_core.runnables.config import var_child_runnable_config

from kgagents.core.bundles import RECORDING_FILE
from kgagents.core.errors import KGAgentsError
from kgagents.core.failures import FailureKind
from kgagents.core.nofollow import refuse_link
from kgagents.core.private import private_dir, private_file
from kgagents.core.redact import scrub_text
from kgagents.core.scripted import CALL_STAGE

Mode = Literal["record", "replay", "cache"]
RECORDING_NAME = RECORDING_FILE
"""The file name of an evaluation's recording (in its result directory)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS exchanges (
    fingerprint TEXT NOT NULL,
    seq INTEGER NOT NULL,
    node TEXT NOT NULL,
    request TEXT NOT NULL,
    model TEXT NOT NULL,
    reply TEXT NOT NULL,
    PRIMARY KEY (fingerprint, seq)
);
"""


#: The tables of a recording with their columns (``meta``: what the recording says about the command that made it).
RECORDING_TABLES: dict[str, tuple[str, ...]] = {
    "exchanges": ("fingerprint", "seq", "node", "request", "model", "reply"), "meta": ("key", "value")}


class NotARecording(KGAgentsError, ValueError):
    """A file given as a recording whose schema is not a recording's."""


def schema_problems(objects: Sequence[tuple[str, str, str]], columns: dict[str, list[str]]) -> list[str]:
    """Why a SQLite schema is not a recording's: ``objects`` are ``sqlite_master``'s (type, name, table) rows,
    ``columns`` each table's column names. A recording has the table ``exchanges``, perhaps ``meta``, and the
    indexes of their primary keys; nothing else (a view or a trigger would run SQL when a table is read)."""
    problems = []
    for kind, name, table in objects:
        if kind == "table" and name in RECORDING_TABLES:
            if sorted(columns.get(name, [])) != sorted(RECORDING_TABLES[name]):
                problems.append(f"its table {name!r} has the columns {columns.get(name)}, not "
                                f"{list(RECORDING_TABLES[name])}")
        elif not (kind == "index" and name.startswith("sqlite_autoindex_") and table in RECORDING_TABLES):
            problems.append(f"it holds a {kind} {name!r}")
    if "exchanges" not in {name for kind, name, _ in objects if kind == "table"}:
        problems.append("it has no exchanges table")
    return problems


def open_read_only(path: str | Path, **options: Any) -> sqlite3.Connection:
    """``path`` opened read-only, with SQL stored in the file (views, triggers) untrusted; ``options`` go to
    ``sqlite3.connect``."""
    try:
        db = sqlite3.connect(Path(path).absolute().as_uri() + "?mode=ro", uri=True, **options)
        db.execute("PRAGMA trusted_schema=OFF")
    except sqlite3.Error as exc:
        raise NotARecording(f"{path} cannot be opened as a recording: {exc}") from exc
    return db


def check_recording(path: str | Path) -> None:
    """Refuse ``path`` unless its schema is a recording's (:func:`schema_problems`), before any table is read."""
    db = open_read_only(path)
    try:
        objects = [(str(k), str(n), str(t)) for k, n, t in
                   db.execute("SELECT type, name, tbl_name FROM sqlite_master").fetchall()]
        columns = {name: [str(row[1]) for row in db.execute(f"PRAGMA table_info('{name}')")]
                   for kind, name, _ in objects if kind == "table" and name in RECORDING_TABLES}
    except sqlite3.Error as exc:
        raise NotARecording(f"{path} is not a kgagents recording ({exc})") from exc
    finally:
        db.close()
    problems = schema_problems(objects, columns)
    if problems:
        raise NotARecording(f"{path} is not a kgagents recording: " + "; ".join(problems))


class ReplayDivergence(KGAgentsError, RuntimeError):
    """A replayed run made a request its recording lacks (the code, the data or the settings changed)."""

    def __init__(self, node: str, fingerprint: str, request: str, seen: int) -> None:
        self.node, self.fingerprint, self.request = node, fingerprint, request
        again = f" (it was recorded {seen} time(s); this is call {seen + 1})" if seen else ""
        super().__init__(f"the recording has no reply for a request of node {node!r}{again}: "
                         f"fingerprint {fingerprint[:16]}…, request {_abbreviate(request)}")


def _abbreviate(request: str, limit: int = 600) -> str:
    return request if len(request) <= limit else request[: limit // 2] + " … " + request[-limit // 2:]


def _without_ids(value: Any) -> Any:
    """A serialised request without the ids given to messages (new in every run, never read by a model)."""
    if isinstance(value, dict):
        out = {k: _without_ids(v) for k, v in value.items() if not (k == "id" and isinstance(v, str | None))}
        return out
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def canonical_request(prompt: str, llm_string: str) -> str:
    """The request as fingerprinted: the messages without their ids, then the model and its parameters."""
    try:
        messages = json.dumps(_without_ids(json.loads(prompt)), sort_keys=True, ensure_ascii=False)
    except ValueError:
        messages = prompt
    return messages + "\n---\n" + llm_string


def fingerprint(prompt: str, llm_string: str) -> str:
    """The SHA-256 of :func:`canonical_request`."""
    return hashlib.sha256(canonical_request(prompt, llm_string).encode("utf-8")).hexdigest()


_TEMPERATURE = re.compile(r"""['"]temperature['"]\s*[:,]\s*([0-9.eE+-]+|None|null)""")


def is_sampled(llm_string: str) -> bool:
    """Whether a request samples: a temperature above 0, or no temperature (the provider's default samples)."""
    found = _TEMPERATURE.findall(llm_string)
    values = [v for v in found if v not in ("None", "null")]
    if not values:
        return True
    try:
        return any(float(v) > 0 for v in values)
    except ValueError:
        return True


def _loads(text: str) -> list[Generation]:
    """A kept reply (LangChain's serialisation of its generations; only LangChain's core classes are
    revived)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"The function `loads` is in beta")
        return loads(text, allowed_objects="core")


def _failure(text: str) -> dict[str, Any] | None:
    """The recorded failure a kept reply holds, or None for a reply."""
    if not text.startswith(f'{{"{_FAILURE_KEY}"'):
        return None
    return dict(json.loads(text)[_FAILURE_KEY])


def _node() -> str:
    config = var_child_runnable_config.get() or {}
    metadata = config.get("metadata") or {}
    node = metadata.get("langgraph_node") or "(outside a graph node)"
    stage = metadata.get("kgagents_stage")
    return f"{node} / {stage}" if stage else str(node)


#: Where in its node a call is made, beyond the node's task (e.g. ``sample 2`` of a decision's samples): set by
#: :func:`sub_place` around calls that a node makes concurrently with identical requests.
_SUB_PLACE: ContextVar[str] = ContextVar("kgagents_replay_sub_place", default="")


@contextmanager
def sub_place(part: str) -> Iterator[None]:
    """Calls made in the block are at ``part`` of the current place (see :func:`place_of`)."""
    token = _SUB_PLACE.set(f"{_SUB_PLACE.get()}/{part}" if _SUB_PLACE.get() else part)
    try:
        yield
    finally:
        _SUB_PLACE.reset(token)


#: Which run of which item the calls are made for (:func:`run_place`), where several runs go on at once in one
#: process (an evaluation's items and runs): empty for a lone run.
_RUN_PLACE: ContextVar[str] = ContextVar("kgagents_replay_run_place", default="")


@contextmanager
def run_place(item: str, run: int) -> Iterator[None]:
    """Calls made in the block are for run ``run`` of item ``item`` (an evaluation's runner sets it around each
    run): two runs of one item, or two items with the same question, made at once make identical requests at the
    same place in their graphs, and are told apart by this. (Thread ids cannot tell them apart: a replay runs
    under thread ids of its own.)"""
    token = _RUN_PLACE.set(json.dumps([str(item), int(run)], separators=(",", ":")))
    try:
        yield
    finally:
        _RUN_PLACE.reset(token)


def place_of(metadata: dict[str, Any], stage: str | None, sub: str = "", run: str = "") -> str:
    """A call's place in its graph, the same in every run of the same work: the node, the path of its task (a
    ``Send`` branch's index among its step's branches; a subgraph's path inside its parent's), the call's stage
    (which decision, step and candidate), ``sub`` (:func:`sub_place`) and ``run`` (:func:`run_place`: which item
    and run of an evaluation, when set). Empty outside a graph. The ids of threads, tasks and checkpoints are left
    out: they are new in every run."""
    node = metadata.get("langgraph_node")
    if not node:
        return ""
    path = metadata.get("langgraph_path") or ()
    parts = [str(node), json.dumps(_plain(path), separators=(",", ":")), stage or "", sub]
    return "\x1f".join([*parts, run] if run else parts)


def _plain(value: Any) -> Any:
    """A task path as JSON can write it (tuples as lists, anything else as its text)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def _current_place(*, run: bool = True) -> str:
    """The place of the call being made (``run``: with its item and run, :func:`run_place`)."""
    config = var_child_runnable_config.get() or {}
    return place_of(dict(config.get("metadata") or {}), CALL_STAGE.get(), _SUB_PLACE.get(),
                    _RUN_PLACE.get() if run else "")


def placed_key(request_fingerprint: str, place: str) -> str:
    """The key a call is kept under: the request's fingerprint alone outside a graph, else the SHA-256 of the
    fingerprint and the call's place (:func:`place_of`)."""
    if not place:
        return request_fingerprint
    return hashlib.sha256(f"{request_fingerprint}\n{place}".encode()).hexdigest()


def _model_name(llm_string: str) -> str:
    found = re.search(r"""['"](?:model_name|model)['"]\s*[:,]\s*['"]([^'"]+)['"]""", llm_string)
    return found.group(1) if found else "?"


@dataclass
class Exchange:
    """One recorded call."""

    fingerprint: str
    seq: int
    node: str
    model: str
    request: str
    reply: list[Generation]
    """The reply's generations (empty for a call that failed)."""
    failure: dict[str, Any] | None = None
    """A call that failed: the error's ``type``, ``message``, ``status``, ``transient`` and ``failure_kind`` (see
    :class:`RecordedFailure`)."""


#: The requests of the model-call attempt under way (:func:`attempt`): fingerprint -> (prompt, llm string, the key
#: it is kept under) of each request looked up and not yet answered. A mutable holder, so that LangChain's tasks
#: and executor threads (which copy the context) fill the caller's.
_ATTEMPT: ContextVar[dict[str, tuple[str, str, str]] | None] = ContextVar("kgagents_replay_attempt", default=None)
#: A failure is kept as a JSON object in the reply column, under this key (a reply is a JSON list).
_FAILURE_KEY = "kgagents_failure"


class RecordedFailure(KGAgentsError, Exception):
    """A failed call, raised again by a replay. The instance's class is named as the original error's (so that
    messages and failure summaries read the same) and derives from the built-in error that classified it
    (a timeout, a refused connection, an unknown host); ``status_code`` is its HTTP status,
    ``kgagents_failure_kind`` the kind it was classified as (:func:`kgagents.core.failures.classify` reads it), and
    ``kgagents_transient`` says whether it was worth retrying (what a recording without kinds is replayed by)."""

    status_code: int | None = None
    kgagents_transient: bool = False
    kgagents_failure_kind: str | None = None


_BUILTIN_KINDS: dict[str, type[BaseException]] = {"refused": ConnectionRefusedError, "unknown host": socket.gaierror,
                                                  "timeout": TimeoutError, "connection": ConnectionError}
_failure_classes: dict[tuple[str, str], type[RecordedFailure]] = {}


def _kind_of(exc: BaseException) -> str | None:
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    for kind, builtin in _BUILTIN_KINDS.items():
        if any(isinstance(e, builtin) for e in chain):
            return kind
    return None


def failure_of(exc: BaseException, transient: bool, failure_kind: str | None = None) -> dict[str, Any]:
    """What a recording keeps of a failed call; ``failure_kind``: its :class:`kgagents.core.failures.FailureKind`
    value (a recording made before kinds were kept has none, and is replayed by ``transient``)."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    failure = {"type": type(exc).__name__, "message": scrub_text(str(exc))[:4000],
               "status": status if isinstance(status, int) else None, "transient": bool(transient),
               "kind": _kind_of(exc)}
    if failure_kind is not None:
        failure["failure_kind"] = str(failure_kind)
    return failure


def raise_failure(failure: dict[str, Any]) -> None:
    """Raise the recorded ``failure`` again (see :class:`RecordedFailure`)."""
    name, kind = str(failure.get("type") or "RecordedFailure"), failure.get("kind")
    key = (name, str(kind))
    cls = _failure_classes.get(key)
    if cls is None:
        bases: tuple[type, ...] = (RecordedFailure,)
        if kind in _BUILTIN_KINDS:
            bases += (_BUILTIN_KINDS[kind],)
        cls = _failure_classes[key] = type(name, bases, {"__module__": __name__})
    error = cls(failure.get("message") or "")
    error.status_code = failure.get("status")
    error.kgagents_transient = bool(failure.get("transient"))
    recorded_kind = failure.get("failure_kind")
    if isinstance(recorded_kind, str) and recorded_kind in FailureKind._value2member_map_:
        error.kgagents_failure_kind = recorded_kind  # what kgagents.core.failures.classify reads first
    raise error


@contextmanager
def attempt(pending: dict[str, tuple[str, str, str]]) -> Iterator[dict[str, tuple[str, str, str]]]:
    """One attempt of a model call: the requests it makes are noted in ``pending`` (emptied first) until answered,
    so that :func:`note_failure` can record those left as failed when the attempt raises or times out."""
    pending.clear()
    token = _ATTEMPT.set(pending)
    try:
        yield pending
    finally:
        _ATTEMPT.reset(token)


def note_failure(pending: dict[str, tuple[str, str, str]], exc: BaseException, *, transient: bool,
                 kind: str | None = None) -> None:
    """Record that the attempt's unanswered requests failed with ``exc`` (of the failure kind ``kind``) when a
    recording is being made."""
    recording = get_llm_cache()
    if isinstance(recording, Recording) and recording.mode == "record":
        for prompt, llm_string, key in list(pending.values()):
            recording.record_failure(prompt, llm_string, failure_of(exc, transient, kind), key=key)
    pending.clear()


class Recording(BaseCache):
    """Model exchanges in one SQLite file, used as LangChain's cache (see the module docstring)."""

    def __init__(self, path: str | Path, mode: Mode, *, cache_sampled: bool = False) -> None:
        if mode not in ("record", "replay", "cache"):
            raise ValueError(f"a recording's mode is record, replay or cache, not {mode!r}")
        self.path, self.mode, self.cache_sampled = Path(path), mode, cache_sampled
        if mode == "replay" and not self.path.is_file():
            raise FileNotFoundError(f"no recording at {self.path} (record a run with --record first)")
        private_dir(self.path.parent, tighten=False)
        if mode != "replay":  # written in a folder that may be someone else's (a results folder): never a link
            private_file(refuse_link(self.path, "the recording"))
        self._lock = threading.Lock()
        if mode == "replay":  # read only, checked first: the recording may come from someone else
            check_recording(self.path)
            self._db = open_read_only(self.path, check_same_thread=False, isolation_level=None)
        else:
            if self.path.is_file() and self.path.stat().st_size:  # one already there may be someone else's
                check_recording(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA trusted_schema=OFF")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
        self._served: Counter[str] = Counter()
        """Replay: how many times each fingerprint was answered (its next reply is that index)."""
        self.divergences: list[ReplayDivergence] = []
        self.hits = 0
        self.misses = 0

    # -- BaseCache ------------------------------------------------------------------------------------
    def lookup(self, prompt: str, llm_string: str) -> Sequence[Generation] | None:
        """The reply to a request: the recorded one (replay), a cached one (cache), or None (record: call the
        model)."""
        if self.mode == "record":
            pending = _ATTEMPT.get()
            if pending is not None:  # noted until answered: a failed attempt is recorded from it
                request = fingerprint(prompt, llm_string)
                pending[request] = (prompt, llm_string, placed_key(request, _current_place()))
            return None
        key = fingerprint(prompt, llm_string)
        if self.mode == "cache" and is_sampled(llm_string) and not self.cache_sampled:
            return None
        with self._lock:
            if self.mode == "replay":
                key = self._replay_key(key)
                row = self._db.execute("SELECT reply FROM exchanges WHERE fingerprint = ? AND seq = ?",
                                       (key, self._served[key])).fetchone()
            else:  # a cache serves a reply, never a recorded failure
                row = self._db.execute("SELECT reply FROM exchanges WHERE fingerprint = ? AND reply NOT LIKE ? "
                                       "ORDER BY seq LIMIT 1", (key, f'{{"{_FAILURE_KEY}"%')).fetchone()
            if row is not None:
                self._served[key] += 1
                self.hits += 1
                failure = _failure(row[0])
                if failure is not None:
                    raise_failure(failure)
                return _loads(row[0])
            self.misses += 1
            index = self._served[key]
        if self.mode == "cache":
            return None
        divergence = ReplayDivergence(_node(), key, canonical_request(prompt, llm_string), index)
        self.divergences.append(divergence)
        raise divergence

    def _replay_key(self, request: str) -> str:
        """The key a request is replayed from (asked with the lock held): under its place with its item and run;
        else (a recording made before runs were kept in places) its place alone; else (one made before places
        were kept) the request alone."""
        for place in dict.fromkeys((_current_place(), _current_place(run=False))):
            placed = placed_key(request, place)
            if placed != request and self._holds(placed):
                return placed
        return request

    def _holds(self, key: str) -> bool:
        """Whether the recording keeps exchanges under ``key`` (asked with the lock held)."""
        return self._db.execute("SELECT 1 FROM exchanges WHERE fingerprint = ? LIMIT 1", (key,)).fetchone() is not None

    def update(self, prompt: str, llm_string: str, return_val: Sequence[Generation]) -> None:
        """Keep an exchange the model answered (record: under its place; cache: under its request)."""
        if self.mode == "replay":
            return
        key = fingerprint(prompt, llm_string)
        pending = _ATTEMPT.get()
        if pending is not None:
            pending.pop(key, None)
        if self.mode == "record":
            key = placed_key(key, _current_place())
        self._keep(prompt, llm_string, key, dumps(list(return_val)))

    def record_failure(self, prompt: str, llm_string: str, failure: dict[str, Any], *, key: str | None = None) -> None:
        """Keep a call that failed (record mode), in its place among the request's exchanges (``key``: the key
        taken when the request was made; else the place it is recorded from)."""
        if self.mode == "record":
            key = key or placed_key(fingerprint(prompt, llm_string), _current_place())
            self._keep(prompt, llm_string, key, json.dumps({_FAILURE_KEY: failure}))

    def _keep(self, prompt: str, llm_string: str, key: str, reply: str) -> None:
        with self._lock:
            seq = 0
            if self.mode == "record":
                seq = self._db.execute("SELECT COUNT(*) FROM exchanges WHERE fingerprint = ?", (key,)).fetchone()[0]
            self._db.execute("INSERT OR REPLACE INTO exchanges VALUES (?, ?, ?, ?, ?, ?)",
                             (key, seq, _node(), scrub_text(canonical_request(prompt, llm_string)),
                              _model_name(llm_string), reply))

    def clear(self, **kwargs: Any) -> None:
        """Forget every exchange."""
        with self._lock:
            self._db.execute("DELETE FROM exchanges")

    # -- reading ---------------------------------------------------------------------------------------
    def exchanges(self) -> Iterator[Exchange]:
        """Every kept exchange, by fingerprint and order."""
        rows = self._db.execute("SELECT fingerprint, seq, node, model, request, reply FROM exchanges "
                                "ORDER BY fingerprint, seq").fetchall()
        for key, seq, node, model, request, reply in rows:
            failure = _failure(reply)
            yield Exchange(key, seq, node, model, request, [] if failure else _loads(reply), failure)

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM exchanges").fetchone()[0])

    def unused(self) -> int:
        """Replay: how many recorded exchanges the replay did not ask for (a run that stopped early, or asked
        fewer times)."""
        return len(self) - sum(self._served.values())

    def close(self) -> None:
        self._db.close()


@contextmanager
def using(recording: Recording | None) -> Iterator[Recording | None]:
    """Make ``recording`` LangChain's cache for the block (every model without a cache of its own uses it),
    then put back what was there."""
    if recording is None:
        yield None
        return
    before = get_llm_cache()
    set_llm_cache(recording)
    try:
        yield recording
    finally:
        set_llm_cache(before)


class ReplayFailed(KGAgentsError, RuntimeError):
    """A replay met requests its recording lacks (see :class:`ReplayDivergence`)."""


def check_replay(recording: Recording | None) -> None:
    """After a replay: fail if the run met a request its recording lacks, even one the workflow degraded
    around (a divergence is reported, never papered over)."""
    if recording is not None and recording.divergences:
        count = len(recording.divergences)
        raise ReplayFailed(f"the replay diverged from its recording at {count} request(s); the first: "
                           f"{recording.divergences[0]}")
