"""`langgraph dev` serves the workflows: start it on a free loopback port, drive a run through langgraph-sdk."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("studio")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGAGENTS_", "OPENAI_", "LANGSMITH_"))}
    env.update(KGAGENTS_NO_DOTENV="1", KGAGENTS_RUNS_DIR=str(tmp / "runs"), KGAGENTS_GRAPHS_DIR=str(tmp / "graphs"),
               OLLAMA_HOST="http://127.0.0.1:9",
               LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false", HF_HUB_OFFLINE="1")
    log = open(tmp / "server.log", "w")
    langgraph = Path(sys.executable).with_name("langgraph")
    proc = subprocess.Popen([str(langgraph), "dev", "--port", str(port), "--host", "127.0.0.1", "--no-browser",
                             "--no-reload", "--config", str(ROOT / "langgraph.json")],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"langgraph dev exited: {(tmp / 'server.log').read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(f"langgraph dev did not start: {(tmp / 'server.log').read_text()[-3000:]}")
    yield url, tmp
    os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
    log.close()


async def test_langgraph_dev_runs_kgot_with_a_scripted_model(server):
    url, tmp = server
    client = get_client(url=url)
    assistants = await client.assistants.search(limit=100)
    assert {"kgot"} <= {a["graph_id"] for a in assistants}
    with resources.as_file(resources.files("kgagents") / "data" / "demo_kgot_figure9.json") as script:
        context = {"model": f"scripted:{script}", "work_dir": str(tmp / "work")}
        thread = await client.threads.create()
        question = ("A C++ script holds the array [42, 23, 2, 88, 37, 15]. Sort the array and return the sum of "
                    "the third and fifth integers of the sorted list.")
        result = await client.runs.wait(thread["thread_id"], "kgot", input={"question": question}, context=context)
    assert result["final_answer"] == "65", json.dumps(result)[:2000]
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["usage"]["scripted"]["calls"] > 10
    assert len(state["values"]["kg"]["nodes"]) == 2
