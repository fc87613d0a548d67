"""A served kgagents trusts its callers only with what a caller may choose: `langgraph dev` started with two
callers' tokens (alice, bob), the operator's API key and Neo4j password in its environment, an operator's own
CLI run in its runs directory and 0600 files of the operator outside every folder a caller may name, then attacked
through its API as a caller would: without a token, as the other caller, with a context that would send the key
or the password to a loopback listener (which records whatever reaches it), with server paths as inputs, by
writing its own thread's state, through MCP and LangGraph's event streaming. Each attack worked on the code
before served mode had rules of its own (the planted graph references and the cron's owner: before its state
writes were refused)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import pickle
import re
import socket
import stat
import threading
import uuid
from importlib import resources
from pathlib import Path

import httpx
import pytest
import websockets
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError

from kgagents.core.runs import open_checkpointer
from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.grbench import fixture_graph
from kgagents.graphs import kgot
from kgagents.graphs.io import final_state
from kgagents.nodes.kgot import KGoTContext
from kgagents.tools.pgraph import import_graph
from tests.evals.test_baselines import KGOT_FAST, RAG, kgot_tool_steps
from tests.test_studio import serve

pytestmark = pytest.mark.slow

ALICE = "alice-token-" + "a1" * 12
BOB = "bob-token-" + "b2" * 12
#: What the operator's environment holds, and its CLI run: none of it may reach a caller.
API_KEY = "sk-canary-operator-key-6c1f0d"
NEO4J_PASSWORD = "canary-neo4j-password-93ab"
VAULT = "The vault code is 4417."
KGOT_QUESTION = ("A C++ script holds the array [42, 23, 2, 88, 37, 15]. Sort the array and return the sum of "
                 "the third and fifth integers of the sorted list.")


class ExecOnLoad:
    """A pickle that runs ``code`` when it is loaded (here: writes what the server's environment holds into a
    marker file)."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self):
        return exec, (self.code,)


class Recorder:
    """A loopback TCP listener that records every connection and the bytes it received (answering a Bolt
    handshake with version 4.4, so that a Bolt driver goes on to send its credentials)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        data = b""
        conn.settimeout(3)
        try:
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
                if data.startswith(b"\x60\x60\xb0\x17") and len(data) == 20:
                    conn.sendall(b"\x00\x00\x04\x04")
        except OSError:
            pass
        finally:
            self.received.append(data)
            conn.close()

    def close(self) -> None:
        self._stop = True
        self.sock.close()


@pytest.fixture(scope="module")
def listener():
    recorder = Recorder()
    yield recorder
    recorder.close()


def operators_cli_run(runs: Path) -> None:
    """A KGoT run the operator made with the CLI (thread ``operator-private``), whose tool output holds a secret,
    in the runs directory the server uses too."""
    model = ScriptedChatModel(steps=kgot_tool_steps({"Q7": VAULT}))
    ctx = KGoTContext(model=model, work_dir=str(runs / "operator-work"), **KGOT_FAST)

    async def run() -> None:
        async with open_checkpointer(runs / "checkpoints.sqlite") as saver:
            await final_state(kgot.compile_graph(saver), {"question": "Question Q7: what is it?"},
                              {"configurable": {"thread_id": "operator-private"}, "recursion_limit": 100},
                              context=ctx)

    asyncio.run(run())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    demo = json.loads((resources.files("kgagents") / "data" / "demo_kgot_figure9.json").read_text("utf-8"))
    script = tmp / "script.json"
    script.write_text(json.dumps({"name": "served", "steps": [
        *demo["steps"], {"when": RAG, "times": 0, "content": "FINAL ANSWER: from the tool outputs"}]}),
        encoding="utf-8")
    (tmp / "runs").mkdir()
    operators_cli_run(tmp / "runs")
    import_graph(fixture_graph("goodreads"), name="goodreads", to=tmp / "graphs" / "goodreads")
    operator = tmp / "operator"
    operator.mkdir(mode=0o700)
    for name, text in (("secrets.txt", f"OPENAI_API_KEY={API_KEY}\nNEO4J_PASSWORD={NEO4J_PASSWORD}\n"),
                       ("private.tsv", "vault_code\tis\t4417\nalice_salary\tis\t120000 USD\n")):
        (operator / name).write_text(text, encoding="utf-8")
        os.chmod(operator / name, stat.S_IRUSR | stat.S_IWUSR)
    yield from serve(tmp, KGAGENTS_SERVE_TOKENS=f"alice:{ALICE},bob:{BOB}", KGAGENTS_MODEL=f"scripted:{script}",
                     KGAGENTS_SERVE_MODELS=f"scripted:{script}", KGAGENTS_API_KEY=API_KEY, OPENAI_API_KEY=API_KEY,
                     NEO4J_USER="neo4j", NEO4J_PASSWORD=NEO4J_PASSWORD)


def clients(url: str):
    return get_client(url=url, api_key=ALICE), get_client(url=url, api_key=BOB)


def status_of(exc: Exception) -> int:
    """The HTTP status of the SDK's error (its streaming and waiting calls raise httpx's own)."""
    return exc.status_code if isinstance(exc, APIStatusError) else exc.response.status_code


async def refused(call, statuses=(403, 404)) -> str:
    """Await ``call``, which the server must refuse; the refusal's text."""
    with pytest.raises((APIStatusError, httpx.HTTPStatusError)) as info:
        await call
    assert status_of(info.value) in statuses, (status_of(info.value), str(info.value))
    if isinstance(info.value, httpx.HTTPStatusError):
        await info.value.response.aread()
        return info.value.response.text
    return str(info.value.body) + str(info.value)


