"""`langgraph dev` serves Agent-G and its baselines next to the other workflows: a retrieval run with a
reflection, driven through langgraph-sdk with a context of JSON values, on a STaRK-shaped knowledge base in the
server's catalog (a served run names its graph by its catalog name)."""

from __future__ import annotations

import json

import pytest
from langgraph_sdk import get_client

from tests.agent_g.conftest import QUESTION, build_prime, comment, decide, validate
from tests.test_studio import server  # noqa: F401  (the module-scoped `langgraph dev` fixture)

pytestmark = pytest.mark.slow

BOTH = [("CYP3A4", "gene/protein"), ("strongyloidiasis", "disease")]
BASELINES = {f"agent-g-{b}" for b in ("cot", "text-rag", "graph-rag", "hybrid-rag", "corrective-rag", "react")}


async def test_langgraph_dev_runs_agent_g(server):  # noqa: F811
    url, tmp = server
    build_prime(tmp / "graphs" / "prime")  # the server's catalog
    script = tmp / "agent_g_script.json"
    script.write_text(json.dumps({"steps": [
        decide(1, entities=[BOTH[0]], relations=["enzyme"]), validate(1, "no"), comment(1, "missing entity"),
        decide(2, entities=BOTH, relations=["enzyme", "indication"]), validate(2, "yes")]}), encoding="utf-8")
    client = get_client(url=url)
    assert {"agent-g", *BASELINES} <= {a["graph_id"] for a in await client.assistants.search(limit=100)}
    thread = await client.threads.create()
    result = await client.runs.wait(thread["thread_id"], "agent-g", input={"question": QUESTION, "graph": "prime"},
                                    context={"model": f"scripted:{script}", "task": "retrieval"})
    assert result["evidence"]["ranked_ids"] == ["0"], json.dumps(result)[:2000]  # the output schema
    assert json.loads(result["final_answer"]) == ["0"] and "iterations" not in result
    iterations = (await client.threads.get_state(thread["thread_id"]))["values"]["iterations"]  # the whole state
    assert [i["accepted"] for i in iterations] == [False, True]
    assert iterations[0]["error_type"] == "missing entity"
    history = await client.threads.get_history(thread["thread_id"], limit=50)
    assert {"agent", "retriever_bank", "validator", "commentor"} <= {n for h in history for n in h.get("next", [])}
