"""Agent-G's graph module for CRAG against the mock KG API on loopback: entity linking, verbalised and ranked
paths, radius 2, every note, and whole Agent-G runs in generation mode whose first action uses the graph."""

from __future__ import annotations

import json

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs.agent_g import compile_graph
from kgagents.graphs.io import final_state
from kgagents.nodes.agent_g import AgentGContext
from kgagents.nodes.agent_g.crag_paths import crag_graph_retrieval
from kgagents.nodes.agent_g.crag_values import column_table, entity_kinds, value_of, verbalise
from kgagents.tools.crag_api import CragMockServer, default_calls_file
from tests.agent_g.conftest import comment, decide, step, validate
from tests.fakes import closed_port

MEMBERS = ["Adam Levine", "James Valentine", "Jesse Carmichael", "Matt Flynn", "Mickey Madden", "PJ Morton",
           "Ryan Dusick"]
#: Calls beyond the shipped ones: searches that link, and a person whose movie ids resolve (radius 2).
EXTRA = [
    ('api.music_search_artist_entity_by_name("maroon 5")',
     "{'result': ['Maroon 5', 'Maroon', 'Maroon 5 & Co']}"),
    ('api.music_search_artist_entity_by_name("Maroon Five")',
     "{'result': ['Adele', 'Maroon 5', 'Lady Gaga']}"),
    ('api.movie_get_person_info("Jason Statham")',
     ("{'result': [{'name': 'Jason Stratham', 'id': 1}, {'name': 'Jason Statham', 'id': 976, "
      "'acted_movies': [100, 4108], 'birthday': '1967-07-26'}]}")),
]
STATHAM_MOVIE = ("Jason Statham → movie_get_person_info → acted_movies → 100 → movie_get_movie_info_by_id → "
                 "title → Lock, Stock and Two Smoking Barrels")


@pytest.fixture(scope="module")
def api_url(tmp_path_factory):
    calls = json.loads(default_calls_file().read_text(encoding="utf-8"))["calls"]
    calls += [{"call": call, "output": output} for call, output in EXTRA]
    path = tmp_path_factory.mktemp("crag") / "calls.json"
    path.write_text(json.dumps({"calls": calls}), encoding="utf-8")
    with CragMockServer(path) as server:
        yield server.url


def action(domain, entities, relations=()):
    return {"domain": domain, "entities": [{"name": n, "type": t} for n, t in entities],
            "relations": list(relations), "module": "graph"}


async def retrieve(url, question, act, **ctx):
    return await crag_graph_retrieval(question, act, AgentGContext(crag_api_url=url, **ctx))


@pytest.mark.slow
async def test_the_members_of_maroon_5_as_ranked_paths(api_url):
    r = await retrieve(api_url, "Who is the lead singer of Maroon 5?",
                       action("music", [("maroon 5", "band")], ["get_members"]), top_k=5)
    assert r["module"] == "graph" and r["linked"] == {"maroon 5": "Maroon 5"} and r["notes"] == []
    assert len(r["references"]) == 5 and r["paths"] == [ref["text"] for ref in r["references"]]
    assert all(ref["kind"] == "path" and ref["id"].startswith("path-") for ref in r["references"])
    scores = [ref["score"] for ref in r["references"]]
    assert scores == sorted(scores, reverse=True)
    assert set(r["paths"]) < {f"Maroon 5 → music_get_members → {m}" for m in MEMBERS}
    everything = await retrieve(api_url, "Who is in Maroon 5?", action("music", [("maroon 5", "band")],
                                                                       ["music_get_members"]))
    assert sorted(everything["paths"]) == sorted(f"Maroon 5 → music_get_members → {m}" for m in MEMBERS)