async def nothing(call) -> None:
    """Await ``call``, which must find nothing: refused (403, 404), or an empty answer."""
    try:
        result = await call
    except (APIStatusError, httpx.HTTPStatusError) as exc:
        assert status_of(exc) in (403, 404), status_of(exc)
    else:
        assert not result, str(result)[:300]


async def finished(client, thread_id: str, run: dict) -> dict:
    await client.runs.join(thread_id, run["run_id"])
    return await client.runs.get(thread_id, run["run_id"])


def no_secret_reached(listener: Recorder) -> None:
    received = b"".join(listener.received)
    assert not listener.received, f"{len(listener.received)} connection(s) reached the listener: {received[:300]!r}"


# --------------------------------------------------------------------------------------------------------------
# Who may call
# --------------------------------------------------------------------------------------------------------------
async def test_a_request_without_a_callers_token_is_refused(server):
    url, _ = server
    anonymous = [{}, {"x-auth-scheme": "langsmith"}, {"x-auth-scheme": "langsmith", "x-api-key": ALICE[:-1] + "x"},
                 {"Authorization": "Bearer wrong-token-0123456789abcdef"}, {"Authorization": f"Basic {ALICE}"}]
    requests = [("POST", "/assistants/search", {"limit": 5}), ("POST", "/threads/search", {}),
                ("POST", "/threads", {}), ("POST", "/runs/wait", {"assistant_id": "kgot", "input": {"question": "q"}}),
                ("GET", f"/threads/{uuid.uuid4()}", None), ("POST", "/store/items/search", {}),
                ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})]
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        for headers in anonymous:
            for method, path, body in requests:
                response = await http.request(method, path, json=body,
                                              headers={**headers, "Accept": "application/json, text/event-stream"})
                assert response.status_code in (401, 403), (headers, path, response.status_code, response.text[:300])
        for headers in ({"Authorization": f"Bearer {ALICE}"}, {"x-api-key": BOB}):
            assert (await http.post("/assistants/search", json={"limit": 5}, headers=headers)).status_code == 200


