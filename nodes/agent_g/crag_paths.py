"""Agent-G's graph retrieval module for CRAG (paper 004, §2.2 and §3.2): reasoning paths from CRAG's knowledge
graphs, which are reachable only through CRAG's mock KG API (:mod:`kgagents.tools.crag_api`).

From the agent's action ``{domain, entities, relations}``:

1. **Domain**: the API domain of the action's domain (``encyclopedia`` is the API's ``open``); without a known
   one, the domain of the useful relations, else ``open`` (CRAG's catch-all).
2. **Relations**: each useful relation is a function of that domain (``music_get_members``, or ``get_members``
   with the domain's prefix left out); unknown ones and those of another domain are noted; when none is
   usable, the domain's functions for each entity's kind are followed (an artist's members, birth place,
   awards, ...).
3. **Entity linking**: each topic entity is linked through the domain's search function for its kind
   (``open_search_entity_by_name``, ``music_search_artist_entity_by_name`` / ``..._song_...``,
   ``movie_get_person_info`` / ``movie_get_movie_info``, ``finance_get_company_name`` then
   ``finance_get_ticker_by_name``): the candidate with the same name (case-insensitive), else the one nearest
   by vector similarity. A name a search does not find is used as written (CRAG's lookups take exact names).
   Values (years, dates, ranks, ids) come from the entities that are values.
4. **Paths**: each relation is called with the linked entities, and its result verbalised as reasoning paths
   ``{entity} → {function} → {value}`` — a dict gives ``{entity} → {function} → {key} → {value}`` per field, a
   list one path per item, a table (sports) one row at a time; long values are cut.
5. **Radius 2**: movie ids in a result (``acted_movies``, ``directed_movies``, ``movie_list``) are resolved
   with ``movie_get_movie_info_by_id``, a few per retrieval, extending their paths.
6. **Ranking**: the paths by vector similarity to the question (:func:`kgagents.nodes.retriever_bank.rank_texts`); the
   top ``top_k`` are the references.

Every problem is a note of the retrieval (no API configured, the API down, an entity not found, a relation
unknown or of another domain, an empty result), never an exception: the commentor reads the notes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kgagents.nodes.agent_g.context import AgentGContext
from kgagents.nodes.agent_g.crag_values import (
    CONCURRENT_CALLS,
    ID_FIELDS,
    MAX_COMBINATIONS,
    MAX_OPTIONS,
    MAX_PATHS,
    MAX_RESOLVED_IDS,
    NAMED_KINDS,
    PATHS_PER_CALL,
    PATHS_PER_RESOLVED,
    Linked,
    api_domain,
    entity_kinds,
    label_of_record,
    resolve_relations,
    value_of,
    verbalise,
)
from kgagents.nodes.agent_g.state import Action
from kgagents.nodes.retriever_bank import Reference, Retrieval, TopicEntity, rank_texts
from kgagents.tools.crag_api import (
    FUNCTIONS,
    CragAPI,
    CragAPIError,
    Function,
    Param,
    api_url,
    call_key,
    domain_functions,
    fold,
)


# ------------------------------------------------------------------------------------------------------------
# One retrieval
# ------------------------------------------------------------------------------------------------------------
@dataclass
class _Retrieval:
    """The state of one graph retrieval: the API session, what was linked and called, and the notes."""

    api: CragAPI
    domain: str
    embedder: Any
    notes: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    """Calls that answered nothing (one note for all of them)."""
    down: str | None = None
    """Why the API cannot be used (unreachable, too slow): no call is made after that."""
    calls: dict[tuple[Any, ...], asyncio.Future[Any]] = field(default_factory=dict)
    links: dict[tuple[str, str], asyncio.Future[Linked | None]] = field(default_factory=dict)
    lock: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(CONCURRENT_CALLS))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    async def call(self, fn: Function, *args: Any) -> Any:
        """The result of one call (made once, however many ask for it), or None after a note when it failed
        or the API is down."""
        if self.down is not None:
            return None
        try:
            key = call_key(fn, fn.bind(args))
        except CragAPIError as exc:
            self.note(f"{fn.name}: {exc}")
            return None
        if key not in self.calls:
            self.calls[key] = asyncio.ensure_future(self._call(fn, args))
        return await self.calls[key]

    async def _call(self, fn: Function, args: Sequence[Any]) -> Any:
        async with self.lock:
            if self.down is not None:
                return None
            try:
                return await self.api.call(fn.name, *args)
            except CragAPIError as exc:
                if exc.kind in ("unreachable", "timeout"):
                    self.down = str(exc)
                    self.note(str(exc))
                else:
                    self.note(f"{fn.name}({', '.join(map(str, args))}) failed: {exc}")
                return None

    # ---------------------------------------------------------------------------------------------- linking
    async def nearest(self, name: str, candidates: Sequence[str]) -> int:
        """The candidate naming ``name``: the same name ignoring case and spaces, else the nearest by VSS."""
        for i, candidate in enumerate(candidates):
            if fold(str(candidate)) == fold(name):
                return i
        order = await asyncio.to_thread(rank_texts, name, [str(c) for c in candidates], self.embedder)
        return order[0][0]

    async def search(self, fn_name: str, name: str) -> str:
        """A name linked through a search function; the name as written when the search finds nothing."""
        candidates = [c for c in await self.call(FUNCTIONS[fn_name], name) or [] if isinstance(c, str) and c]
        if not candidates:
            if self.down is None:
                self.note(f"{fn_name} found no match for {name!r}: the name is used as written")
            return name
        chosen = candidates[await self.nearest(name, candidates)]
        if fold(chosen) != fold(name):
            self.note(f"{name!r} linked to {chosen!r} (the nearest of {len(candidates)} {fn_name} "
                      "candidates)")
        return chosen

    async def record(self, fn_name: str, name: str, label_keys: Sequence[str]) -> Linked | None:
        """A name linked to the best of the records a search returns (movies, people)."""
        records = [r for r in await self.call(FUNCTIONS[fn_name], name) or [] if isinstance(r, dict)]
        if not records:
            if self.down is None:
                self.note(f"entity not found: {name} ({fn_name} returned no record)")
            return None
        labels = [next((str(r[k]) for k in label_keys if r.get(k)), "") for r in records]
        chosen = await self.nearest(name, labels)
        label = labels[chosen] or name
        if fold(label) != fold(name):
            self.note(f"{name!r} linked to {label!r} (the nearest of {len(records)} {fn_name} records)")
        return Linked(label, label, records[chosen])

    async def ticker(self, name: str, typed_ticker: bool) -> Linked | None:
        """A company or ticker as the ticker symbol the finance functions take."""
        if typed_ticker:
            return Linked(name.upper(), name.upper())
        company = await self.search("finance_get_company_name", name)
        symbol = await self.call(FUNCTIONS["finance_get_ticker_by_name"], company)
        if isinstance(symbol, str) and symbol.strip():
            return Linked(symbol.strip(), symbol.strip())
        if self.down is None and re.fullmatch(r"[A-Z][A-Z.\-]{0,5}", name.strip()):
            self.note(f"no ticker for {company!r}: {name.upper()!r} is taken as the ticker symbol")
            return Linked(name.strip().upper(), name.strip().upper())
        if self.down is None:
            self.note(f"entity not found: {name} (finance_get_ticker_by_name has no ticker for {company!r})")
        return None

    async def link(self, entity: TopicEntity, kind: str) -> Linked | None:
        """A topic entity as an argument of ``kind`` (linked once per entity and kind)."""
        name = entity["name"].strip()
        key = (fold(name), kind)
        if key not in self.links:
            kinds = entity_kinds(entity.get("type", ""), self.domain)
            self.links[key] = asyncio.ensure_future(self._link(name, kind, kinds))
        return await self.links[key]

    def linked(self, entities: Sequence[TopicEntity]) -> dict[str, str]:
        """Each topic entity's name → what it was linked to (its first link, for any kind)."""
        found: dict[str, str] = {}
        for (name, _), link in self.links.items():
            usable = link.done() and not link.cancelled() and link.exception() is None
            result = link.result() if usable else None
            if result is not None:
                found.setdefault(name, result.label)
        return {e["name"]: found[fold(e["name"])] for e in entities if fold(e["name"]) in found}

    async def _link(self, name: str, kind: str, kinds: frozenset[str] | None) -> Linked | None:
        searches = {"entity": "open_search_entity_by_name", "artist": "music_search_artist_entity_by_name",
                    "song": "music_search_song_entity_by_name", "company": "finance_get_company_name"}
        if kind in searches:
            found = await self.search(searches[kind], name)
            return Linked(found, found)
        if kind == "person":
            return await self.record("movie_get_person_info", name, ("name",))
        if kind == "movie":
            return await self.record("movie_get_movie_info", name, ("title", "original_title"))
        if kind == "ticker":
            return await self.ticker(name, kinds == frozenset({"ticker"}))
        return Linked(name, name)  # a team: CRAG has no search for teams

    # ---------------------------------------------------------------------------------------------- calling
    async def options(self, param: Param, entities: Sequence[TopicEntity]) -> list[Linked]:
        """The values the topic entities give one argument: linked entities of its kind, or values."""
        out: list[Linked] = []
        for entity in entities:
            kinds = entity_kinds(entity.get("type", ""), self.domain)
            if param.kind in NAMED_KINDS:
                if kinds is not None and param.kind not in kinds:
                    continue
                if kinds is None and any(value_of(k, entity["name"], typed=False) is not None
                                         for k in ("date", "year")):
                    continue  # an untyped date or year is a value, not a name
                linked = await self.link(entity, param.kind)
                if linked is not None:
                    out.append(linked)
            elif kinds is None or param.kind in kinds:
                value = value_of(param.kind, entity["name"], typed=kinds is not None)
                if value is not None:
                    out.append(Linked(str(value) if not isinstance(value, list) else ", ".join(value), value,
                                      named=False))
        if not out and param.choices:
            return [Linked(choice, choice, named=False) for choice in param.choices]
        unique: dict[tuple[str, str], Linked] = {}
        for option in out:
            unique.setdefault((option.label, json.dumps(option.value, default=str)), option)
        return list(unique.values())[:MAX_OPTIONS]

    async def paths_of(self, fn: Function, entities: Sequence[TopicEntity], radius: int) -> list[str]:
        """The paths of one relation: the function called with every combination of its arguments."""
        choices: list[list[Linked | None]] = []
        for param in fn.params:
            found = await self.options(param, entities)
            if not found and not param.optional:
                if self.down is None:
                    kind = param.kind.replace("_", " ")
                    self.note(f"{fn.name} needs a {kind} ({param.name}): no topic entity gives one")
                return []
            choices.append(list(found) or [None])
        combos = list(itertools.islice(itertools.product(*choices), MAX_COMBINATIONS))
        results = await asyncio.gather(*(self._paths_of_call(fn, list(combo), radius) for combo in combos))
        return [p for paths in results for p in paths]

    async def _paths_of_call(self, fn: Function, args: list[Linked | None], radius: int) -> list[str]:
        head_index = next((i for i, a in enumerate(args) if a is not None and a.named),
                          next((i for i, a in enumerate(args) if a is not None), None))
        head_arg = args[head_index] if head_index is not None else None
        head = head_arg.label if head_arg is not None else self.domain
        others = [f"{p.name}={a.label}" for i, (p, a) in enumerate(zip(fn.params, args, strict=False))
                  if a is not None and i != head_index]
        label = fn.name + (f"({', '.join(others)})" if others else "")
        linked = args[head_index] if head_index is not None else None
        if fn.links and linked is not None and linked.record is not None:
            result: Any = linked.record  # the search that linked the entity: its record is the answer
        else:
            result = await self.call(fn, *[None if a is None else a.value for a in args])
        if result in (None, [], {}, "", [None, None]) or result == [[], []]:
            if self.down is None:
                self.empty.append(f"{fn.name}({', '.join(a.label for a in args if a is not None)})")
            return []
        paths, more = verbalise([head, label], result)
        if more:
            self.note(f"{fn.name}({head}): only the first {PATHS_PER_CALL} paths are kept")
        if radius >= 2:
            paths += await self.resolve_ids([head, label], result)
        return paths

    async def resolve_ids(self, prefix: list[str], result: Any) -> list[str]:
        """Radius 2: ids in a result that another function resolves (a person's movies), a few of them."""
        records = result if isinstance(result, list) else [result]
        pending: list[tuple[list[str], str, int]] = []
        for record in records:
            if not isinstance(record, dict):
                continue
            label = label_of_record(record)[1] if isinstance(result, list) else None
            for key, fn_name in ID_FIELDS.items():
                ids = record.get(key)
                if isinstance(ids, list):
                    base = [*prefix, *([label] if label else []), key]
                    pending += [(base, fn_name, i) for i in ids if isinstance(i, int)]
        if len(pending) > MAX_RESOLVED_IDS:
            self.note(f"radius 2: {MAX_RESOLVED_IDS} of {len(pending)} ids resolved")
        out: list[str] = []
        for base, fn_name, ident in pending[:MAX_RESOLVED_IDS]:
            resolved = await self.call(FUNCTIONS[fn_name], ident)
            if resolved:
                paths, _ = verbalise([*base, str(ident), fn_name], resolved, limit=PATHS_PER_RESOLVED,
                                     shallow=True)
                out += paths
        return out