@pytest.mark.slow
async def test_linking_exact_names_and_the_nearest_by_similarity(api_url):
    near = await retrieve(api_url, "Who plays in Maroon Five?", action("music", [("Maroon Five", "band")],
                                                                       ["music_get_members"]))
    assert near["linked"] == {"Maroon Five": "Maroon 5"} and len(near["paths"]) == len(MEMBERS)
    assert ("'Maroon Five' linked to 'Maroon 5' (the nearest of 3 music_search_artist_entity_by_name "
            "candidates)") in near["notes"]
    song = await retrieve(api_url, "Who wrote I can feel it?", action("music", [("I can feel IT", "song")],
                                                                      ["music_get_song_author"]))
    assert song["linked"] == {"I can feel IT": "I Can Feel It"}  # the 9th candidate: the same name, any case
    assert song["paths"] == ["I Can Feel It → music_get_song_author → Kane Brown"] and song["notes"] == []
    movie = await retrieve(api_url, "Jackson's birthday?", action("movie", [("Jackson", "actor")],
                                                                  ["movie_get_person_info"]), radius=1)
    assert "Jackson → movie_get_person_info → acted_movies → 137113" in movie["paths"]
    assert not any("Glenda" in p for p in movie["paths"])  # the record of the linked person only


@pytest.mark.slow
async def test_radius_two_resolves_movie_ids(api_url):
    act = action("movie", [("Jason Statham", "person")], ["movie_get_person_info"])
    two = await retrieve(api_url, "Which 1998 crime comedy did Jason Statham act in?", act, radius=2)
    assert two["linked"] == {"Jason Statham": "Jason Statham"} and STATHAM_MOVIE in two["paths"]
    assert any(p.startswith("Jason Statham → movie_get_person_info → acted_movies → 100 → "
                            "movie_get_movie_info_by_id → release_date → 1998") for p in two["paths"])
    assert "Jason Statham → movie_get_person_info → birthday → 1967-07-26" in two["paths"]
    assert not any("→ cast →" in p for p in two["paths"])  # resolved records: their own fields only
    one = await retrieve(api_url, "Which movies?", act, radius=1)
    assert STATHAM_MOVIE not in one["paths"]
    assert "Jason Statham → movie_get_person_info → acted_movies → 100" in one["paths"]


@pytest.mark.slow
async def test_values_tables_and_functions_of_several_arguments(api_url):
    games = await retrieve(api_url, "How many points did the Bulls score on 2022-10-11?",
                           action("sports", [("Chicago Bulls", "team"), ("2022-10-11", "date")],
                                  ["sports_nba_get_games_on_date"]), top_k=200)
    assert ("Chicago Bulls → sports_nba_get_games_on_date(date=2022-10-11) → CHI vs. MIL → pts_home → "
            "127.0") in games["paths"]
    billboard = await retrieve(api_url, "Which song was number 1 on 2024-02-28?",
                               action("music", [("1", "rank"), ("February 28, 2024", "date")],
                                      ["music_get_billboard_rank_date"]))
    rank_one = "1 → music_get_billboard_rank_date(date=2024-02-28) → "
    assert sorted(billboard["paths"]) == [rank_one + "Beyonce", rank_one + "Texas Hold 'Em"]
    weeks = await retrieve(api_url, "How many weeks was Texas Hold 'Em in the chart on 2024-02-28?",
                           action("music", [("Texas Hold 'Em", "song"), ("2024-02-28", "date")],
                                  ["music_get_billboard_attributes"]))
    assert weeks["paths"] == [("Texas Hold 'Em → music_get_billboard_attributes(date=2024-02-28, "
                               "attribute=weeks_in_chart) → 2")]  # every attribute asked, one was saved
    meta = await retrieve(api_url, "What is Meta's EPS?", action("finance", [("meta", "ticker_symbol")],
                                                                  ["get_eps", "finance_get_pe_ratio"]))
    assert meta["linked"] == {"meta": "META"}
    assert sorted(meta["paths"]) == ["META → finance_get_eps → 22.95",
                                     "META → finance_get_pe_ratio → 21.199127"]