async def test_a_second_caller_cannot_reach_the_first_callers_threads_and_runs(server):
    url, _ = server
    alice, bob = clients(url)
    thread = await alice.threads.create(metadata={"topic": "mine"})
    tid = thread["thread_id"]
    run = await alice.runs.create(tid, "kgot", input={"question": KGOT_QUESTION})
    assert (await finished(alice, tid, run))["status"] == "success"
    later = await alice.runs.create(tid, "kgot", input={"question": KGOT_QUESTION}, after_seconds=3600,
                                    multitask_strategy="enqueue")  # pending: something bob could cancel
    attempts = {
        "read the thread": lambda: bob.threads.get(tid),
        "read its state": lambda: bob.threads.get_state(tid),
        "read its history": lambda: bob.threads.get_history(tid),
        "update it": lambda: bob.threads.update(tid, metadata={"owner": "bob"}),
        "write its state": lambda: bob.threads.update_state(tid, {"question": "bob's"}),
        "copy it": lambda: bob.threads.copy(tid),
        "list its runs": lambda: bob.runs.list(tid),
        "read a run": lambda: bob.runs.get(tid, run["run_id"]),
        "join a run": lambda: bob.runs.join(tid, run["run_id"]),
        "resume it": lambda: bob.runs.create(tid, "kgot", input={"question": "bob's question"}),
        "cancel a run": lambda: bob.runs.cancel(tid, later["run_id"]),
        "delete a run": lambda: bob.runs.delete(tid, run["run_id"]),
        "delete the thread": lambda: bob.threads.delete(tid),
        "take over its id": lambda: bob.threads.create(thread_id=tid, if_exists="do_nothing"),
    }
    for what, call in attempts.items():
        try:
            result = await call()
        except (APIStatusError, httpx.HTTPStatusError) as exc:  # 409: a copy of a thread it does not find
            assert status_of(exc) in (403, 404, 409), (what, status_of(exc))
        else:
            assert not result, f"bob could {what}: {str(result)[:300]}"
    with contextlib.suppress(APIStatusError):  # "no runs found to cancel": bob's own, of which he has none
        await bob.runs.cancel_many(status="all")
    assert tid not in {t["thread_id"] for t in await bob.threads.search(limit=1000)}
    assert not await bob.threads.search(metadata={"owner": "alice"})
    assert not await bob.threads.search(metadata={"topic": "mine"})
    # alice's thread is as she left it, and her pending run still waits
    assert (await alice.threads.get(tid))["metadata"]["owner"] == "alice"
    assert (await alice.threads.get_state(tid))["values"]["final_answer"] == "65"
    assert (await alice.runs.get(tid, later["run_id"]))["status"] == "pending"
    assert {r["run_id"] for r in await alice.runs.list(tid)} == {run["run_id"], later["run_id"]}
    await alice.runs.cancel(tid, later["run_id"])


async def test_store_items_and_crons_are_their_creators(server):
    url, _ = server
    alice, bob = clients(url)
    await alice.store.put_item(["notes"], "k", {"text": "alice's note"})
    assert (await alice.store.get_item(["notes"], "k"))["value"] == {"text": "alice's note"}
    await nothing(bob.store.get_item(["notes"], "k"))
    await nothing(bob.store.get_item(["alice", "notes"], "k"))
    assert not (await bob.store.search_items(["notes"]))["items"]
    assert not (await bob.store.search_items([]))["items"]
    assert all(ns[0] == "bob" for ns in (await bob.store.list_namespaces())["namespaces"])  # his own only
    await bob.store.delete_item(["notes"], "k")
    assert (await alice.store.get_item(["notes"], "k"))["value"] == {"text": "alice's note"}

    thread = await alice.threads.create()
    cron = await alice.crons.create_for_thread(thread["thread_id"], "kgot", schedule="0 0 1 1 *",
                                               input={"question": KGOT_QUESTION})
    assert cron["cron_id"] in {c["cron_id"] for c in await alice.crons.search()}
    assert cron["cron_id"] not in {c["cron_id"] for c in await bob.crons.search()}
    try:
        await bob.crons.delete(cron["cron_id"])
    except APIStatusError as exc:
        assert exc.status_code in (403, 404)
    assert cron["cron_id"] in {c["cron_id"] for c in await alice.crons.search()}
    await refused(bob.crons.create_for_thread(thread["thread_id"], "kgot", schedule="0 0 1 1 *",
                                              input={"question": "q"}))
    await alice.crons.delete(cron["cron_id"])


async def test_a_cron_stays_its_creators(server):
    """Bob cannot give his cron (bound to his thread) to alice by its metadata, as a thread or an assistant
    cannot be given away: alice would then change what it runs on bob's thread."""
    url, _ = server
    alice, bob = clients(url)
    thread = await bob.threads.create()
    cron = await bob.crons.create_for_thread(thread["thread_id"], "kgot", schedule="0 0 1 1 *",
                                             input={"question": "bob's"})
    updated = await bob.crons.update(cron["cron_id"], metadata={"owner": "alice", "note": "weekly"})
    assert updated["metadata"]["owner"] == "bob" and updated["metadata"]["note"] == "weekly", updated["metadata"]
    assert cron["cron_id"] not in {c["cron_id"] for c in await alice.crons.search()}
    await refused(alice.crons.update(cron["cron_id"], input={"question": "alice's"}))
    await bob.crons.delete(cron["cron_id"])


