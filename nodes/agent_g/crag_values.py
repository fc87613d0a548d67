"""CRAG's API for Agent-G's graph module: the action's domain, relations and entity kinds as the API's
functions and arguments, and the API's results verbalised as reasoning paths
(:mod:`kgagents.nodes.agent_g.crag_paths` runs the retrieval)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kgagents.tools.crag_api import (
    FUNCTIONS,
    Function,
)

ARROW = " → "
#: Agent-G's domain names → the API's.
DOMAIN_ALIASES = {"encyclopedia": "open", "open": "open", "music": "music", "movie": "movie",
                  "movies": "movie", "film": "movie", "finance": "finance", "sports": "sports",
                  "sport": "sports"}
#: Words of an entity type that give its kind, per domain (first match wins; ``open`` takes any entity).
TYPE_WORDS: dict[str, list[tuple[frozenset[str], tuple[str, ...]]]] = {
    "music": [(frozenset({"artist"}), ("artist", "band", "singer", "musician", "group", "rapper", "composer",
                                       "songwriter", "performer", "person", "people", "member", "dj")),
              (frozenset({"song"}), ("song", "track", "single", "album", "work", "record", "title")),
              (frozenset({"year"}), ("year",)), (frozenset({"date"}), ("date", "day")),
              (frozenset({"rank"}), ("rank", "position")), (frozenset({"attribute"}), ("attribute",))],
    "movie": [(frozenset({"movie_id"}), ("movie id", "movie_id", "film id")),
              (frozenset({"person_id"}), ("person id", "person_id")),
              (frozenset({"person"}), ("person", "people", "actor", "actress", "director", "producer",
                                       "writer", "cast", "crew", "star", "celebrity")),
              (frozenset({"movie"}), ("movie", "film", "title", "show", "series", "franchise")),
              (frozenset({"year"}), ("year",))],
    "finance": [(frozenset({"ticker"}), ("ticker", "symbol")),
                (frozenset({"company", "ticker"}), ("company", "corporation", "business", "organization",
                                                    "organisation", "firm", "brand", "stock", "fund", "etf",
                                                    "index"))],
    "sports": [(frozenset({"date"}), ("date", "day")), (frozenset({"game_ids"}), ("game",)),
               (frozenset({"team"}), ("team", "club"))],
}
NAMED_KINDS = frozenset({"entity", "artist", "song", "person", "movie", "company", "ticker", "team"})
#: Result fields whose ids another function resolves (radius 2).
ID_FIELDS = {"acted_movies": "movie_get_movie_info_by_id", "directed_movies": "movie_get_movie_info_by_id",
             "movie_list": "movie_get_movie_info_by_id"}
MAX_VALUE_CHARS = 200
PATHS_PER_CALL = 120
PATHS_PER_RESOLVED = 12
MAX_PATHS = 1500
MAX_RESOLVED_IDS = 6
MAX_OPTIONS = 3
MAX_COMBINATIONS = 8
MAX_DEPTH = 4
CONCURRENT_CALLS = 4
DATE_FORMATS = ("%Y-%m-%d", "%B %d, %Y", "%b %d, %Y", "%m/%d/%Y", "%d %B %Y", "%d %b %Y", "%B %d %Y")


@dataclass(frozen=True)
class Linked:
    """A topic entity (or value) as the API takes it: ``value`` is the argument, ``label`` how paths name it;
    ``record`` is the entity's record when linking found one (a movie's or person's)."""

    label: str
    value: Any
    record: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    named: bool = True


# ------------------------------------------------------------------------------------------------------------
# The action's domain, relations and entity kinds
# ------------------------------------------------------------------------------------------------------------
def api_domain(domain: str | None) -> str | None:
    """The API domain of an action's domain (``encyclopedia`` → ``open``); None for an unknown one."""
    return DOMAIN_ALIASES.get((domain or "").strip().lower())


def resolve_relations(relations: Sequence[str], domain: str | None) -> tuple[list[Function], list[str]]:
    """The useful relations as functions of ``domain`` (or of any domain when it is None), with notes for the
    others. ``get_members`` is read as ``music_get_members`` in the music domain."""
    found: list[Function] = []
    unknown: list[str] = []
    elsewhere: list[str] = []
    for relation in dict.fromkeys(r.strip() for r in relations if r and r.strip()):
        name = relation.lower().replace(" ", "_").removeprefix("api.")
        fn = FUNCTIONS.get(name) or (FUNCTIONS.get(f"{domain}_{name}") if domain else None)
        if fn is None and domain is None:
            fn = next((f for f in FUNCTIONS.values() if f.name.split("_", 1)[1] == name), None)
        if fn is None:
            unknown.append(relation)
        elif domain is not None and fn.domain != domain:
            elsewhere.append(relation)
        elif fn not in found:
            found.append(fn)
    notes = []
    if unknown:
        notes.append(f"relations not in CRAG's API: {', '.join(unknown)}")
    if elsewhere:
        notes.append(f"relations of another domain than {domain}: {', '.join(elsewhere)}")
    return found, notes


def entity_kinds(entity_type: str, domain: str) -> frozenset[str] | None:
    """The kinds of argument an entity of this type can fill in ``domain``; None when its type says nothing
    (it may fill any named argument)."""
    if domain == "open":
        return frozenset({"entity"})
    text = (entity_type or "").strip().lower().replace("_", " ")
    if not text:
        return None
    for kinds, words in TYPE_WORDS.get(domain, []):
        if any(word.replace("_", " ") in text for word in words):
            return kinds
    return None


