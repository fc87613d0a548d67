"""A text browser for an LLM: one Markdown page at a time, seen through a viewport of fixed size.

It visits URLs (HTML, PDF, office files and text are rendered to Markdown), pages up and down, and finds text
on the page (Ctrl+F, with ``*`` as a wildcard) and its next occurrences. Search results and Wikipedia pages
are shown as pages too, so the same navigation applies to them.

The browser's whole state is a plain JSON-safe dict (:meth:`TextBrowser.to_state` /
:meth:`TextBrowser.from_state`), so a graph keeps it in its state and a checkpoint holds it: one browser per
run, never shared.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any
from urllib.parse import urljoin

from kgagents.tools.base import ToolFailure
from kgagents.tools.files.convert import ConversionError, convert_bytes, kind_of
from kgagents.tools.http import FetchLimits, fetch

#: Characters per viewport (about 1,300 tokens), as in the text browser the KGoT surfer builds on.
VIEWPORT_CHARS = 5 * 1024
#: A page's Markdown is kept up to this many characters (the rest is cut, with a note).
MAX_PAGE_CHARS = 1_000_000
HISTORY_LIMIT = 50


class TextBrowser:
    """A text browser whose state is a plain dict (see the module docstring)."""

    def __init__(self, state: dict[str, Any] | None = None, *, limits: FetchLimits | None = None,
                 viewport_chars: int = VIEWPORT_CHARS) -> None:
        state = dict(state or {})
        self.limits = limits or FetchLimits()
        self.viewport_chars = int(state.get("viewport_chars") or viewport_chars)
        self.address: str = state.get("address", "about:blank")
        self.title: str | None = state.get("title")
        self.content: str = state.get("content", "")
        self.pages: list[list[int]] = [list(p) for p in state.get("pages") or []] or self._split(self.content)
        self.current: int = int(state.get("current", 0))
        self.find_query: str | None = state.get("find_query")
        self.find_pos: int | None = state.get("find_pos")
        self.history: list[str] = list(state.get("history") or [])

    @classmethod
    def from_state(cls, state: dict[str, Any] | None, *, limits: FetchLimits | None = None) -> TextBrowser:
        """A browser restored from :meth:`to_state`'s dict (a blank one for ``None``)."""
        return cls(state, limits=limits)

    def to_state(self) -> dict[str, Any]:
        """The browser's state as a JSON-safe dict."""
        return {"address": self.address, "title": self.title, "content": self.content, "pages": self.pages,
                "current": self.current, "find_query": self.find_query, "find_pos": self.find_pos,
                "history": self.history, "viewport_chars": self.viewport_chars}

    # -- pages ------------------------------------------------------------------------------------------
    def _split(self, content: str) -> list[list[int]]:
        """Viewport boundaries: about ``viewport_chars`` each, cut at whitespace where possible."""
        size = max(200, self.viewport_chars)
        pages: list[list[int]] = []
        start, n = 0, len(content)
        while start < n:
            end = min(start + size, n)
            if end < n:
                cut = max(content.rfind("\n", start + size // 2, end), content.rfind(" ", start + size // 2, end))
                if cut > start:
                    end = cut + 1
            pages.append([start, end])
            start = end
        return pages or [[0, 0]]

    def set_page(self, address: str, content: str, title: str | None = None) -> None:
        """Show ``content`` (Markdown) as the page at ``address``, from the top."""
        if len(content) > MAX_PAGE_CHARS:
            content = content[:MAX_PAGE_CHARS] + (f"\n\n[Note: the page was cut at {MAX_PAGE_CHARS:,} characters.]")
        self.address = address
        self.title = title
        self.content = content
        self.pages = self._split(content)
        self.current = 0
        self.find_query = None
        self.find_pos = None
        self.history = (self.history + [address])[-HISTORY_LIMIT:]

    @property
    def viewport(self) -> str:
        """The text in the viewport."""
        start, end = self.pages[self.current]
        return self.content[start:end]

    def view(self, note: str | None = None) -> str:
        """What the agent sees: address, title, viewport position, then the viewport's text."""
        header = [f"Address: {self.address}"]
        if self.title:
            header.append(f"Title: {self.title}")
        if self.history[:-1].count(self.address):
            header.append("You visited this page before in this search.")
        header.append(f"Viewport position: showing page {self.current + 1} of {len(self.pages)}.")
        if note:
            header.append(note)
        return "\n".join(header) + "\n=======================\n" + self.viewport

    def page_down(self) -> str:
        """Move the viewport one page down."""
        if self.current + 1 >= len(self.pages):
            return self.view("[Already at the last page of this document.]")
        self.current += 1
        return self.view()

    def page_up(self) -> str:
        """Move the viewport one page up."""
        if self.current == 0:
            return self.view("[Already at the top of this document.]")
        self.current -= 1
        return self.view()

    # -- find -------------------------------------------------------------------------------------------
    @staticmethod
    def _pattern(query: str) -> re.Pattern[str]:
        parts = [re.escape(p) for p in query.strip().split("*")]
        body = ".*?".join(parts)
        body = re.sub(r"(\\ )+|\s+", r"\\s+", body)
        return re.compile(body, re.IGNORECASE | re.DOTALL)

    def _page_of(self, pos: int) -> int:
        for i, (start, end) in enumerate(self.pages):
            if start <= pos < end:
                return i
        return len(self.pages) - 1

    def _matches(self, query: str) -> list[int]:
        if not query.strip():
            raise ToolFailure("the search string is empty")
        return [m.start() for m in self._pattern(query).finditer(self.content)]

    def find(self, query: str) -> str:
        """Scroll to the first occurrence of ``query`` at or after the top of the viewport (wrapping)."""
        matches = self._matches(query)
        self.find_query = query
        if not matches:
            self.find_pos = None
            return self.view(f"[The search string '{query}' was not found on this page.]")
        top = self.pages[self.current][0]
        pos = next((m for m in matches if m >= top), matches[0])
        return self._show_match(query, matches, pos)

    def find_next(self) -> str:
        """Scroll to the next occurrence of the last search string (wrapping to the top)."""
        if not self.find_query:
            return self.view("[No search is active: use find_on_page first.]")
        matches = self._matches(self.find_query)
        if not matches:
            return self.view(f"[The search string '{self.find_query}' was not found on this page.]")
        after = -1 if self.find_pos is None else self.find_pos
        pos = next((m for m in matches if m > after), matches[0])
        wrapped = self.find_pos is not None and pos <= after
        return self._show_match(self.find_query, matches, pos, wrapped=wrapped)

    def _show_match(self, query: str, matches: list[int], pos: int, *, wrapped: bool = False) -> str:
        self.find_pos = pos
        self.current = self._page_of(pos)
        index = matches.index(pos) + 1
        note = f"[Match {index} of {len(matches)} for '{query}'" + (", wrapped to the top" if wrapped else "") + ".]"
        return self.view(note)

    # -- visiting ---------------------------------------------------------------------------------------
    def resolve(self, url: str) -> str:
        """``url`` made absolute against the current page when it is relative."""
        url = url.strip()
        if "://" not in url and self.address.startswith(("http://", "https://")):
            return urljoin(self.address, url)
        if url.startswith("www."):
            return "https://" + url
        return url

    async def visit(self, url: str) -> str:
        """Download ``url``, render it to Markdown, show its first viewport."""
        url = self.resolve(url)
        got = await fetch(url, self.limits)
        kind = kind_of(got.content, filename=got.filename, mimetype=got.mimetype)
        name = got.filename or got.url
        if kind in {"image", "audio", "archive", "svg"}:
            what = {"image": "an image", "svg": "an image", "audio": "an audio/video file",
                    "archive": "a zip archive"}[kind]
            tool = "image_inspector" if kind in {"image", "svg"} else (
                "extract_zip" if kind == "archive" else "inspect_file_as_text")
            text = (f"This address is {what} ({got.mimetype or 'unknown type'}, {len(got.content):,} bytes), "
                    f"which the text browser cannot show. Report its URL ({got.url}) so that it can be "
                    f"inspected with the {tool} tool.")
            self.set_page(got.url, text, title=name)
            return self.view()
        try:
            doc = await asyncio.to_thread(convert_bytes, got.content, filename=got.filename,
                                          mimetype=got.mimetype, charset=got.charset, url=got.url)
        except ConversionError as exc:
            if got.truncated or got.timed_out:
                raise ToolFailure(f"{got.url}: {exc} {got.note(self.limits)}") from exc
            raise ToolFailure(f"{got.url}: {exc}") from exc
        text = doc.text
        note = got.note(self.limits)
        if note:
            text = f"{note}\n\n{text}"
        if not text.strip():
            text = "[This page has no text content.]"
        self.set_page(got.url, text, title=doc.title)
        return self.view()

    def visited(self) -> list[str]:
        """Web addresses shown in this browser, oldest first, without repeats (the search's sources)."""
        seen: list[str] = []
        for address in self.history:
            if address.startswith(("http://", "https://")) and address not in seen:
                seen.append(address)
        return seen
