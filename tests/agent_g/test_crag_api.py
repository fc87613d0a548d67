"""CRAG's mock KG API: the function list, the real client against the mock server of saved calls on loopback
(names case-insensitive, cut outputs recovered, unknown entities, bad calls), failing servers, and the command
line."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from kgagents.tools.crag_api import (
    FUNCTIONS,
    CragAPI,
    CragAPIError,
    CragMockServer,
    default_calls_file,
    load_calls,
    parse_repr,
    relation_types,
)
from tests.fakes import closed_port


@pytest.fixture(scope="module")
def server():
    with CragMockServer() as running:
        yield running


def saved_output(call: str) -> str:
    calls = json.loads(default_calls_file().read_text(encoding="utf-8"))["calls"]
    return next(c["output_repr_truncated"] for c in calls if c["call"] == call)


def test_the_function_list_covers_every_saved_call_and_maps_endpoints():
    names = relation_types()
    assert len(names) == 38 and len(set(names)) == 38 and "music_get_members" in names
    assert {n.split("_", 1)[0] for n in names} == {"open", "movie", "finance", "music", "sports"}
    assert {c.function for c in load_calls(default_calls_file())} <= set(names)
    fn = FUNCTIONS
    assert fn["open_search_entity_by_name"].path == "/open/search_entity_by_name"
    assert fn["sports_nba_get_games_on_date"].path == "/sports/nba/get_games_on_date"
    assert fn["sports_soccer_get_games_on_date"].path == "/sports/soccer/get_games_on_date"
    assert fn["music_get_members"].bind(["Maroon 5"]) == {"query": "Maroon 5"}
    assert fn["music_get_billboard_rank_date"].bind([1, "2024-02-28"]) == {"rank": 1, "date": "2024-02-28"}
    assert fn["music_get_billboard_rank_date"].bind([1]) == {"rank": 1, "date": None}
    assert fn["music_get_billboard_attributes"].bind(["2024-02-28", "weeks_in_chart", "X"]) == {
        "date": "2024-02-28", "attribute": "weeks_in_chart", "song_name": "X"}
    assert fn["sports_nba_get_games_on_date"].bind(["2022-10-11"], {"team_name": "Chicago Bulls"}) == {
        "date": "2022-10-11", "team_name": "Chicago Bulls"}
    assert fn["movie_get_movie_info_by_id"].bind(["100"]) == {"query": 100}  # the endpoint takes a number
    plays = fn["sports_nba_get_play_by_play_data_by_game_ids"]
    assert plays.bind([["0012200049"]]) == {"game_ids": ["0012200049"]}
    assert fn["music_grammy_get_all_awarded_artists"].bind([]) == {}


async def test_saved_calls_answer_through_the_client(server):
    async with CragAPI(server.url) as api:
        members = await api.call("music_get_members", "Maroon 5")
        assert members == parse_repr(saved_output('api.music_get_members("Maroon 5")'))["result"]
        assert "Adam Levine" in members
        # names match case-insensitively, with spaces collapsed
        assert await api.call("music_get_members", "  maroon   5 ") == members
        assert await api.call("music_search_song_entity_by_name", "i can feel it") == (
            await api.call("music_search_song_entity_by_name", "I can feel IT"))
        assert await api.call("finance_get_eps", "meta") == 22.95
        rank = await api.call("music_get_billboard_rank_date", 1, "2024-02-28")
        assert rank == [["Texas Hold 'Em"], ["Beyonce"]]
        assert await api.call("music_get_billboard_attributes", "2024-02-28", "weeks_in_chart",
                              "texas hold 'em") == "2"
        by_number = await api.call("movie_get_movie_info_by_id", 100)
        assert by_number == await api.call("movie_get_movie_info_by_id", "100")
        assert "Adele" in await api.call("music_grammy_get_all_awarded_artists")
        bulls = await api.call("sports_nba_get_games_on_date", "2022-10-11", team_name="chicago bulls")
        assert bulls["team_name_home"] == {"0": "Chicago Bulls"}


async def test_cut_outputs_are_recovered_as_far_as_they_parse(server):
    entity = await CragAPI(server.url).call("open_get_entity", "florida city, florida")
    text = entity["summary_text"]
    assert text.startswith("Florida City is a city in Miami-Dade County") and text.endswith("…")
    assert text.endswith("communities in the area are Redland, Le…")  # where the saved output was cut
    assert saved_output('api.open_get_entity("Florida City, Florida")').endswith("Redland, Le")
    prices = await CragAPI(server.url).call("finance_get_price_history", "META")
    assert prices["2023-02-28 00:00:00 EST"]["Close"] == pytest.approx(174.754592, abs=1e-5)
    assert all(set(day) <= {"Open", "High", "Low", "Close", "Volume"} for day in prices.values())
    async with httpx.AsyncClient() as client:
        cut = await client.post(server.url + "/open/get_entity", json={"query": "Florida City, Florida"})
        whole = await client.post(server.url + "/music/get_members", json={"query": "Maroon 5"})
    assert cut.headers["x-crag-mock"] == "saved-truncated" and whole.headers["x-crag-mock"] == "saved"


async def test_unknown_entities_get_the_apis_empty_answers(server):
    api = CragAPI(server.url)
    assert await api.call("music_get_members", "The Unknown Band") is None
    assert await api.call("music_search_artist_entity_by_name", "zzzz") == []
    assert await api.call("music_grammy_get_award_count_by_artist", "Nobody") == 0
    assert await api.call("music_get_lifespan", "Nobody") == [None, None]
    assert await api.call("finance_get_eps", "NOPE") is None
    async with httpx.AsyncClient() as client:
        reply = await client.post(server.url + "/music/get_members", json={"query": "The Unknown Band"})
    assert reply.json() == {"result": None} and reply.headers["x-crag-mock"] == "not-saved"


async def test_bad_calls_are_clear_errors(server):
    api = CragAPI(server.url)
    with pytest.raises(CragAPIError, match="no function 'music_get_member'; did you mean music_get_members") \
            as err:
        await api.call("music_get_member", "Maroon 5")
    assert err.value.kind == "unknown-function"
    for args, message in [((), "band_name is required"), (("a", "b"), r"takes 1 argument\(s\), 2 given")]:
        with pytest.raises(CragAPIError, match=message) as err:
            await api.call("music_get_members", *args)
        assert err.value.kind == "arguments"
    with pytest.raises(CragAPIError, match="movie_id must be a whole number"):
        await api.call("movie_get_movie_info_by_id", "one hundred")
    with pytest.raises(CragAPIError, match="attribute must be one of"):
        await api.call("music_get_billboard_attributes", "2024-02-28", "colour", "x")
    with pytest.raises(CragAPIError, match="has no argument 'band'"):
        await api.call("music_get_members", band="Maroon 5")
    # the server checks bodies too (as CRAG's FastAPI does): 422
    async with httpx.AsyncClient() as client:
        assert (await client.post(server.url + "/music/get_members", json={"band": "x"})).status_code == 422
        assert (await client.post(server.url + "/music/get_members", content=b"{oops")).status_code == 422
    with pytest.raises(CragAPIError, match="HTTP 404") as err:
        await CragAPI(server.url + "/elsewhere").call("music_get_members", "Maroon 5")
    assert err.value.kind == "http"
    with pytest.raises(CragAPIError, match="must be an http"):
        CragAPI("localhost:8000")


async def test_a_server_that_is_down_is_a_clear_error():
    with pytest.raises(CragAPIError, match=r"cannot be reached .*is the server running") as err:
        await CragAPI(f"http://127.0.0.1:{closed_port()}").call("music_get_members", "Maroon 5")
    assert err.value.kind == "unreachable"


class _Broken(BaseHTTPRequestHandler):
    """Answers every POST with the body its path names (``/text/...``, ``/noresult/...``) or too late."""

    def do_POST(self) -> None:
        if self.path.startswith("/slow"):
            time.sleep(1.5)
        body = {"/text": b"<html>not json</html>", "/noresult": b'{"answer": 1}'}.get(
            "/" + self.path.split("/")[1], b'{"result": 1}')
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def broken():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Broken)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.slow
async def test_malformed_answers_and_timeouts_are_clear_errors(broken):
    with pytest.raises(CragAPIError, match="not JSON") as err:
        await CragAPI(broken + "/text").call("music_get_members", "x")
    assert err.value.kind == "malformed"
    with pytest.raises(CragAPIError, match='has no "result"') as err:
        await CragAPI(broken + "/noresult").call("music_get_members", "x")
    assert err.value.kind == "malformed"
    with pytest.raises(CragAPIError, match="did not answer music_get_members in time") as err:
        await CragAPI(broken + "/slow", timeout_s=0.3).call("music_get_members", "x")
    assert err.value.kind == "timeout"
    assert await CragAPI(broken + "/fine").call("music_get_members", "x") == 1


def test_calls_files_with_errors_name_the_file_and_the_call(tmp_path):
    def write(calls):
        path = tmp_path / "calls.json"
        path.write_text(json.dumps({"calls": calls}), encoding="utf-8")
        return path

    with pytest.raises(ValueError, match="cannot read the CRAG calls file"):
        load_calls(tmp_path / "missing.json")
    with pytest.raises(ValueError, match=r"call 0 \(api.music_get_members\(\"x\"\)\): no output"):
        load_calls(write([{"call": 'api.music_get_members("x")'}]))
    with pytest.raises(ValueError, match=r"call 1 .*no function 'music_get_nothing'"):
        load_calls(write([{"call": 'api.music_get_members("x")', "output": "{'result': None}"},
                          {"call": 'api.music_get_nothing("x")', "output": "{'result': None}"}]))
    with pytest.raises(ValueError, match="not a Python literal"):
        load_calls(write([{"call": 'api.music_get_members("x")', "output": "<object at 0x1>"}]))
    with pytest.raises(ValueError, match="arguments must be literals"):
        load_calls(write([{"call": "api.music_get_members(band)", "output": "{'result': None}"}]))
    with pytest.raises(OSError, match="cannot listen"), CragMockServer(write([]), host="192.0.2.1"):
        pass


@pytest.mark.slow
def test_serve_by_hand_then_call_and_list(tmp_path):
    port = closed_port()
    calls = tmp_path / "calls.json"
    calls.write_text(json.dumps({"calls": [{"call": 'api.music_get_members("The Band")',
                                            "output": "{'result': ['Robbie Robertson', 'Levon Helm']}"}]}))
    module = [sys.executable, "-m", "kgagents.tools.crag_api"]
    server = subprocess.Popen([*module, "serve", "--calls", str(calls), "--port", str(port)],
                              stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                httpx.get(url + "/", timeout=1.0)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        called = subprocess.run([*module, "call", "music_get_members", "the band", "--url", url],
                                capture_output=True, text=True, timeout=60, check=False)
        assert called.returncode == 0 and json.loads(called.stdout) == ["Robbie Robertson", "Levon Helm"]
        failed = subprocess.run([*module, "call", "music_get_membres", "x", "--url", url],
                                capture_output=True, text=True, timeout=60, check=False)
        assert failed.returncode == 1 and "did you mean music_get_members" in failed.stderr
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    assert "1 saved call(s)" in err
    listed = subprocess.run([*module, "functions"], capture_output=True, text=True, timeout=60, check=True)
    assert "music_get_billboard_rank_date(rank, date=None)" in listed.stdout
    assert "/sports/nba/" in listed.stdout
