"""The surfer's tools: SerpApi search through the official client, Wikipedia, the Wayback Machine, full-page
summaries, and the retry / error-string behaviour they share."""

from __future__ import annotations

import pytest

from kgagents.core.config import Settings
from kgagents.tools.base import run_tool_with_retry
from kgagents.tools.web.browser import TextBrowser
from kgagents.tools.web.search import make_client, search_params, web_search
from kgagents.tools.web.tools import SURFER_TOOL_NAMES, make_surfer_tools
from kgagents.tools.web.wikipedia import parse_date
from tests.tools.conftest import make_env, scripted


def tools_for(env, browser=None):
    browser = browser or TextBrowser(limits=env.extra["fetch_limits"])
    return browser, {t.name: t for t in make_surfer_tools(env, browser)}


async def run(tool, args, env):
    return await run_tool_with_retry(tool, args, max_retries=env.max_retries, backoff_base_s=0.01,
                                     backoff_max_s=0.02, max_output_chars=env.max_output_chars)


def test_tool_set_and_descriptions(env):
    _, tools = tools_for(env)
    assert list(tools) == SURFER_TOOL_NAMES
    assert all(0 < len(t.description) <= 1024 for t in tools.values())


def test_client_is_the_official_one_pointed_at_the_base(settings, web):
    import serpapi

    client = make_client(settings)
    assert isinstance(client, serpapi.Client) and web.base == client.BASE_DOMAIN
    assert make_client(Settings(serpapi_api_key="k")).BASE_DOMAIN == "https://serpapi.com"
    params = search_params("q", filter_year=2020)
    assert params["tbs"] == "cdr:1,cd_min:01/01/2020,cd_max:12/31/2020" and params["engine"] == "google"


async def test_informational_search_is_a_page(env, web):
    browser, tools = tools_for(env)
    web.requests.clear()
    out = (await run(tools["web_search"], {"query": "lake vornhal", "filter_year": 2021}, env)).output
    assert "## Web search results for 'lake vornhal' (pages from 2021)" in out
    assert f"1. [Lake Vornhal - fixture article]({web.url('/files/article.html')})" in out
    assert browser.address == "search: lake vornhal"
    (_, _, query), = [r for r in web.requests if r[1] == "/search"]
    assert query["q"] == ["lake vornhal"] and query["tbs"] == ["cdr:1,cd_min:01/01/2021,cd_max:12/31/2021"]
    assert query["engine"] == ["google"]


@pytest.mark.slow
async def test_navigational_search_opens_the_top_result(env, web):
    browser, tools = tools_for(env)
    out = (await run(tools["web_search"], {"query": "lake vornhal", "navigational": True}, env)).output
    assert out.startswith("Top result for 'lake vornhal': Lake Vornhal - fixture article")
    assert browser.address == web.url("/files/article.html")


async def test_search_without_results_and_with_errors(env):
    _, tools = tools_for(env)
    out = (await run(tools["web_search"], {"query": "nothing at all"}, env)).output
    assert "No results found for 'nothing at all'" in out
    run_ = await run(tools["web_search"], {"query": "invalid key test"}, env)
    assert not run_.ok and run_.attempts == 1 and "Invalid API key" in run_.output


async def test_search_unconfigured_is_a_clear_error(tmp_path):
    env = make_env(tmp_path, Settings())
    with pytest.raises(Exception, match="SERPAPI_API_KEY"):
        await web_search(env.settings, "x")


async def test_unreachable_search_service_is_retried_then_reported(tmp_path):
    from tests.fakes import closed_port

    env = make_env(tmp_path, Settings(search_api_base=f"http://127.0.0.1:{closed_port()}"))
    _, tools = tools_for(env)
    result = await run(tools["web_search"], {"query": "x"}, env)
    assert not result.ok and result.attempts == 3 and "unreachable" in result.output


@pytest.mark.slow
async def test_visit_page_down_find(env, web):
    _, tools = tools_for(env)
    out = (await run(tools["visit_page"], {"url": web.url("/files/article.html")}, env)).output
    assert "Title: Lake Vornhal" in out
    out = (await run(tools["page_down"], {}, env)).output
    assert "showing page 2 of" in out
    out = (await run(tools["find_on_page"], {"search_string": "Ilse Brandt"}, env)).output
    assert "Match 1 of 1" in out and "opened in 1923" in out
    assert "Match 1 of 1" in (await run(tools["find_next"], {}, env)).output
    assert "showing page" in (await run(tools["page_up"], {}, env)).output


@pytest.mark.slow
async def test_flaky_page_is_retried(env, web):
    web.flaky_count = 0
    _, tools = tools_for(env)
    result = await run(tools["visit_page"], {"url": web.url("/flaky")}, env)
    assert result.ok and result.attempts == 3 and "Finally served." in result.output