# --------------------------------------------------------------------------------------------------------------
# What a caller may choose
# --------------------------------------------------------------------------------------------------------------
async def test_a_context_a_caller_may_not_choose_is_refused_and_reaches_nothing(server, listener):
    url, tmp = server
    alice, _ = clients(url)
    elsewhere = tmp / "attacker-chosen-dir"
    listen = f"127.0.0.1:{listener.port}"
    attacks = {
        "base_url": {"model": "gpt-4o-mini", "base_url": f"http://{listen}/v1"},
        "kg_url": {"backend": "neo4j", "kg_url": f"bolt://{listen}"},
        "work_dir": {"work_dir": str(elsewhere)},
        "allow_weak_sandbox": {"allow_weak_sandbox": True},
        "model": {"model": f"scripted:{tmp / 'other-script.json'}"},
        "tools_model": {"tools_model": "openai:gpt-4o"},
    }
    for field, context in attacks.items():
        thread = await alice.threads.create()
        text = await refused(alice.runs.create(thread["thread_id"], "kgot", input={"question": KGOT_QUESTION},
                                               context=context), (403,))
        assert f"{field}:" in text, text
        text = await refused(alice.runs.wait(None, "kgot", input={"question": KGOT_QUESTION},
                                             config={"configurable": context}), (403,))
        assert f"{field}:" in text, text
    text = await refused(alice.crons.create("kgot", schedule="0 0 1 1 *", input={"question": "q"},
                                            context=attacks["base_url"]), (403,))
    assert "base_url:" in text
    await asyncio.sleep(2)  # a run that was let through would be calling out by now
    no_secret_reached(listener)
    assert not elsewhere.exists()


async def test_assistants_are_readable_by_all_and_changed_only_by_their_creator(server, listener):
    url, _ = server
    alice, bob = clients(url)
    text = await refused(alice.assistants.create("kgot", context={"base_url": f"http://127.0.0.1:{listener.port}"}),
                         (403,))
    assert "base_url:" in text
    mine = await alice.assistants.create("kgot", context={"temperature": 0.0, "max_iterations": 3}, name="alice's")
    assert mine["assistant_id"] in {a["assistant_id"] for a in await bob.assistants.search(limit=100)}
    await refused(bob.assistants.update(mine["assistant_id"], context={"temperature": 1.0}))
    await refused(bob.assistants.delete(mine["assistant_id"]))
    await refused(alice.assistants.update(mine["assistant_id"], context={"work_dir": "/tmp"}), (403,))
    system = (await alice.assistants.search(graph_id="kgot"))
    kgot_id = next(a["assistant_id"] for a in system if a["metadata"].get("created_by") == "system")
    await refused(alice.assistants.update(kgot_id, context={"temperature": 1.0}))
    await refused(bob.assistants.delete(kgot_id))
    updated = await alice.assistants.update(mine["assistant_id"], context={"temperature": 0.5})
    assert updated["context"] == {"temperature": 0.5}
    no_secret_reached(listener)


async def test_attachments_are_content_and_never_a_path_of_the_server(server):
    url, tmp = server
    alice, _ = clients(url)
    secret = tmp / "server.env"
    secret.write_text(f"OPENAI_API_KEY={API_KEY}\n", encoding="utf-8")
    thread = await alice.threads.create()
    text = await refused(alice.runs.create(thread["thread_id"], "kgot",
                                           input={"question": KGOT_QUESTION, "attachments": [str(secret)]}), (403,))
    assert "never a path of the server" in text
    text = await refused(alice.runs.create(thread["thread_id"], "kgot", input={"question": KGOT_QUESTION},
                                           command={"update": {"attachments": [str(secret)]}}), (403,))
    assert "takes no update" in text
    note = {"name": "note.txt", "content_base64": base64.b64encode(b"sort them first").decode()}
    result = await alice.runs.wait(thread["thread_id"], "kgot",
                                   input={"question": KGOT_QUESTION, "attachments": [note]})
    assert result["final_answer"] == "65"
    [path] = (await alice.threads.get_state(thread["thread_id"]))["values"]["attachments"]
    written = Path(path)
    assert written == tmp / "runs" / "work" / thread["thread_id"] / "attachments" / "note.txt"
    assert written.read_bytes() == b"sort them first" and stat.S_IMODE(written.stat().st_mode) == 0o600
    # a path written into the thread's state: refused (the graph would refuse it too, outside the run's folder)
    await refused(alice.threads.update_state(thread["thread_id"], {"attachments": [str(secret)]}), (403,))
    assert (await alice.threads.get_state(thread["thread_id"]))["values"]["attachments"] == [path]


