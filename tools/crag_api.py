"""CRAG's mock knowledge-graph API: its functions, an async client, and a local server of saved answers.

CRAG (Meta's Comprehensive RAG benchmark) serves the knowledge graphs of its five domains through a web
service, the "mock KG API": one ``POST`` endpoint per function, ``{server}/{domain}/{function}`` (sports also
names the sport: ``/sports/nba/get_games_on_date``), a JSON body (``{"query": ...}`` for one-argument
functions) and the answer as ``{"result": ...}``. The names CRAG's Python wrapper gives the functions
(``music_get_members``, ``finance_get_price_history``, ...) are the *relations* Agent-G chooses from in CRAG
mode (:func:`relation_types`).

- :data:`FUNCTIONS`: every function of the wrapper, with its arguments, endpoint and payload keys;
- :class:`CragAPI`: ``await api.call("music_get_members", "Maroon 5")`` → the ``result`` value, or a
  :class:`CragAPIError` that says what went wrong (server down, HTTP error, malformed body, unknown function,
  wrong arguments), with bounded timeouts;
- :class:`CragMockServer` / ``python -m kgagents.tools.crag_api serve``: CRAG's endpoints served from saved calls
  (``{"calls": [{"call": "api.fn(args)", "output_repr_truncated": "<repr>"}]}``, by default the 40 calls that
  ship with kgagents in ``evals/data/crag/``). A saved call answers its saved ``result`` (a cut output
  recovered as far as it parses); names match case-insensitively; a call that was not saved answers what
  CRAG's API answers for an entity it does not know (:attr:`Function.empty`: ``null`` for a lookup, ``[]`` for
  a search or a list, ``0`` for a count, ``[null, null]`` for a pair). The ``x-crag-mock`` header says which
  (``saved``, ``saved-truncated``, ``not-saved``).

The real service (CRAG's ``mock_api/server.py`` with its data) listens on ``http://127.0.0.1:8000`` by
default; its address is given as ``CRAG_SERVER`` (the wrapper's variable) or, for Agent-G, the
``crag_api_url`` setting.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import difflib
import importlib.util
import json
import math
import os
import re
import socket
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx

from kgagents.core.errors import KGAgentsError
from kgagents.core.extras import require

ENV_VAR = "CRAG_SERVER"
#: The domains as the API names them (Agent-G's "encyclopedia" is the API's "open").
DOMAINS = ("open", "movie", "finance", "music", "sports")
CALLS_FILE = ("data", "crag", "crag_mock_api_example_calls.json")
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0


class CragAPIError(KGAgentsError, RuntimeError):
    """A call of CRAG's API failed. ``kind``: ``unreachable``, ``timeout``, ``http``, ``malformed``,
    ``unknown-function`` or ``arguments``."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


# ------------------------------------------------------------------------------------------------------------
# The functions
# ------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    """One argument: its name in the wrapper, its key in the JSON body, the kind of value it takes."""

    name: str
    key: str
    kind: str
    """What fills it: a named entity (``entity``, ``artist``, ``song``, ``person``, ``movie``, ``company``,
    ``ticker``, ``team``) or a value (``year``, ``date``, ``rank``, ``attribute``, ``movie_id``,
    ``person_id``, ``game_ids``)."""
    type: type = str
    optional: bool = False
    choices: tuple[str, ...] = ()

    def coerce(self, value: Any, function: str) -> Any:
        """The value as the endpoint takes it (a number given as text becomes a number), or an error."""
        if value is None:
            if self.optional:
                return None
            raise CragAPIError(f"{function}: {self.name} is required", "arguments")
        if self.type is int:
            whole = isinstance(value, (int, str)) and not isinstance(value, bool)
            if not whole or not re.fullmatch(r"\s*-?\d+\s*", str(value)):
                raise CragAPIError(f"{function}: {self.name} must be a whole number, not {value!r}",
                                   "arguments")
            return int(value)
        if self.type is list:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, (str, int)) for v in value):
                raise CragAPIError(f"{function}: {self.name} must be a list of ids, not {value!r}",
                                   "arguments")
            return [str(v) for v in value]
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise CragAPIError(f"{function}: {self.name} must be text, not {value!r}", "arguments")
        return str(value)