def _empty(notes: list[str], linked: dict[str, str] | None = None) -> Retrieval:
    return Retrieval(module="graph", references=[], ranked_ids=[], paths=[], linked=linked or {}, batch=0,
                     notes=notes)


def default_functions(domain: str, entities: Sequence[TopicEntity]) -> list[Function]:
    """The domain's functions followed when the agent names no usable relation: those flagged ``default``
    whose first argument an entity's kind fills."""
    kinds: set[str] = set()
    for entity in entities:
        found = entity_kinds(entity.get("type", ""), domain)
        if found is not None:
            kinds |= found
        else:
            name = entity["name"]
            value_kinds = {k for k in ("date", "year") if value_of(k, name, typed=False) is not None}
            kinds |= value_kinds or {"entity", "artist", "person", "company", "ticker", "team"}
    return [f for f in domain_functions(domain) if f.default and f.params and f.params[0].kind in kinds]


async def crag_graph_retrieval(question: str, action: Action, ctx: AgentGContext) -> Retrieval:
    """Agent-G's graph module over CRAG's API: ranked reasoning paths for the action's entities and relations.

    The API is ``ctx.crag_api_url``, else ``$CRAG_SERVER``. Every problem becomes a note of the retrieval.
    """
    url = api_url(getattr(ctx, "crag_api_url", None))
    if url is None:
        return _empty([("no CRAG API is configured: set crag_api_url in the context or CRAG_SERVER "
                        "(python -m kgagents.tools.crag_api serve starts a mock of saved calls)")])
    notes: list[str] = []
    entities = [e for e in action.get("entities") or [] if str(e.get("name", "")).strip()]
    relations = list(action.get("relations") or [])
    domain = api_domain(action.get("domain"))
    if action.get("domain") and domain is None:
        notes.append(f"unknown domain {action.get('domain')!r}: CRAG's domains are music, movie, finance, "
                     "sports and encyclopedia")
    if domain is None:
        named, _ = resolve_relations(relations, None)
        domain = named[0].domain if named else "open"
        notes.append(f"the {domain} domain is used" + (" (the domain of the relations)" if named else ""))
    functions, relation_notes = resolve_relations(relations, domain)
    notes += relation_notes
    if not functions:
        functions = default_functions(domain, entities)
        if functions:
            notes.append(f"no useful relation of the {domain} domain was given: followed "
                         f"{', '.join(f.name for f in functions)}")
    if not entities and not any(not f.params for f in functions):
        notes.append("no topic entity: the graph module needs the entities the question names")
        return _empty(notes)
    if not functions:
        notes.append(f"no function of the {domain} domain takes these entities")
        return _empty(notes)
    try:
        async with CragAPI(url) as api:
            run = _Retrieval(api=api, domain=domain, embedder=ctx.embedder(), notes=notes)
            found = await asyncio.gather(*(run.paths_of(f, entities, ctx.radius) for f in functions))
    except CragAPIError as exc:  # a malformed address
        return _empty([*notes, str(exc)])
    except Exception as exc:  # noqa: BLE001 - the node never fails on the API's data: the commentor reads why
        return _empty([*notes, f"the graph module failed: {type(exc).__name__}: {exc}"])
    if run.empty:
        run.note(f"empty result{'s' if len(run.empty) > 1 else ''}: {', '.join(run.empty)}")
    linked = run.linked(entities)
    texts = list(dict.fromkeys(p for paths in found for p in paths))
    if len(texts) > MAX_PATHS:
        run.note(f"{len(texts)} paths: the first {MAX_PATHS} are ranked")
        texts = texts[:MAX_PATHS]
    if not texts:
        if entities and not linked and run.down is None:
            run.note("no topic entity was found in CRAG's knowledge graphs")
        return _empty(run.notes, linked)
    order = (await asyncio.to_thread(rank_texts, question, texts, run.embedder))[: ctx.top_k]
    refs = [Reference(id=f"path-{i}", text=texts[i], score=s, kind="path") for i, s in order]
    return Retrieval(module="graph", references=refs, ranked_ids=[], paths=[r["text"] for r in refs],
                     linked=linked, batch=0, notes=run.notes)