def value_of(kind: str, text: str, *, typed: bool) -> Any:
    """The value an entity's name gives an argument of a value kind (a year, a date, a rank, an id), or None.
    A typed entity may wrap its value in words; an untyped one must be the value itself."""
    text = text.strip()
    if kind == "date":
        iso = re.search(r"\b(\d{4}-\d{2}-\d{2})\b", text)
        if iso:
            return iso.group(1)
        for fmt in DATE_FORMATS:
            try:
                return datetime.strptime(text, fmt).strftime("%Y-%m-%d")
            except ValueError:
                continue
        return None
    if kind == "year":
        year = r"(1[89]\d\d|20\d\d)"
        match = re.search(rf"\b{year}\b", text) if typed else re.fullmatch(year, text)
        return match.group(1) if match else None
    if kind in ("rank", "movie_id", "person_id"):
        match = re.search(r"\d+", text) if typed else re.fullmatch(r"#?(\d+)", text)
        if not match:
            return None
        number = int(match.group(match.lastindex or 0))
        return number if kind != "rank" or 1 <= number <= 100 else None
    if kind == "game_ids":
        ids = re.findall(r"\b\d{8,12}\b", text)
        return ids or None
    if kind == "attribute":
        name = "_".join(text.lower().split())
        return name if name in ("rank_last_week", "weeks_in_chart", "top_position", "rank") else None
    return None


# ------------------------------------------------------------------------------------------------------------
# Verbalising results
# ------------------------------------------------------------------------------------------------------------
def _cut(value: Any) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _identifier(key: Any) -> bool:
    return isinstance(key, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_ %]*", key) is not None


def _row_label(key: str, row: dict[str, Any]) -> str:
    """A table row's name: the game it describes, else its key (a pandas index tuple read as words)."""
    for column in ("matchup_home", "game_id", "name", "title"):
        if row.get(column) not in (None, ""):
            return _cut(row[column])
    if key.startswith("("):
        try:
            parts = ast.literal_eval(key)
            if isinstance(parts, tuple):
                return _cut(" ".join(str(p) for p in parts))
        except (ValueError, SyntaxError):
            pass
    return f"row {key}" if key.isdigit() else _cut(key)


def column_table(value: dict[str, Any]) -> list[tuple[str, dict[str, Any]]] | None:
    """A column-oriented table (``{column: {row: value}}``, as pandas writes one) as named rows; None if the
    dict is not one. Columns are names; rows are not (an index: ``"0"``,
    ``"('ENG-Premier League', ...)"``)."""
    if len(value) < 2 or not all(isinstance(v, dict) for v in value.values()):
        return None
    if not all(map(_identifier, value)):
        return None
    columns = [v for v in value.values() if v]
    if not columns or any(set(c) != set(columns[0]) for c in columns):
        return None
    if all(_identifier(k) for k in columns[0]):
        return None
    rows = []
    for key in columns[0]:
        row = {name: cells[key] for name, cells in value.items() if key in cells}
        rows.append((_row_label(str(key), row), row))
    return rows


def _items(value: dict[str, Any]) -> list[tuple[Any, Any]]:
    """A dict's items; keyed by dates (price histories), the most recent first."""
    items = list(value.items())
    if items and all(isinstance(k, str) and re.match(r"\d{4}-\d{2}-\d{2}", k) for k, _ in items):
        items.sort(key=lambda kv: kv[0], reverse=True)
    return items


def label_of_record(record: dict[str, Any]) -> tuple[str | None, str | None]:
    for key in ("name", "title", "id"):
        if record.get(key) not in (None, ""):
            return key, _cut(record[key])
    return None, None


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _walk(parts: list[str], value: Any, depth: int, shallow: bool) -> Iterator[list[str]]:
    if value is None or value == "" or value == [] or value == {}:
        return
    if _scalar(value):
        yield [*parts, _cut(value)]
        return
    if shallow and depth >= 1 and not (isinstance(value, list) and all(map(_scalar, value))):
        return  # shallow: a record's own fields and lists of values only
    if depth >= MAX_DEPTH:
        yield [*parts, _cut(json.dumps(value, ensure_ascii=False, default=str))]
        return
    if isinstance(value, dict):
        table = column_table(value)
        if table is not None:
            for label, row in table:
                yield from _walk([*parts, label], row, depth + 1, shallow)
            return
        for key, item in _items(value):
            yield from _walk([*parts, _cut(key)], item, depth + 1, shallow)
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, dict):
                label_key, record_label = label_of_record(item)
                rest = {k: v for k, v in item.items() if k != label_key}
                yield from _walk([*parts, record_label] if record_label else parts, rest, depth + 1, shallow)
            else:
                yield from _walk(parts, item, depth + 1, shallow)
        return
    yield [*parts, _cut(value)]


def verbalise(head: Sequence[str], value: Any, *, limit: int = PATHS_PER_CALL, shallow: bool = False
              ) -> tuple[list[str], bool]:
    """The reasoning paths of one result, ``head → ... → value``, at most ``limit`` of them; and whether there
    were more. ``shallow``: only the result's own fields and lists of values (no nested records)."""
    out: list[str] = []
    for parts in _walk(list(head), value, 0, shallow):
        if len(out) == limit:
            return out, True
        out.append(ARROW.join(parts))
    return out, False