async def test_graphs_are_named_by_catalog_name_and_kg_file_is_refused(server):
    url, tmp = server
    alice, _ = clients(url)
    source = str(fixture_graph("goodreads"))
    for graph_id, graph_input in (("grounded", {"graph": source}), ("agent-g", {"graph": str(tmp / "graphs")}),
                                  ("ark", {"kg_file": str(tmp / "server.json")}), ("graph-rag", {"graph": "/etc"})):
        thread = await alice.threads.create()
        text = await refused(alice.runs.create(thread["thread_id"], graph_id,
                                               input={"question": "Who wrote it?", **graph_input}), (403,))
        assert "never by a path" in text or "takes no kg_file" in text, text


async def test_a_kgot_thread_is_read_by_its_own_caller_only(server):
    url, _ = server
    alice, bob = clients(url)
    # the operator's own CLI run, in the runs directory the server shares: no caller reads it
    thread = await bob.threads.create()
    run = await bob.runs.create(thread["thread_id"], "rag",
                                input={"question": "Question Q7: what is it?", "kgot_thread": "operator-private"})
    assert (await finished(bob, thread["thread_id"], run))["status"] == "error"
    assert "4417" not in json.dumps((await bob.threads.get_state(thread["thread_id"]))["values"])
    # alice's served KGoT thread: hers to read, not bob's
    kgot_thread = await alice.threads.create()
    assert (await alice.runs.wait(kgot_thread["thread_id"], "kgot",
                                  input={"question": KGOT_QUESTION}))["final_answer"] == "65"
    thread = await bob.threads.create()
    run = await bob.runs.create(thread["thread_id"], "rag",
                                input={"question": KGOT_QUESTION, "kgot_thread": kgot_thread["thread_id"]})
    assert (await finished(bob, thread["thread_id"], run))["status"] == "error"
    assert "chunks" not in (await bob.threads.get_state(thread["thread_id"]))["values"]
    thread = await alice.threads.create()
    result = await alice.runs.wait(thread["thread_id"], "rag",
                                   input={"question": KGOT_QUESTION, "kgot_thread": kgot_thread["thread_id"]})
    assert result["final_answer"] == "from the tool outputs"
    values = (await alice.threads.get_state(thread["thread_id"]))["values"]
    assert values["corpus_source"] == f"KGoT thread {kgot_thread['thread_id']}" and values["chunks"]


# --------------------------------------------------------------------------------------------------------------
# A thread's state is written by its runs only
# --------------------------------------------------------------------------------------------------------------
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
    except Exception as exc:  # noqa: BLE001 (the SDK raises a bare Exception for a run's error)
        return str(exc)
    return ""


async def no_state_written(client, thread_id: str, graph_id: str, values: dict, as_node: str) -> None:
    """Every way a caller could write ``values`` into its thread's state is refused: ``update_state``, a run's
    ``Command`` with an update (or a goto), and a new thread's ``supersteps`` (the thread is made, its state is
    not: LangGraph answers 201 with the refusal)."""
    before = (await client.threads.get_state(thread_id))["values"]
    text = await refused(client.threads.update_state(thread_id, values, as_node=as_node), (403,))
    assert "written by its runs only" in text, text
    for command in ({"update": values}, {"goto": as_node}, {"resume": None, "update": values}):
        text = await refused(client.runs.create(thread_id, graph_id, command=command), (403,))
        assert "written by its runs only" in text, text
    assert (await client.threads.get_state(thread_id))["values"] == before
    other = str(uuid.uuid4())
    await client.threads.create(thread_id=other, graph_id=graph_id,
                                supersteps=[{"updates": [{"values": values, "as_node": as_node}]}])
    assert not (await client.threads.get_state(other))["values"]


