"""Web search through SerpApi's official ``serpapi`` client (Google engine).

``KGAGENTS_SEARCH_API_BASE`` points the client at another server that speaks SerpApi's JSON protocol
(``GET {base}/search?engine=google&q=...`` answering ``{"organic_results": [{"title", "link", "snippet"}]}``):
the client's ``BASE_DOMAIN`` is set on the instance, so the same code path serves SerpApi, a self-hosted
compatible endpoint and the tests' loopback server.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import requests

from kgagents.core.config import Settings
from kgagents.core.errors import KGAgentsError
from kgagents.core.retry import TRANSIENT_STATUS
from kgagents.tools.base import ToolFailure

SERPAPI_BASE = "https://serpapi.com"


@dataclass
class SearchResult:
    """One organic result."""

    title: str
    link: str
    snippet: str = ""
    date: str | None = None


@dataclass
class SearchPage:
    """The results of one query, with SerpApi's direct answer when it gives one."""

    query: str
    results: list[SearchResult]
    answer: str | None = None


class SearchUnavailable(ToolFailure):
    """No search key and no compatible endpoint is configured."""


class TransientSearchError(KGAgentsError, RuntimeError):
    """A search failed in a way that may pass (rate limit, 5xx, connection); callers retry."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


def search_configured(settings: Settings) -> bool:
    """Whether web search can work: a SerpApi key, or a compatible endpoint."""
    return bool(settings.serpapi_api_key or settings.search_api_base)


def _base_domain(base: str) -> str:
    base = base.rstrip("/")
    for suffix in ("/search.json", "/search"):
        base = base.removesuffix(suffix)
    return base


def make_client(settings: Settings, timeout_s: float = 30.0) -> Any:
    """A ``serpapi.Client`` for the configured key and endpoint."""
    import serpapi  # the search API's client: loaded when a search runs

    if not search_configured(settings):
        raise SearchUnavailable("web search needs SERPAPI_API_KEY (or KGAGENTS_SEARCH_API_BASE)")
    client = serpapi.Client(api_key=settings.serpapi_api_key, timeout=timeout_s)
    if settings.search_api_base:
        client.BASE_DOMAIN = _base_domain(settings.search_api_base)
    return client


def search_params(query: str, *, filter_year: int | None = None, num: int = 10) -> dict[str, Any]:
    """SerpApi parameters of a Google query; ``filter_year`` keeps pages dated in that year."""
    params: dict[str, Any] = {"engine": "google", "q": query, "num": num}
    if filter_year is not None:
        params["tbs"] = f"cdr:1,cd_min:01/01/{int(filter_year)},cd_max:12/31/{int(filter_year)}"
    return params


def _parse(query: str, data: dict[str, Any]) -> SearchPage:
    results = []
    for item in data.get("organic_results") or []:
        if not isinstance(item, dict) or not item.get("link"):
            continue
        results.append(SearchResult(title=str(item.get("title") or item["link"]), link=str(item["link"]),
                                    snippet=str(item.get("snippet") or ""),
                                    date=str(item["date"]) if item.get("date") else None))
    answer = None
    box = data.get("answer_box")
    if isinstance(box, dict):
        answer = box.get("answer") or box.get("snippet") or box.get("result")
        answer = str(answer) if answer else None
    return SearchPage(query=query, results=results, answer=answer)


async def web_search(settings: Settings, query: str, *, filter_year: int | None = None, num: int = 10,
                     timeout_s: float = 30.0) -> SearchPage:
    """Run one Google search; raises :class:`ToolFailure` (bad key, bad query) or
    :class:`TransientSearchError` (worth retrying)."""
    import serpapi  # the search API's client: loaded when a search runs

    client = make_client(settings, timeout_s)
    params = search_params(query, filter_year=filter_year, num=num)
    try:
        results = await asyncio.to_thread(client.search, params)
    except (serpapi.HTTPConnectionError, requests.exceptions.ConnectionError, requests.exceptions.Timeout,
            serpapi.TimeoutError) as exc:
        raise TransientSearchError(f"search service unreachable: {type(exc).__name__}: {exc}") from exc
    except serpapi.HTTPError as exc:
        status = getattr(exc, "status_code", None)
        detail = getattr(exc, "error", None) or str(exc)
        if status in TRANSIENT_STATUS:
            raise TransientSearchError(f"search failed (HTTP {status}): {detail}", status) from exc
        raise ToolFailure(f"search failed (HTTP {status}): {detail}") from exc
    if isinstance(results, str):  # the client returns the raw text of an answer that is not JSON
        raise ToolFailure(f"the search service did not answer with JSON: {results[:200]!r}")
    data = results.as_dict() if hasattr(results, "as_dict") else dict(results)
    if data.get("error") and not data.get("organic_results"):
        error = str(data["error"])
        if "hasn't returned any results" in error or "no results" in error.lower():
            return SearchPage(query=query, results=[])
        raise ToolFailure(f"search failed: {error}")
    return _parse(query, data)


def render_results(page: SearchPage, filter_year: int | None = None) -> str:
    """The results as a Markdown page for the text browser."""
    year = f" (pages from {filter_year})" if filter_year is not None else ""
    lines = [f"## Web search results for '{page.query}'{year}", ""]
    if page.answer:
        lines += [f"Direct answer: {page.answer}", ""]
    if not page.results:
        lines.append(f"No results found for '{page.query}'{year}. Try a shorter or different query"
                     + (" or another year." if filter_year is not None else "."))
    for i, result in enumerate(page.results, 1):
        date = f" ({result.date})" if result.date else ""
        lines.append(f"{i}. [{result.title}]({result.link}){date}")
        if result.snippet:
            lines.append(f"   {result.snippet}")
        lines.append("")
    return "\n".join(lines).strip() + "\n"