@pytest.mark.slow
async def test_every_problem_is_a_note(api_url, monkeypatch):
    monkeypatch.delenv("CRAG_SERVER", raising=False)
    none = await crag_graph_retrieval("Q?", action("music", [("Adele", "artist")]), AgentGContext())
    assert none["references"] == [] and none["notes"][0].startswith("no CRAG API is configured")
    monkeypatch.setenv("CRAG_SERVER", api_url)  # the wrapper's variable, when the context names no API
    birth = action("music", [("Adele", "artist")], ["music_get_artist_birth_date"])
    via_env = await crag_graph_retrieval("Q?", birth, AgentGContext())
    assert via_env["paths"] == ["Adele → music_get_artist_birth_date → 1987"]

    down = await retrieve(f"http://127.0.0.1:{closed_port()}", "Q?", action("music", [("Adele", "artist")]))
    assert down["references"] == [] and any("cannot be reached" in n for n in down["notes"])

    missing = await retrieve(api_url, "Q?", action("movie", [("Zzyzx Qwerty", "person")],
                                                   ["movie_get_person_info"]))
    assert "entity not found: Zzyzx Qwerty (movie_get_person_info returned no record)" in missing["notes"]
    assert "no topic entity was found in CRAG's knowledge graphs" in missing["notes"]
    assert missing["linked"] == {}

    wrong = await retrieve(api_url, "Q?", action("music", [("Lady Gaga", "artist")],
                                                 ["music_get_members", "finance_get_eps", "get_shoe_size"]))
    assert "relations not in CRAG's API: get_shoe_size" in wrong["notes"]
    assert "relations of another domain than music: finance_get_eps" in wrong["notes"]
    assert "empty result: music_get_members(Lady Gaga)" in wrong["notes"] and wrong["linked"] == {
        "Lady Gaga": "Lady Gaga"}

    defaults = await retrieve(api_url, "How many Grammys has Adele won?",
                              action("music", [("Adele", "singer")]))
    assert defaults["notes"][0].startswith("no useful relation of the music domain was given: followed "
                                           "music_grammy_get_award_count_by_artist")
    assert "Adele → music_grammy_get_award_count_by_artist → 16" in defaults["paths"]

    nobody = await retrieve(api_url, "Q?", action("music", [], ["music_get_members"]))
    assert nobody["notes"] == ["no topic entity: the graph module needs the entities the question names"]

    cooking = await retrieve(api_url, "Q?", action("cooking", [("florida", "state")],
                                                   ["open_search_entity_by_name"]))
    assert cooking["notes"][:2] == [
        "unknown domain 'cooking': CRAG's domains are music, movie, finance, sports and encyclopedia",
        "the open domain is used (the domain of the relations)"]

    needs_date = await retrieve(api_url, "Q?", action("sports", [("Everton", "team")],
                                                      ["sports_soccer_get_games_on_date"]))
    assert "sports_soccer_get_games_on_date needs a date (date): no topic entity gives one" in \
        needs_date["notes"]

    failing = await retrieve(api_url + "/nowhere", "Q?",
                             action("music", [("Adele", "artist")], ["music_get_lifespan"]))
    assert any("failed: music_get_lifespan: the CRAG API answered HTTP 404" in n for n in failing["notes"])


def test_verbalising_results():
    paths, more = verbalise(["Adele", "music_get_lifespan"], ["1988", None])
    assert paths == ["Adele → music_get_lifespan → 1988"] and not more
    record = {"name": "X", "genres": [{"id": 1, "name": "Comedy"}], "budget": 10, "bio": "a" * 500}
    paths, _ = verbalise(["X", "movie_get_movie_info"], record)
    assert "X → movie_get_movie_info → genres → Comedy → id → 1" in paths
    assert max(len(p) for p in paths) < 260 and any(p.endswith("…") for p in paths)  # long values are cut
    prices = {"2024-01-01 00:00:00 EST": {"Close": 1.0}, "2024-02-01 00:00:00 EST": {"Close": 2.0}}
    paths, more = verbalise(["META", "finance_get_price_history"], prices, limit=1)
    assert paths == ["META → finance_get_price_history → 2024-02-01 00:00:00 EST → Close → 2.0"] and more
    table = {"team": {"0": "A", "1": "B"}, "pts": {"0": 1, "1": 2}}
    assert column_table(table) == [("row 0", {"team": "A", "pts": 1}), ("row 1", {"team": "B", "pts": 2})]
    assert column_table(prices) is None
    assert entity_kinds("Band", "music") == {"artist"}
    assert entity_kinds("ticker_symbol", "finance") == {"ticker"}
    assert entity_kinds("company", "finance") == {"company", "ticker"} and entity_kinds("", "music") is None
    assert entity_kinds("anything", "open") == {"entity"}
    assert value_of("date", "March 9, 2024", typed=True) == "2024-03-09" and value_of("year", "in 1998",
                                                                                        typed=False) is None
    assert value_of("year", "the year 1998", typed=True) == "1998"
    assert value_of("rank", "#1", typed=False) == 1