async def test_a_planted_graph_ref_does_not_unpickle_an_attachment_in_the_server(server):
    """Alice attaches ``node_info.pkl`` as content (written into her run's own attachments folder, whose path her
    state shows) to an ARK run paused once its inline graph is built, and writes into her thread's state a
    ``graph_ref`` at that build with a wrong fingerprint and her attachments folder as a STaRK source. Before, the
    server rebuilt the reference's source and the STaRK loader read her pickle; now the write is refused and the
    resumed run reads nothing of her folder as a graph."""
    url, tmp = server
    alice, _ = clients(url)
    marker = tmp / "code-ran-in-the-server"
    payload = (f"import os; open({str(marker)!r}, 'w').write(os.environ.get('KGAGENTS_API_KEY', '') + ' ' + "
               "os.environ.get('NEO4J_PASSWORD', ''))")
    pkl = base64.b64encode(pickle.dumps(ExecOnLoad(payload))).decode()
    thread_id, values = await ark_thread_paused_after_loading(
        alice, attachments=[{"name": "node_info.pkl", "content_base64": pkl}])
    folder = values["attachments"][0].rsplit("/", 1)[0]
    planted = {**values["graph_ref"], "fingerprint": "0" * 16, "source": folder, "format": "stark"}
    await no_state_written(alice, thread_id, "ark", {"graph_ref": planted}, "initialise_context")
    text = await error_of(alice, thread_id, "ark", None)
    assert "node_info.pkl" not in text and "pickle" not in text.lower(), text[:300]
    assert not marker.exists(), f"code ran in the server process and read: {marker.read_text()}"
    assert not list((tmp / "graphs" / "cache").glob("stark-*"))


async def test_a_planted_graph_ref_reads_no_line_of_a_server_file(server):
    """The same planted reference with ``source`` a 0600 operator file and ``format: triples``: before, the
    loader's error, which the caller got back, quoted the file's first line (the operator's API key)."""
    url, tmp = server
    alice, _ = clients(url)
    thread_id, values = await ark_thread_paused_after_loading(alice)
    planted = {**values["graph_ref"], "fingerprint": "0" * 16, "source": str(tmp / "operator" / "secrets.txt"),
               "format": "triples"}
    await no_state_written(alice, thread_id, "ark", {"graph_ref": planted}, "initialise_context")
    text = await error_of(alice, thread_id, "ark", None)
    assert API_KEY not in text and "secrets.txt" not in text, f"the operator's file in the run's error: {text[:300]}"
    assert API_KEY not in json.dumps((await alice.threads.get_state(thread_id))["values"])


async def test_a_planted_graph_ref_reads_no_whole_server_file(server):
    """Two runs of Graph-RAG, which reuses its thread's stored reference: before, the first planted reference
    (wrong fingerprint) built the operator's 0600 ``private.tsv`` into the shared catalog cache and its error
    told the build's real fingerprint; the second, with that fingerprint, opened it, and the run's retrieval put
    the file's triples into the caller's state."""
    url, tmp = server
    alice, _ = clients(url)
    _, values = await ark_thread_paused_after_loading(alice)
    planted = {**values["graph_ref"], "fingerprint": "0" * 16, "source": str(tmp / "operator" / "private.tsv"),
               "format": "triples"}
    question = {"question": "What is the vault code?", "graph": "goodreads"}
    for attempt in range(2):
        thread = await alice.threads.create()
        await alice.runs.wait(thread["thread_id"], "graph-rag", input=question)
        await no_state_written(alice, thread["thread_id"], "graph-rag", {"graph_ref": planted}, "retrieve_subgraph")
        text = await error_of(alice, thread["thread_id"], "graph-rag", question)
        state = json.dumps((await alice.threads.get_state(thread["thread_id"]))["values"])
        assert "4417" not in state and "4417" not in text, f"the operator's file reached the caller: {state[:300]}"
        fingerprint = re.search(r"fingerprint (\w+),", text)
        if attempt == 0 and fingerprint:
            planted = {**planted, "fingerprint": fingerprint.group(1)}
    assert not list((tmp / "graphs" / "cache").glob("triples-*")), "a server file was built into the catalog"


