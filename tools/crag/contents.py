"""Whether a CRAG API holds CRAG's knowledge graphs: a few searches at the start of a run, and the verdict.

CRAG's own mock API (``mock_api/server.py`` of facebookresearch/CRAG, with its ``cragkg/`` data) ranks entity
names by BM25 in its search functions and returns the best ten that share a word with the query, so a search for
a name as common as those of :data:`PROBES` answers a non-empty list. A server without that data — kgagents'
server of the 40 saved calls (:mod:`kgagents.tools.crag.server`), CRAG's server started from a clone whose Git
LFS data files were not pulled, a server of something else — answers them with nothing, and an evaluation
against it reports numbers whose graph module retrieved nothing. :data:`PROBES` are searches the saved calls do
not hold, one per domain that has a search; :func:`contents_verdict` reads their answers (a pure function, so
that the rule is tested on its own); :func:`probe_contents` asks the server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kgagents.tools.crag.client import CragAPI
from kgagents.tools.crag.functions import CragAPIError

#: One search per domain that has one, for names CRAG's KGs hold and the saved calls do not (the saved calls
#: search "florida", "Jackson", "Apple", "lady gaga").
PROBES: tuple[tuple[str, str], ...] = (
    ("open_search_entity_by_name", "paris"),
    ("movie_get_person_info", "tom hanks"),
    ("finance_get_company_name", "microsoft"),
    ("music_search_artist_entity_by_name", "taylor swift"),
)
#: Seconds a probe waits for the server (CRAG's answers its searches in milliseconds once started).
PROBE_TIMEOUT_S = 20.0

#: How to get what the tables need, for the messages.
HOW_TO_GET = ("CRAG's own mock API and its data are needed: `git lfs install && git clone "
              "https://github.com/facebookresearch/CRAG && cd CRAG/mock_api && git lfs pull && pip install -r "
              "requirements.txt && uvicorn server:app --port 8000` (the KG files are Git LFS objects: without `git "
              "lfs pull` they are pointers and the server has no data), then CRAG_SERVER=http://127.0.0.1:8000")


@dataclass(frozen=True)
class Contents:
    """What the probes found: ``state`` is ``data`` (every search answered), ``partial`` (some answered
    nothing), ``empty`` (none answered anything) or ``unreachable`` (the server did not answer at all);
    ``message`` says so for a user."""

    state: str
    message: str
    empty: tuple[str, ...] = ()


def _answered(value: Any) -> bool:
    """Whether a search's answer holds anything (CRAG's searches answer a list of names or records)."""
    if isinstance(value, (list, tuple, dict, str)):
        return len(value) > 0
    return value is not None


def contents_verdict(url: str, answers: Mapping[str, Any], errors: Mapping[str, str]) -> Contents:
    """The verdict on the answers of :data:`PROBES` (``answers``: function → result; ``errors``: function →
    why the call failed)."""
    probes = [name for name, _ in PROBES]
    if errors and len(errors) == len(probes):
        first = next(iter(errors.values()))
        return Contents("unreachable", f"the CRAG API at {url} does not answer ({first}). {HOW_TO_GET}",
                        tuple(probes))
    empty = tuple(name for name in probes if name in errors or not _answered(answers.get(name)))
    searched = ", ".join(f"{name}({query!r})" for name, query in PROBES if name in empty)
    if len(empty) == len(probes):
        return Contents("empty", f"the CRAG API at {url} has no data: it answers nothing to searches that CRAG's "
                                 f"mock API answers with its data ({searched}); its knowledge-graph retrieval "
                                 f"would find nothing (kgagents' bundled server holds only 40 saved calls, for "
                                 f"tests and the demo). {HOW_TO_GET}", empty)
    if empty:
        return Contents("partial", f"the CRAG API at {url} answers nothing to {searched}: those domains' "
                                   f"knowledge graphs look missing. {HOW_TO_GET}", empty)
    return Contents("data", f"the CRAG API at {url} answers its searches")


async def probe_contents(url: str, *, timeout_s: float = PROBE_TIMEOUT_S) -> Contents:
    """Ask the API at ``url`` the :data:`PROBES` and give the verdict."""
    answers: dict[str, Any] = {}
    errors: dict[str, str] = {}
    async with CragAPI(url, timeout_s=timeout_s) as api:
        async def ask(name: str, query: str) -> None:
            try:
                answers[name] = await api.call(name, query)
            except CragAPIError as exc:
                errors[name] = str(exc)

        await asyncio.gather(*(ask(name, query) for name, query in PROBES))
    return contents_verdict(url, answers, errors)
