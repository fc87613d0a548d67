"""The text browser: visiting, viewport paging, find / find next, state round trips, hostile pages."""

from __future__ import annotations

import json
import re

import pytest

from kgagents.tools.base import ToolFailure
from kgagents.tools.web.browser import TextBrowser
from tests.tools.conftest import TEST_LIMITS


@pytest.fixture
def browser() -> TextBrowser:
    return TextBrowser(limits=TEST_LIMITS)


@pytest.mark.slow
async def test_visit_renders_markdown_with_a_header(web, browser):
    view = await browser.visit(web.url("/files/article.html"))
    assert view.startswith(f"Address: {web.url('/files/article.html')}\nTitle: Lake Vornhal\n")
    assert "Viewport position: showing page 1 of" in view
    assert "# Lake Vornhal" in view and "=======================" in view
    assert len(browser.pages) >= 2 and len(browser.viewport) <= browser.viewport_chars + 1


@pytest.mark.slow
async def test_page_down_and_up_stay_in_bounds(web, browser):
    await browser.visit(web.url("/files/article.html"))
    n = len(browser.pages)
    assert "page 1 of" in browser.page_up() and "Already at the top" in browser.page_up()
    for i in range(2, n + 1):
        assert f"showing page {i} of {n}" in browser.page_down()
    assert "Already at the last page" in browser.page_down()
    assert f"showing page {n - 1} of {n}" in browser.page_up()
    # the viewports cover the page exactly, in order
    assert "".join(browser.content[s:e] for s, e in browser.pages) == browser.content


@pytest.mark.slow
async def test_find_and_find_next(web, browser):
    await browser.visit(web.url("/files/article.html"))
    view = browser.find("observatory on lake vornhal")
    assert "[Match 1 of 1 for 'observatory on lake vornhal'.]" in view
    assert "opened in 1923 by the astronomer Ilse Brandt" in browser.viewport
    assert browser.current > 0
    first_view = browser.find("paragraph adds length")  # searches from the top of the viewport
    first = browser.find_pos
    view = browser.find_next()
    (a, total), (b, total2) = [tuple(map(int, re.search(r"Match (\d+) of (\d+)", v).groups()))
                               for v in (first_view, view)]
    assert b == a + 1 and total == total2 > 2 and browser.find_pos > first
    assert "not found" in browser.find("no such words anywhere")
    assert "Match 1 of 1" in browser.find("opened in * by the astronomer")  # wildcard


async def test_find_next_wraps_to_the_top(browser):
    browser.set_page("memory:x", "alpha beta alpha gamma")
    assert "Match 1 of 2" in browser.find("alpha")
    assert "Match 2 of 2" in browser.find_next()
    assert "Match 1 of 2 for 'alpha', wrapped to the top" in browser.find_next()
    fresh = TextBrowser()
    assert "No search is active" in fresh.find_next()
    with pytest.raises(ToolFailure):
        browser.find("   ")


@pytest.mark.slow
async def test_state_round_trip_is_json(web, browser):
    await browser.visit(web.url("/files/article.html"))
    browser.page_down()
    browser.find("Ilse Brandt")
    state = json.loads(json.dumps(browser.to_state()))
    restored = TextBrowser.from_state(state)
    assert restored.viewport == browser.viewport and restored.find_query == "Ilse Brandt"
    assert "Match 1 of 1" in restored.find_next()
    assert restored.visited() == [web.url("/files/article.html")]


@pytest.mark.slow
async def test_relative_links_and_redirects(web, browser):
    await browser.visit(web.url("/redirect"))
    assert browser.address == web.url("/files/article.html")
    view = await browser.visit("report.pdf")
    assert "Visitors in 2023: 48,211" in view and browser.address == web.url("/files/report.pdf")


@pytest.mark.slow
async def test_office_and_text_files(web, browser):
    assert "1350" in await browser.visit(web.url("/files/budget.xlsx"))
    assert "The budget for 2020 was approved." in await browser.visit(web.url("/files/notes.docx"))
    assert "à la forêt" in await browser.visit(web.url("/files/latin1.txt"))


async def test_binary_files_are_described_not_shown(web, browser):
    view = await browser.visit(web.url("/files/red.png"))
    assert "image_inspector" in view and "cannot show" in view
    view = await browser.visit(web.url("/files/bundle.zip"))
    assert "extract_zip" in view


async def test_corrupt_pdf_is_a_clear_failure(web, browser):
    with pytest.raises(ToolFailure, match="could not read the PDF"):
        await browser.visit(web.url("/files/corrupt.pdf"))


@pytest.mark.slow
async def test_hostile_pages(web, browser):
    with pytest.raises(ToolFailure, match=r"50.0 MB"):
        await browser.visit(web.url("/big"))
    view = await browser.visit(web.url("/endless"))
    assert "size limit" in view and "endless page" in view
    assert len(browser.content) <= 1_100_000


async def test_long_pages_are_kept_within_bounds():
    browser = TextBrowser()
    browser.set_page("memory:long", "word " * 400_000)
    assert len(browser.content) < 1_000_100 and "cut at" in browser.content
