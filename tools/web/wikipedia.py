"""Wikipedia through the MediaWiki Action API (``/w/api.php``): search, a page's content, and a page as it was
on a date (the latest revision at or before the end of that day).

The API address comes from ``KGAGENTS_WIKIPEDIA_API_BASE`` (default: English Wikipedia), so any MediaWiki
site, or a test server, can stand in.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from urllib.parse import quote, urlparse

from kgagents.tools.base import ToolFailure
from kgagents.tools.files.convert import convert_bytes
from kgagents.tools.http import FetchLimits, fetch_json

DEFAULT_API = "https://en.wikipedia.org/w/api.php"


@dataclass
class WikiHit:
    """One search result."""

    title: str
    snippet: str
    url: str


@dataclass
class WikiPage:
    """A page (or an old revision of it) as Markdown."""

    title: str
    url: str
    text: str
    revid: int | None = None
    timestamp: str | None = None


def api_url(base: str | None) -> str:
    """The API endpoint for a configured base (a site root or the ``api.php`` address itself)."""
    base = (base or DEFAULT_API).rstrip("/")
    return base if base.endswith(".php") else base + "/w/api.php"


def page_url(api: str, title: str, revid: int | None = None) -> str:
    """The human address of a page (of a revision when ``revid`` is given) on the API's site."""
    parsed = urlparse(api)
    root = f"{parsed.scheme}://{parsed.netloc}"
    name = title.replace(" ", "_")
    if revid:
        return f"{root}/w/index.php?title={quote(name)}&oldid={revid}"
    return f"{root}/wiki/{quote(name)}"


def _strip_tags(text: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", text or "")).strip()


def _check_error(data: Any, what: str) -> None:
    if not isinstance(data, dict):
        raise ToolFailure(f"unexpected answer from the Wikipedia API for {what}")
    error = data.get("error")
    if isinstance(error, dict):
        code = error.get("code", "error")
        if code in {"missingtitle", "nosuchrevid", "invalidtitle"}:
            raise ToolFailure(f"Wikipedia has no page {what} ({error.get('info', code)})")
        raise ToolFailure(f"the Wikipedia API refused {what}: {error.get('info', code)}")


async def search(query: str, *, api_base: str | None = None, limit: int = 10,
                 limits: FetchLimits | None = None) -> list[WikiHit]:
    """Full-text search for pages."""
    api = api_url(api_base)
    data = await fetch_json(api, limits, params={"action": "query", "list": "search", "srsearch": query,
                                                 "srlimit": limit, "format": "json", "formatversion": 2})
    _check_error(data, f"search {query!r}")
    hits = (data.get("query") or {}).get("search") or []
    return [WikiHit(title=str(h["title"]), snippet=_strip_tags(str(h.get("snippet", ""))),
                    url=page_url(api, str(h["title"]))) for h in hits if isinstance(h, dict) and h.get("title")]


async def _parse(api: str, params: dict[str, Any], what: str, limits: FetchLimits | None) -> tuple[str, str, int]:
    data = await fetch_json(api, limits, params={"action": "parse", "prop": "text|displaytitle|revid",
                                                 "redirects": 1, "disableeditsection": 1, "disabletoc": 1,
                                                 "format": "json", "formatversion": 2, **params})
    _check_error(data, what)
    parsed = data.get("parse") or {}
    text = parsed.get("text")
    if isinstance(text, dict):  # formatversion=1 shape
        text = text.get("*", "")
    if not isinstance(text, str):
        raise ToolFailure(f"the Wikipedia API returned no content for {what}")
    return str(parsed.get("title") or what), text, int(parsed.get("revid") or 0)


def _html_to_markdown(title: str, body: str) -> str:
    doc = convert_bytes(f"<html><head><title>{html.escape(title)}</title></head><body>{body}</body></html>"
                        .encode(), mimetype="text/html", charset="utf-8")
    return f"# {title}\n\n{doc.text.strip()}"


async def page(title: str, *, api_base: str | None = None, limits: FetchLimits | None = None) -> WikiPage:
    """The current content of a page (redirects followed)."""
    api = api_url(api_base)
    name, body, revid = await _parse(api, {"page": title}, repr(title), limits)
    return WikiPage(title=name, url=page_url(api, name), text=_html_to_markdown(name, body), revid=revid or None)


def parse_date(value: str) -> date:
    """A date given as ``YYYY-MM-DD``, ``YYYYMMDD``, ``YYYY-MM`` or ``YYYY`` (the period's last day)."""
    value = value.strip()
    for fmt in ("%Y-%m-%d", "%Y%m%d", "%Y/%m/%d", "%d %B %Y", "%B %d, %Y", "%d %b %Y", "%b %d, %Y"):
        try:
            return datetime.strptime(value, fmt).date()
        except ValueError:
            continue
    match = re.fullmatch(r"(\d{4})-(\d{1,2})", value)
    if match:
        year, month = int(match.group(1)), int(match.group(2))
        nxt = date(year + (month == 12), month % 12 + 1, 1)
        return date.fromordinal(nxt.toordinal() - 1)
    if re.fullmatch(r"\d{4}", value):
        return date(int(value), 12, 31)
    raise ToolFailure(f"cannot read the date {value!r}; write it as YYYY-MM-DD")


async def page_at_date(title: str, when: str, *, api_base: str | None = None,
                       limits: FetchLimits | None = None) -> WikiPage:
    """The page as it was at the end of ``when`` (its latest revision at or before that day)."""
    api = api_url(api_base)
    day = parse_date(when)
    data = await fetch_json(api, limits, params={
        "action": "query", "prop": "revisions", "titles": title, "rvlimit": 1, "rvdir": "older",
        "rvstart": f"{day.isoformat()}T23:59:59Z", "rvprop": "ids|timestamp", "redirects": 1,
        "format": "json", "formatversion": 2})
    _check_error(data, repr(title))
    pages = (data.get("query") or {}).get("pages") or []
    if isinstance(pages, dict):  # formatversion=1 shape
        pages = list(pages.values())
    if not pages or pages[0].get("missing") or pages[0].get("invalid"):
        raise ToolFailure(f"Wikipedia has no page {title!r}")
    revisions = pages[0].get("revisions") or []
    name = str(pages[0].get("title") or title)
    if not revisions:
        raise ToolFailure(f"the page {name!r} did not exist yet on {day.isoformat()}")
    revid = int(revisions[0]["revid"])
    stamp = str(revisions[0].get("timestamp") or "")
    name, body, _ = await _parse(api, {"oldid": revid}, f"{name!r} (revision {revid})", limits)
    text = _html_to_markdown(name, body)
    header = f"(Revision {revid} of {stamp or 'unknown time'}: the page as it was on {day.isoformat()}.)\n\n"
    return WikiPage(title=name, url=page_url(api, name, revid), text=header + text, revid=revid, timestamp=stamp)