@pytest.mark.slow
async def test_failures_become_error_strings(env, web):
    _, tools = tools_for(env)
    for args, expected in [({"url": web.url("/status/404")}, "HTTP 404"),
                           ({"url": web.url("/big")}, "over the download limit"),
                           ({"url": web.url("/files/corrupt.pdf")}, "could not read the PDF"),
                           ({"url": "file:///etc/passwd"}, "not a web address")]:
        result = await run(tools["visit_page"], args, env)
        assert not result.ok and result.attempts == 1 and expected in result.output
        assert result.output.startswith("Error: visit_page failed")


@pytest.mark.slow
async def test_wikipedia_search_and_page(env, web):
    browser, tools = tools_for(env)
    out = (await run(tools["wikipedia_search"], {"query": "vornhal"}, env)).output
    assert "1. Lake Vornhal (" in out and "is an alpine lake" in out and "<span" not in out
    out = (await run(tools["wikipedia_page"], {"title": "Vornhal"}, env)).output  # a redirect
    assert "# Lake Vornhal" in out and "**14.2 km2**" in out and "## Observatory" in out
    assert browser.address == web.url("/wiki/Lake_Vornhal")
    result = await run(tools["wikipedia_page"], {"title": "No Such Page"}, env)
    assert not result.ok and "no page 'No Such Page'" in result.output


@pytest.mark.slow
async def test_wikipedia_page_at_a_date(env, web):
    browser, tools = tools_for(env)
    out = (await run(tools["wikipedia_page_at_date"], {"title": "Lake Vornhal", "date": "2016-01-01"}, env)).output
    assert "Revision 2002 of 2015-03-10T08:00:00Z" in out and "13.9 km2" in out and "14.2" not in out
    assert browser.address == web.url("/w/index.php?title=Lake_Vornhal&oldid=2002")
    out = (await run(tools["wikipedia_page_at_date"], {"title": "Lake Vornhal", "date": "20080102"}, env)).output
    assert "stub" in out
    result = await run(tools["wikipedia_page_at_date"], {"title": "Lake Vornhal", "date": "2001-01-01"}, env)
    assert not result.ok and "did not exist yet on 2001-01-01" in result.output
    result = await run(tools["wikipedia_page_at_date"], {"title": "Lake Vornhal", "date": "last spring"}, env)
    assert not result.ok and "cannot read the date" in result.output


def test_parse_date():
    assert str(parse_date("2020-02")) == "2020-02-29" and str(parse_date("2019")) == "2019-12-31"
    assert str(parse_date("27 June 2008")) == "2008-06-27" and str(parse_date("20080627")) == "2008-06-27"


@pytest.mark.slow
async def test_archived_url(env, web):
    _, tools = tools_for(env)
    web.requests.clear()
    out = (await run(tools["archived_url"], {"url": "http://example.org/", "date": "2008-06-27"}, env)).output
    assert out.startswith("Archived copy of http://example.org/, snapshot of 2008-06-27:")
    assert "Opening hours: 9 to 17" in out
    (_, _, query), = [r for r in web.requests if r[1] == "/wayback/available"]
    assert query == {"url": ["http://example.org/"], "timestamp": ["20080627"]}
    result = await run(tools["archived_url"], {"url": "http://never-archived.example/"}, env)
    assert not result.ok and "no archived copy" in result.output


@pytest.mark.slow
async def test_summarize_page_asks_the_tools_model(tmp_path, settings, web):
    llm = scripted({"when": r"opened in 1923 by the astronomer Ilse Brandt.*Who opened the observatory",
                    "content": "1. Short answer: Ilse Brandt, in 1923."})
    env = make_env(tmp_path, settings, llm=llm)
    browser, tools = tools_for(env)
    out = (await run(tools["summarize_page"], {"question": "Who opened the observatory?",
                                               "url": web.url("/files/article.html")}, env)).output
    assert "Ilse Brandt, in 1923" in out and browser.address == "about:blank"  # the browser did not move
    assert env.usage["scripted"]["calls"] == 1
    result = await run(tools["summarize_page"], {"question": "x"}, env)
    assert not result.ok and "no page is open" in result.output


@pytest.mark.slow
async def test_summarize_without_a_model(env, web):
    _, tools = tools_for(env)
    result = await run(tools["summarize_page"], {"question": "x", "url": web.url("/files/article.html")}, env)
    assert not result.ok and "no chat model is configured" in result.output


async def test_long_documents_are_read_in_parts(tmp_path, settings):
    from kgagents.tools.files.qa import CHUNK_CHARS, answer_about_text

    llm = scripted({"when": "part 1 of 3", "content": "NOTHING RELEVANT"},
                   {"when": "part 2 of 3", "content": "The key is 7Q."},
                   {"when": "part 3 of 3", "content": "NOTHING RELEVANT"},
                   {"when": r"\[part 2\] The key is 7Q", "unless": r"\[part 1\]", "content": "The key is 7Q."})
    env = make_env(tmp_path, settings, llm=llm)
    text = ("filler line\n" * (CHUNK_CHARS // 12)) * 2 + "the key is 7Q\n" + "tail\n" * 100
    answer = await answer_about_text(env, text, "What is the key?")
    assert answer == "The key is 7Q." and env.usage["scripted"]["calls"] == 4