# --------------------------------------------------------------------------------------------------------------
# MCP
# --------------------------------------------------------------------------------------------------------------
async def test_mcp_obeys_the_same_rules(server, listener):
    """MCP's tool calls become runs the same handler checks: a refusal is the call's error (langgraph-api's MCP
    endpoint answers a refused run with a server error, or the graph's own refusal as the tool's error)."""
    url, _ = server
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {ALICE}"}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "kgot", "arguments": {"question": KGOT_QUESTION},
                       "context": {"model": "gpt-4o-mini", "base_url": f"http://127.0.0.1:{listener.port}/v1"}}}
    attach = {**call, "params": {"name": "kgot", "arguments": {
        "question": KGOT_QUESTION, "attachments": [os.path.expanduser("~/.ssh/id_rsa")]}}}
    async def post(request: dict, headers: dict) -> httpx.Response:  # a connection each: a 500 closes it
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            return await http.post("/mcp", json=request, headers=headers)

    assert (await post(call, {"Accept": headers["Accept"]})).status_code in (401, 403)
    for request, reason in ((call, "base_url:"), (attach, "never a path of the server")):
        response = await post(request, headers)
        if response.status_code == 200:
            result = response.json()["result"]
            assert result["isError"] and reason in result["content"][0]["text"], result
        else:
            assert response.status_code >= 400, response.text[:300]
    plain = {**call, "params": {"name": "kgot", "arguments": {"question": KGOT_QUESTION}}}
    reply = (await post(plain, headers)).json()
    assert not reply["result"].get("isError")
    assert json.loads(reply["result"]["content"][0]["text"])["final_answer"] == "65"
    no_secret_reached(listener)


# --------------------------------------------------------------------------------------------------------------
# LangGraph's event streaming (v2)
# --------------------------------------------------------------------------------------------------------------
async def test_langgraphs_event_streaming_starts_a_callers_run_under_the_same_rules(server, listener):
    """``run.start`` through ``/threads/{id}/commands`` and the thread's WebSocket: LangGraph adds its own
    ``configurable`` keys (``__event_streaming_v2``, ``thread_id``), which are no context field a caller sets, and
    the run starts (before: refused for every caller). A context field in its ``config``, a key of LangGraph's
    form that is not one of its own, and another caller's thread are refused as for any run."""
    url, _ = server
    alice, _ = clients(url)
    tid = (await alice.threads.create())["thread_id"]
    question = {"question": KGOT_QUESTION}

    async def command(token: str, params: dict, thread_id: str = tid) -> dict:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            response = await http.post(f"/threads/{thread_id}/commands", headers={"Authorization": f"Bearer {token}"},
                                       json={"id": 1, "method": "run.start", "params": params})
        return response.json()

    reply = await command(ALICE, {"assistant_id": "kgot", "input": question})
    assert reply["type"] == "success", reply
    await alice.runs.join(tid, reply["result"]["run_id"])
    assert (await alice.threads.get_state(tid))["values"]["final_answer"] == "65"
    for configurable, field in (({"base_url": f"http://127.0.0.1:{listener.port}/v1", "model": "gpt-4o-mini"},
                                 "base_url:"),
                                ({"__event_streaming_v3": True}, "__event_streaming_v3:"),
                                ({"__kgagents_work_dir": "/tmp"}, "__kgagents_work_dir:")):
        reply = await command(ALICE, {"assistant_id": "kgot", "input": question,
                                      "config": {"configurable": configurable}})
        assert reply["type"] == "error" and field in reply["message"], reply
    reply = await command(BOB, {"assistant_id": "kgot", "input": {"question": "bob's"}})
    assert reply["type"] == "error", reply
    assert len(await alice.runs.list(tid)) == 1

    ws_url = url.replace("http://", "ws://") + f"/threads/{tid}/stream/events"
    async with websockets.connect(ws_url, additional_headers={"Authorization": f"Bearer {ALICE}"}) as ws:
        await ws.send(json.dumps({"id": 2, "method": "run.start", "params": {"assistant_id": "kgot",
                                                                             "input": question}}))
        while (message := json.loads(await asyncio.wait_for(ws.recv(), 60))).get("id") != 2:
            pass
    assert message["type"] == "success", message
    await alice.runs.join(tid, message["result"]["run_id"])
    assert len(await alice.runs.list(tid)) == 2
    no_secret_reached(listener)
