"""`langgraph dev` serves the surfer graph: a run driven by a scripted model (on the server's list of models)
through langgraph-sdk, against the loopback fixture server, under the dev server's blocking-call detector."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from tests.fakes import closed_port
from tests.tools.test_surfer import QUESTION, research_script

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture
def dev_server(tmp_path, web) -> Iterator[tuple[str, Path]]:
    """``langgraph dev`` on a free port, with the search endpoint pointed at the fixture server."""
    port = closed_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGAGENTS_", "OPENAI_", "LANGSMITH_"))}
    env["KGAGENTS_HOME"] = str(tmp_path / "kgagents-home")  # never the user's data folder
    env.update(KGAGENTS_NO_DOTENV="1", KGAGENTS_RUNS_DIR=str(tmp_path / "runs"), OLLAMA_HOST="http://127.0.0.1:9",
               LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false", HF_HUB_OFFLINE="1",
               KGAGENTS_SEARCH_API_BASE=web.url("/search"),
               KGAGENTS_SERVE_MODELS=f"scripted:{tmp_path / 'surfer.json'}")
    log_path = tmp_path / "server.log"
    langgraph = Path(sys.executable).with_name("langgraph")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([str(langgraph), "dev", "--port", str(port), "--host", "127.0.0.1", "--no-browser",
                                 "--no-reload", "--config", str(ROOT / "langgraph.json")],
                                cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                assert proc.poll() is None, log_path.read_text()[-3000:]
                try:
                    if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.3)
            else:
                pytest.fail(f"langgraph dev did not start: {log_path.read_text()[-3000:]}")
            yield url, log_path
        finally:
            os.killpg(proc.pid, 15)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)


async def test_surfer_runs_in_langgraph_dev(dev_server, tmp_path, web):
    url, log_path = dev_server
    script = tmp_path / "surfer.json"
    script.write_text(json.dumps({"name": "surfer", "steps": research_script(web)}))
    client = get_client(url=url)
    assert "surfer" in {a["graph_id"] for a in await client.assistants.search(limit=100)}
    thread = await client.threads.create()
    context = {"model": f"scripted:{script}"}
    result = await client.runs.wait(thread["thread_id"], "surfer", input={"question": QUESTION}, context=context)
    assert "Ilse Brandt opened it in 1923." in result.get("final_answer", ""), \
        json.dumps(result)[:1500] + log_path.read_text()[-3000:]
    assert result["evidence"] == {"sources": [web.url("/files/article.html")]}
    assert result["exit_reason"] == "answered" and result["tokens"]["calls"] == 5
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["browser"]["find_query"] == "Ilse Brandt"
