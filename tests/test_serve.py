"""A served kgagents trusts its callers only with what a caller may choose: `langgraph dev` started with two
callers' tokens (alice, bob), the operator's API key and Neo4j password in its environment and an operator's own
CLI run in its runs directory, then attacked through its API as a caller would: without a token, as the other
caller, with a context that would send the key or the password to a loopback listener (which records whatever
reaches it), with server paths as inputs, through MCP. Each attack worked on the code before served mode had
rules of its own."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import stat
import threading
import uuid
from importlib import resources
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError

from kgagents.core.runs import open_checkpointer
from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.grbench import fixture_graph
from kgagents.graphs import kgot
from kgagents.graphs.io import final_state
from kgagents.nodes.context import Context
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
    ctx = Context(model=model, work_dir=str(runs / "operator-work"), **KGOT_FAST)

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
    assert "never a path of the server" in text
    note = {"name": "note.txt", "content_base64": base64.b64encode(b"sort them first").decode()}
    result = await alice.runs.wait(thread["thread_id"], "kgot",
                                   input={"question": KGOT_QUESTION, "attachments": [note]})
    assert result["final_answer"] == "65"
    [path] = (await alice.threads.get_state(thread["thread_id"]))["values"]["attachments"]
    written = Path(path)
    assert written == tmp / "runs" / "work" / thread["thread_id"] / "attachments" / "note.txt"
    assert written.read_bytes() == b"sort them first" and stat.S_IMODE(written.stat().st_mode) == 0o600
    # the thread's state is the caller's to write: a path planted there is refused when the next run reads it
    await alice.threads.update_state(thread["thread_id"], {"attachments": [str(secret)]})
    run = await alice.runs.create(thread["thread_id"], "kgot", input={"question": KGOT_QUESTION})
    assert (await finished(alice, thread["thread_id"], run))["status"] == "error"
    assert API_KEY not in json.dumps((await alice.threads.get_state(thread["thread_id"]))["values"])


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
    assert not reply["result"].get("isError") and "'final_answer': '65'" in reply["result"]["content"][0]["text"]
    no_secret_reached(listener)