@dataclass(frozen=True)
class Function:
    """One function of CRAG's API as its Python wrapper exposes it."""

    name: str
    params: tuple[Param, ...]
    empty: Any
    """What the API answers for an entity it does not know (the mock server's answer to a call not saved)."""
    description: str
    default: bool = False
    """Followed when the agent names no usable relation for an entity of its first argument's kind."""
    links: bool = False
    """A search that links a name to the API's entities (its answer: candidates)."""

    @property
    def domain(self) -> str:
        return self.name.split("_", 1)[0]

    @property
    def path(self) -> str:
        """The endpoint: ``/music/get_members``; sports functions name their sport, ``/sports/nba/...``."""
        domain, rest = self.name.split("_", 1)
        if domain == "sports":
            sport, rest = rest.split("_", 1)
            return f"/sports/{sport}/{rest}"
        return f"/{domain}/{rest}"

    def signature(self) -> str:
        return f"{self.name}({', '.join(p.name + ('=None' if p.optional else '') for p in self.params)})"

    def bind(self, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The JSON body of a call with these arguments (positional in the wrapper's order, or by name)."""
        kwargs = dict(kwargs or {})
        if len(args) > len(self.params):
            raise CragAPIError(f"{self.signature()} takes {len(self.params)} argument(s), {len(args)} given",
                               "arguments")
        values: dict[str, Any] = {}
        for param, value in zip(self.params, args, strict=False):
            values[param.name] = value
        for name, value in kwargs.items():
            param = next((p for p in self.params if name in (p.name, p.key)), None)
            if param is None:
                raise CragAPIError(f"{self.signature()} has no argument {name!r}", "arguments")
            if param.name in values:
                raise CragAPIError(f"{self.signature()}: {param.name} given twice", "arguments")
            values[param.name] = value
        return self.check({p.key: values.get(p.name) for p in self.params})

    def check(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """A JSON body checked and coerced (what the endpoint accepts), or an ``arguments`` error."""
        unknown = sorted(set(payload) - {p.key for p in self.params})
        if unknown:
            raise CragAPIError(f"{self.signature()}: unexpected field(s) {', '.join(unknown)}", "arguments")
        out = {p.key: p.coerce(payload.get(p.key), self.name) for p in self.params}
        for p in self.params:
            if p.choices and out[p.key] is not None and out[p.key] not in p.choices:
                raise CragAPIError(f"{self.name}: {p.name} must be one of {', '.join(p.choices)}",
                                   "arguments")
        return out


def _fn(name: str, params: str, empty: Any, description: str, *, default: bool = False,
        links: bool = False, **special: Param) -> Function:
    """A function from a compact parameter list ``"name:kind"`` (each a ``query`` argument unless
    ``special`` says otherwise)."""
    out = []
    for spec in params.split():
        pname, kind = spec.split(":")
        out.append(special.get(pname) or Param(pname, "query", kind, int if kind in ("movie_id", "person_id")
                                                else str))
    return Function(name, tuple(out), empty, description, default=default, links=links)


BILLBOARD_ATTRIBUTES = ("rank_last_week", "weeks_in_chart", "top_position", "rank")
_YEAR_INT = Param("year", "query", "year", int)

#: Every function of CRAG's API (its wrapper ``pycragapi.CRAG``), by domain.
FUNCTIONS: dict[str, Function] = {f.name: f for f in [
    _fn("open_search_entity_by_name", "query:entity", [], "entities whose names match the query (at most 10)",
        links=True),
    _fn("open_get_entity", "entity:entity", None,
        "an entity's details: summary_text, summary_structured (infobox fields), raw_mediawiki",
        default=True),
    _fn("movie_get_person_info", "person_name:person", [],
        "people matching a name (BM25): name, id, acted_movies, directed_movies, birthday, oscar_awards",
        default=True, links=True),
    _fn("movie_get_movie_info", "movie_name:movie", [],
        "movies matching a title (BM25): title, id, release_date, original_language, budget, revenue, "
        "rating, genres, oscar_awards, cast, crew", default=True, links=True),
    _fn("movie_get_year_info", "year:year", None, "a year's movie_list (ids) and oscar_awards (1990-2021)",
        default=True),
    _fn("movie_get_movie_info_by_id", "movie_id:movie_id", None, "a movie by its id"),
    _fn("movie_get_person_info_by_id", "person_id:person_id", None, "a person by their id"),
    _fn("finance_get_company_name", "query:company", [], "company names matching the query", links=True),
    _fn("finance_get_ticker_by_name", "query:company", None, "the ticker symbol of a company name"),
    _fn("finance_get_price_history", "ticker_name:ticker", None,
        "one year of daily Open, High, Low, Close, Volume", default=True),
    _fn("finance_get_detailed_price_history", "ticker_name:ticker", None,
        "the past five days' prices minute by minute"),
    _fn("finance_get_dividends_history", "ticker_name:ticker", None, "dividends by date", default=True),
    _fn("finance_get_market_capitalization", "ticker_name:ticker", None, "market capitalisation",
        default=True),
    _fn("finance_get_eps", "ticker_name:ticker", None, "earnings per share", default=True),
    _fn("finance_get_pe_ratio", "ticker_name:ticker", None, "price-to-earnings ratio", default=True),
    _fn("finance_get_info", "ticker_name:ticker", None, "company and market information", default=True),
    _fn("music_search_artist_entity_by_name", "artist_name:artist", [], "artists whose names match (top 10)",
        links=True),
    _fn("music_search_song_entity_by_name", "song_name:song", [], "songs whose names match (top 10)",
        links=True),
    _fn("music_get_billboard_rank_date", "rank:rank date:date", [None, None],
        "the song(s) and artist(s) at a Billboard Hot 100 rank on a date (every date when none is given)",
        rank=Param("rank", "rank", "rank", int), date=Param("date", "date", "date", optional=True)),
    _fn("music_get_billboard_attributes", "date:date attribute:attribute song_name:song", None,
        "a song's Billboard attribute on a date", date=Param("date", "date", "date"),
        attribute=Param("attribute", "attribute", "attribute", choices=BILLBOARD_ATTRIBUTES),
        song_name=Param("song_name", "song_name", "song")),
    _fn("music_grammy_get_best_artist_by_year", "year:year", [], "the Grammy Best New Artist of a year",
        default=True, year=_YEAR_INT),
    _fn("music_grammy_get_award_count_by_artist", "artist_name:artist", 0, "an artist's Grammy awards",
        default=True),
    _fn("music_grammy_get_award_count_by_song", "song_name:song", 0, "a song's Grammy awards", default=True),
    _fn("music_grammy_get_best_song_by_year", "year:year", [], "the Grammy Song of the Year of a year",
        default=True, year=_YEAR_INT),
    _fn("music_grammy_get_award_date_by_artist", "artist_name:artist", [],
        "the years an artist won a Grammy award", default=True),
    _fn("music_grammy_get_best_album_by_year", "year:year", [], "the Grammy Album of the Year of a year",
        default=True, year=_YEAR_INT),
    _fn("music_grammy_get_all_awarded_artists", "", [], "every Grammy Best New Artist"),
    _fn("music_get_artist_birth_place", "artist_name:artist", None, "an artist's birth country (ISO code)",
        default=True),
    _fn("music_get_artist_birth_date", "artist_name:artist", None, "an artist's birth date (a band's start)",
        default=True),
    _fn("music_get_members", "band_name:artist", None, "a band's members", default=True),
    _fn("music_get_lifespan", "artist_name:artist", [None, None], "an artist's birth and death dates",
        default=True),
    _fn("music_get_song_author", "song_name:song", None, "a song's author", default=True),
    _fn("music_get_song_release_country", "song_name:song", None, "a song's release country (ISO code)",
        default=True),
    _fn("music_get_song_release_date", "song_name:song", None, "a song's release date", default=True),
    _fn("music_get_artist_all_works", "artist_name:artist", None, "an artist's works", default=True),
    _fn("sports_soccer_get_games_on_date", "date:date team_name:team", None,
        "soccer games on a date (of one team): date, time, result, GF, GA, opponent, xG, xGA, Poss, ...",
        default=True, date=Param("date", "date", "date"),
        team_name=Param("team_name", "team_name", "team", optional=True)),
    _fn("sports_nba_get_games_on_date", "date:date team_name:team", None,
        "NBA games on a date (of one team): teams, wl_home, pts_home, pts_away, game_id, ...", default=True,
        date=Param("date", "date", "date"), team_name=Param("team_name", "team_name", "team", optional=True)),
    _fn("sports_nba_get_play_by_play_data_by_game_ids", "game_ids:game_ids", None,
        "play-by-play events of NBA games", game_ids=Param("game_ids", "game_ids", "game_ids", list)),
]}


def relation_types() -> list[str]:
    """The API's function names: the relations Agent-G's agent picks from in CRAG mode."""
    return list(FUNCTIONS)


def domain_functions(domain: str) -> list[Function]:
    """The functions of one API domain (``open``, ``movie``, ``finance``, ``music``, ``sports``)."""
    return [f for f in FUNCTIONS.values() if f.domain == domain]


def function(name: str) -> Function:
    """The function called ``name``; an unknown name is an ``unknown-function`` error with suggestions."""
    found = FUNCTIONS.get(name)
    if found is None:
        near = difflib.get_close_matches(name, FUNCTIONS, n=3)
        hint = f"did you mean {', '.join(near)}?" if near else f"see the {', '.join(DOMAINS)} functions"
        raise CragAPIError(f"CRAG's API has no function {name!r}; {hint}", "unknown-function")
    return found


def api_url(explicit: str | None = None) -> str | None:
    """The API's address: ``explicit``, else ``$CRAG_SERVER``, else None (not configured)."""
    url = (explicit or os.environ.get(ENV_VAR) or "").strip()
    return url.rstrip("/") or None


# ------------------------------------------------------------------------------------------------------------
# The client
# ------------------------------------------------------------------------------------------------------------
class CragAPI:
    """An async client of CRAG's API at ``url``. Use it as ``async with CragAPI(url) as api`` to share one
    connection pool between calls, or call it directly (each call then opens its own)."""

    def __init__(self, url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> None:
        if not url or not re.match(r"^https?://", url):
            raise CragAPIError(f"the CRAG API address must be an http(s) URL, not {url!r}", "arguments")
        self.url = url.rstrip("/")
        self.timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> Self:
        self._client = httpx.AsyncClient(timeout=self.timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The ``result`` of ``name(*args, **kwargs)``; a :class:`CragAPIError` for anything else."""
        fn = function(name)
        payload = fn.bind(args, kwargs)
        url = self.url + fn.path
        try:
            if self._client is not None:
                response = await self._post(self._client, url, payload)
            else:
                async with httpx.AsyncClient(timeout=self.timeout) as client:
                    response = await self._post(client, url, payload)
        except httpx.TimeoutException as exc:
            raise CragAPIError(f"the CRAG API at {self.url} did not answer {name} in time "
                               f"({type(exc).__name__})", "timeout") from exc
        except httpx.HTTPError as exc:
            raise CragAPIError(f"the CRAG API at {self.url} cannot be reached ({type(exc).__name__}: {exc}); "
                               "is the server running? (python -m kgagents.tools.crag_api serve starts a local mock)",
                               "unreachable") from exc
        if response.status_code >= 400:
            raise CragAPIError(f"{name}: the CRAG API answered HTTP {response.status_code}: "
                               f"{response.text[:300]}", "http")
        try:
            body = response.json()
        except ValueError as exc:
            raise CragAPIError(f"{name}: the CRAG API's answer is not JSON: {response.text[:200]!r}",
                               "malformed") from exc
        if not isinstance(body, dict) or "result" not in body:
            raise CragAPIError(f"{name}: the CRAG API's answer has no \"result\": {str(body)[:200]}",
                               "malformed")
        return body["result"]

    @staticmethod
    async def _post(client: httpx.AsyncClient, url: str, payload: dict[str, Any]) -> httpx.Response:
        headers = {"accept": "application/json"}
        if not payload:
            return await client.post(url, headers=headers)  # the wrapper sends no body without arguments
        return await client.post(url, json=payload, headers=headers)


# ------------------------------------------------------------------------------------------------------------
# Saved calls
# ------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SavedCall:
    function: str
    payload: dict[str, Any]
    result: Any
    truncated: bool


def default_calls_file() -> Path:
    """The saved calls that ship with kgagents (``evals/data/crag/``), found without importing
    :mod:`evals`."""
    spec = importlib.util.find_spec("evals")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder).joinpath(*CALLS_FILE)
        if path.is_file():
            return path
    raise FileNotFoundError("the saved CRAG calls that ship with kgagents (evals/data/crag/"
                            "crag_mock_api_example_calls.json) are missing; give a calls file")


def jsonable(value: Any) -> Any:
    """A Python value as JSON values: tuples become lists, keys text, NaN and infinities null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    return value


def _recovered(text: str) -> Any:
    """A saved output as a value: the whole literal, or as much of a cut one as parses. A string cut off is
    closed with "…" first, so that its beginning survives (a number cut off is dropped: its digits would
    lie)."""
    from kgagents.tools.pgraph.loaders import parse_repr

    best, best_size = None, -1
    for closer in ("", "…',", '…",'):  # the comma lets parse_repr cut right after the closed string
        try:
            value = parse_repr(text + closer)
        except ValueError:
            continue
        if _holds_a_set(value):
            continue  # a dict cut inside a key reads as a set: never an answer of the API
        size = len(json.dumps(jsonable(value), default=str))
        if size > best_size:
            best, best_size = value, size
    if best_size < 0:
        raise ValueError("not a Python literal, even cut short")
    return best


def _holds_a_set(value: Any) -> bool:
    if isinstance(value, (set, frozenset)):
        return True
    if isinstance(value, dict):
        return any(_holds_a_set(v) for v in value.values())
    return isinstance(value, (list, tuple)) and any(_holds_a_set(v) for v in value)


def _parse_call(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """``api.fn(arg, name=value)`` → ``("fn", [arg], {"name": value})`` (literal arguments only)."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"not a call: {exc.msg}") from exc
    if not isinstance(node, ast.Call):
        raise ValueError("not a call")  # noqa: TRY004 - a malformed calls file, like every error here
    target = node.func
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    try:
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
    except ValueError as exc:
        raise ValueError(f"arguments must be literals: {exc}") from exc
    return name, args, kwargs


def load_calls(path: str | Path) -> list[SavedCall]:
    """The saved calls of a file ``{"calls": [{"call": "api.fn(args)", "output...": "<repr>"}]}`` (or the
    list); errors name the file and the call."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"cannot read the CRAG calls file {path}: {exc}") from exc
    calls = data.get("calls") if isinstance(data, dict) else data
    if not isinstance(calls, list):
        raise ValueError(f"{path}: expected {{\"calls\": [{{\"call\": \"api.fn(args)\", "  # noqa: TRY004 - data
                         "\"output_repr_truncated\": ...}]}")
    out = []
    for n, entry in enumerate(calls):
        where = f"{path}, call {n}"
        if not isinstance(entry, dict) or not isinstance(entry.get("call"), str):
            raise ValueError(f"{where}: no \"call\"")  # noqa: TRY004 - a malformed file, not a wrong type
        key = next((k for k in entry if k.startswith("output") and isinstance(entry[k], str)), None)
        if key is None:
            raise ValueError(f"{where} ({entry['call'][:80]}): no output")
        try:
            name, args, kwargs = _parse_call(entry["call"])
            fn = function(name)
            payload = fn.bind(args, kwargs)
            answer = _recovered(entry[key])
        except (ValueError, CragAPIError) as exc:
            raise ValueError(f"{where} ({entry['call'][:80]}): {exc}") from exc
        result = answer["result"] if isinstance(answer, dict) and "result" in answer else answer
        cut = int(entry.get("output_chars") or 0) > len(entry[key])
        out.append(SavedCall(fn.name, payload, jsonable(result), cut))
    return out


def fold(name: str) -> str:
    """A name as names are compared: case-folded, its spaces collapsed."""
    return " ".join(name.casefold().split())


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return fold(value)
    if isinstance(value, list):
        return tuple(_norm(v) for v in value)
    return value


def call_key(fn: Function, payload: Mapping[str, Any]) -> tuple[Any, ...]:
    """What identifies a call for the mock server (and a cache): the function and its folded arguments."""
    return (fn.name, *(_norm(payload.get(p.key)) for p in fn.params))


# ------------------------------------------------------------------------------------------------------------
# The mock server
# ------------------------------------------------------------------------------------------------------------
def mock_app(calls: Sequence[SavedCall]) -> Any:
    """A Starlette app with CRAG's endpoints, answering from ``calls``."""
    require("starlette", "CRAG's mock KG API server")
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    saved = {call_key(FUNCTIONS[c.function], c.payload): c for c in calls}

    def endpoint(fn: Function) -> Callable[[Request], Any]:
        async def answer(request: Request) -> JSONResponse:
            raw = await request.body()
            try:
                body = json.loads(raw) if raw.strip() else {}
            except ValueError as exc:
                return JSONResponse({"detail": f"the body is not JSON: {exc}"}, status_code=422)
            if not isinstance(body, dict):
                return JSONResponse({"detail": "the body must be a JSON object"}, status_code=422)
            try:
                payload = fn.check(body)
            except CragAPIError as exc:
                return JSONResponse({"detail": str(exc)}, status_code=422)
            call = saved.get(call_key(fn, payload))
            if call is None:
                return JSONResponse({"result": fn.empty}, headers={"x-crag-mock": "not-saved"})
            return JSONResponse({"result": call.result},
                                headers={"x-crag-mock": "saved-truncated" if call.truncated else "saved"})
        return answer

    async def root(request: Request) -> JSONResponse:
        return JSONResponse({"message": f"CRAG mock API: {len(saved)} saved call(s) of {len(FUNCTIONS)} "
                                        "functions"})

    routes = [Route("/", root, methods=["GET"])]
    routes += [Route(fn.path, endpoint(fn), methods=["POST"]) for fn in FUNCTIONS.values()]
    return Starlette(routes=routes)


@dataclass
class CragMockServer:
    """CRAG's API served from saved calls on a loopback port, in a background thread::

        with CragMockServer() as server:       # the calls that ship with kgagents, a free port
            api = CragAPI(server.url)
    """

    calls_file: str | Path | None = None
    host: str = "127.0.0.1"
    port: int = 0
    """0: a free port (the one bound is in :attr:`url`)."""
    start_timeout_s: float = 10.0
    calls: list[SavedCall] = field(default_factory=list, init=False)
    _server: Any = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _socket: socket.socket | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        if self._socket is None:
            raise RuntimeError("the CRAG mock server is not running")
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> CragMockServer:
        uvicorn = require("uvicorn", "CRAG's mock KG API server")

        self.calls = load_calls(self.calls_file or default_calls_file())
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise OSError(f"the CRAG mock server cannot listen on {self.host}:{self.port}: {exc}") from exc
        self._socket = sock
        config = uvicorn.Config(mock_app(self.calls), log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="crag-mock-api", daemon=True)
        self._thread.start()
        deadline = self.start_timeout_s
        while not self._server.started and self._thread.is_alive() and deadline > 0:
            threading.Event().wait(0.02)
            deadline -= 0.02
        if not self._server.started:
            self.stop()
            raise RuntimeError(f"the CRAG mock server did not start within {self.start_timeout_s:g} s")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server, self._thread, self._socket = None, None, None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ------------------------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------------------------
def _argument(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def main(argv: Sequence[str] | None = None) -> int:
    """``serve`` the mock API, ``call`` a function of an API, or list the ``functions``."""
    parser = argparse.ArgumentParser(prog="python -m kgagents.tools.crag_api", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve CRAG's endpoints from saved calls")
    serve.add_argument("--calls", help="saved calls (default: the 40 that ship with kgagents)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    call = sub.add_parser("call", help="call a function, e.g. call music_get_members 'Maroon 5'")
    call.add_argument("function")
    call.add_argument("args", nargs="*", help="arguments (JSON values, else text)")
    call.add_argument("--url", help=f"the API (default: ${ENV_VAR})")
    sub.add_parser("functions", help="list the functions")
    args = parser.parse_args(argv)
    if args.command == "functions":
        for fn in FUNCTIONS.values():
            print(f"{fn.signature():70} POST {fn.path}")
        return 0
    if args.command == "call":
        url = api_url(args.url)
        if url is None:
            print(f"no API address: give --url or set {ENV_VAR}", file=sys.stderr)
            return 2
        try:
            result = asyncio.run(CragAPI(url).call(args.function, *map(_argument, args.args)))
        except CragAPIError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    uvicorn = require("uvicorn", "CRAG's mock KG API server")

    try:
        calls = load_calls(args.calls or default_calls_file())
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"CRAG mock API: {len(calls)} saved call(s) at http://{args.host}:{args.port} "
          f"(export {ENV_VAR}=http://{args.host}:{args.port})", file=sys.stderr)
    uvicorn.run(mock_app(calls), host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
