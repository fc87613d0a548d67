"""CRAG's mock KG API: its functions — names, arguments, endpoints, payloads — and how calls are compared.

The names CRAG's Python wrapper gives the functions (``music_get_members``,
``finance_get_price_history``, ...) are the *relations* Agent-G chooses from in CRAG mode
(:func:`relation_types`). The client (:mod:`kgagents.tools.crag.client`), the saved calls
(:mod:`kgagents.tools.crag.calls`) and the mock server (:mod:`kgagents.tools.crag.server`) all bind and check
arguments here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kgagents.core.errors import KGAgentsError

#: The domains as the API names them (Agent-G's "encyclopedia" is the API's "open").
DOMAINS = ("open", "movie", "finance", "music", "sports")


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
            named = next((p for p in self.params if name in (p.name, p.key)), None)
            if named is None:
                raise CragAPIError(f"{self.signature()} has no argument {name!r}", "arguments")
            if named.name in values:
                raise CragAPIError(f"{self.signature()}: {named.name} given twice", "arguments")
            values[named.name] = value
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
