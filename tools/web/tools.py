"""The surfer agent's tools: web search, the text browser's navigation, Wikipedia, archived pages and a
full-page summary, as LangChain tools over one :class:`~kgagents.tools.web.browser.TextBrowser`.

:func:`make_surfer_tools` builds them for one browser (one surfer run). They raise
:class:`~kgagents.tools.base.ToolFailure` for failures that retrying will not fix and other exceptions for transient
ones, so :func:`kgagents.tools.base.run_tool_with_retry` retries only what may pass and turns every failure into a
clear error string.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from kgagents.tools.base import ToolFailure
from kgagents.tools.files.qa import answer_about_text
from kgagents.tools.http import limits_of
from kgagents.tools.manager import ToolEnv
from kgagents.tools.web import wayback, wikipedia
from kgagents.tools.web.browser import TextBrowser
from kgagents.tools.web.search import render_results, web_search

SURFER_TOOL_NAMES = ["web_search", "visit_page", "page_up", "page_down", "find_on_page", "find_next",
                     "wikipedia_search", "wikipedia_page", "wikipedia_page_at_date", "archived_url",
                     "summarize_page"]


class WebSearchInput(BaseModel):
    query: str = Field(description="The search query.")
    filter_year: int | None = Field(default=None, description="Only pages from this year (e.g. 2020). Use it "
                                                              "when the question is about a specific date.")
    navigational: bool = Field(default=False, description="True: go straight to the top result (a known "
                                                          "destination, like 'I'm Feeling Lucky').")


class VisitInput(BaseModel):
    url: str = Field(description="Absolute URL, or a URL relative to the current page.")


class NoInput(BaseModel):
    pass


class FindInput(BaseModel):
    search_string: str = Field(description="Text to find on the current page (case-insensitive; '*' matches "
                                           "anything).")


class WikiSearchInput(BaseModel):
    query: str = Field(description="What to look for on Wikipedia.")


class WikiPageInput(BaseModel):
    title: str = Field(description="The exact page title, e.g. 'Mercedes Sosa'.")


class WikiPageAtDateInput(BaseModel):
    title: str = Field(description="The exact page title.")
    date: str = Field(description="The date, YYYY-MM-DD: the page is shown as it was at the end of that day.")


class ArchivedUrlInput(BaseModel):
    url: str = Field(description="The URL to find an archived copy of.")
    date: str | None = Field(default=None, description="Wanted date, YYYY-MM-DD or YYYYMMDD; the closest "
                                                       "snapshot is shown. Omit for the latest.")


class SummarizeInput(BaseModel):
    question: str = Field(description="What you want to know from the page, as a full sentence.")
    url: str | None = Field(default=None, description="The page to read in full; omit for the current page.")


def make_surfer_tools(env: ToolEnv, browser: TextBrowser) -> list[BaseTool]:
    """The surfer's tools for one run's ``browser`` (the browser's state changes as they are used)."""
    settings = env.settings
    limits = limits_of(env.extra)
    wiki_api = settings.wikipedia_api_base
    wayback_api = settings.wayback_api_base

    async def search(query: str, filter_year: int | None = None, navigational: bool = False) -> str:
        page = await web_search(settings, query, filter_year=filter_year, timeout_s=limits.read_timeout_s)
        if navigational and page.results:
            top = page.results[0]
            view = await browser.visit(top.link)
            return f"Top result for '{query}': {top.title}\n{view}"
        browser.set_page(f"search: {query}", render_results(page, filter_year), title=f"Search: {query}")
        return browser.view()

    async def visit_page(url: str) -> str:
        return await browser.visit(url)

    async def page_up() -> str:
        return browser.page_up()

    async def page_down() -> str:
        return browser.page_down()

    async def find_on_page(search_string: str) -> str:
        return browser.find(search_string)

    async def find_next() -> str:
        return browser.find_next()

    async def wikipedia_search(query: str) -> str:
        hits = await wikipedia.search(query, api_base=wiki_api, limits=limits)
        lines = [f"## Wikipedia search results for '{query}'", ""]
        if not hits:
            lines.append("No pages found. Try other words, or web_search.")
        for i, hit in enumerate(hits, 1):
            lines += [f"{i}. {hit.title} ({hit.url})", f"   {hit.snippet}", ""]
        browser.set_page(f"wikipedia search: {query}", "\n".join(lines), title=f"Wikipedia search: {query}")
        return browser.view()

    async def wikipedia_page(title: str) -> str:
        page = await wikipedia.page(title, api_base=wiki_api, limits=limits)
        browser.set_page(page.url, page.text, title=page.title)
        return browser.view()

    async def wikipedia_page_at_date(title: str, date: str) -> str:
        page = await wikipedia.page_at_date(title, date, api_base=wiki_api, limits=limits)
        browser.set_page(page.url, page.text, title=f"{page.title} (as of {date})")
        return browser.view()

    async def archived_url(url: str, date: str | None = None) -> str:
        snap = await wayback.closest_snapshot(url, date, api_base=wayback_api, limits=limits)
        if snap is None:
            raise ToolFailure(f"the Wayback Machine has no archived copy of {url}; try another URL")
        view = await browser.visit(snap.url)
        return f"Archived copy of {url}, snapshot of {snap.day}:\n{view}"

    async def summarize_page(question: str, url: str | None = None) -> str:
        if url:
            target = browser.resolve(url)
            reader = TextBrowser(limits=limits)
            await reader.visit(target)
            text, title, source = reader.content, reader.title, reader.address
        else:
            if not browser.content:
                raise ToolFailure("no page is open: give a url, or visit a page first")
            text, title, source = browser.content, browser.title, browser.address
        answer = await answer_about_text(env, text, question, title=title, source=source)
        return f"Summary of {source} for '{question}':\n{answer}"

    def tool(fn: Any, name: str, schema: type[BaseModel], description: str) -> BaseTool:
        return StructuredTool.from_function(coroutine=fn, name=name, args_schema=schema, description=description)

    return [
        tool(search, "web_search", WebSearchInput,
             "Search the web (Google). Informational by default: returns the result list as a page (title, "
             "link, snippet) that you can page through. navigational=true opens the top result directly. "
             "filter_year restricts results to pages from that year."),
        tool(visit_page, "visit_page", VisitInput,
             "Open a URL and show the first viewport of its text. Renders HTML, PDF, DOCX, XLSX, PPTX, CSV, "
             "JSON and text files to Markdown."),
        tool(page_up, "page_up", NoInput, "Scroll the viewport one page up on the current page."),
        tool(page_down, "page_down", NoInput, "Scroll the viewport one page down on the current page."),
        tool(find_on_page, "find_on_page", FindInput,
             "Find text on the current page (like Ctrl+F) and scroll to its first occurrence."),
        tool(find_next, "find_next", NoInput, "Scroll to the next occurrence of the last find_on_page text."),
        tool(wikipedia_search, "wikipedia_search", WikiSearchInput,
             "Search Wikipedia; returns matching page titles with snippets."),
        tool(wikipedia_page, "wikipedia_page", WikiPageInput,
             "Open the current version of a Wikipedia page by its title."),
        tool(wikipedia_page_at_date, "wikipedia_page_at_date", WikiPageAtDateInput,
             "Open a Wikipedia page as it was on a given date (its revision history). Use it for questions "
             "about what a page said at some time."),
        tool(archived_url, "archived_url", ArchivedUrlInput,
             "Open the Wayback Machine's archived copy of a URL closest to a date."),
        tool(summarize_page, "summarize_page", SummarizeInput,
             "Read a whole page (the current one, or a URL) and answer a question about it. Use it for long "
             "pages instead of paging through them."),
    ]