# ------------------------------------------------------------------------------------------------------------
# Whole runs
# ------------------------------------------------------------------------------------------------------------
async def run_agent_g(task, steps, **ctx):
    model = ScriptedChatModel(steps=steps)
    context = AgentGContext(model=model, api_backoff_base_s=0.001, task="generation", **ctx)
    graph = compile_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "crag"}, "recursion_limit": context.recursion_limit}
    state = await final_state(graph, task, config, context=context)
    return state, model


@pytest.mark.slow
async def test_agent_g_answers_from_the_knowledge_graph(api_url):
    steps = [decide(1, entities=[("maroon 5", "band")], relations=["music_get_members"], domain="music",
                    question_type="set", dynamism="slow-changing"),
             step(r"\[stage: generator, iteration 1\].*Maroon 5 → music_get_members → PJ Morton",
                  content="1. Who are the members? The references list them.\n"
                          "Final answer: Adam Levine, PJ Morton"),
             validate(1, "yes", context=".*Maroon 5 → music_get_members")]
    task = {"question": "who are the members of maroon 5?", "query_time": "03/01/2024, 10:00:00 PT"}
    state, model = await run_agent_g(task, steps, crag_api_url=api_url)
    assert state["final_answer"] == "Adam Levine, PJ Morton"
    assert state["exit_reason"] == "accepted at iteration 1"
    first = state["iterations"][0]
    assert first["action"]["module"] == "graph" and first["retrieval"]["module"] == "graph"
    assert first["retrieval"]["linked"] == {"maroon 5": "Maroon 5"} and len(first["retrieval"]["paths"]) == 7
    assert "music_get_members" in model.calls[0]  # the relations to choose from: the API's functions
    assert "finance_get_price_history" in model.calls[0]


@pytest.mark.slow
async def test_the_commentor_reads_the_notes_and_the_agent_switches_to_the_pages(monkeypatch):
    monkeypatch.delenv("CRAG_SERVER", raising=False)
    pages = [{"name": "Maroon 5", "url": "https://example.org/m5",
              "html": "<html><body><p>Maroon 5 members: Adam Levine, PJ Morton.</p></body></html>"}]
    steps = [decide(1, entities=[("maroon 5", "band")], relations=["music_get_members"], domain="music"),
             step(r"\[stage: generator, iteration 1\].*no CRAG API is configured",
                  content="Final answer: I don't know"),
             validate(1, "no"),
             comment(1, "incorrect retrieval module", "the graph gave nothing"),
             step(r"\[stage: commentor", times=0, structured={"error_type": "incorrect retrieval module"}),
             decide(2, source="text documents", domain="music"),
             step(r"\[stage: generator, iteration 2\].*Adam Levine", content="Final answer: Adam Levine"),
             validate(2, "yes")]
    state, model = await run_agent_g({"question": "who sings in maroon 5?", "pages": pages}, steps)
    commentor_prompt = next(c for c in model.calls if "[stage: commentor, iteration 1]" in c)
    assert "note: no CRAG API is configured" in commentor_prompt
    assert [i["retrieval"]["module"] for i in state["iterations"]] == ["graph", "text"]
    assert state["final_answer"] == "Adam Levine"
