"""`langgraph dev` serves ARK-V1 next to KGoT: a run driven through langgraph-sdk with a context of JSON values."""

from __future__ import annotations

import json

import pytest
from langgraph_sdk import get_client

from kgagents.tools.pgraph import graph_from_edges
from tests.ark import script as S
from tests.test_studio import server  # noqa: F401  (the module-scoped `langgraph dev` fixture)

pytestmark = pytest.mark.slow


async def test_langgraph_dev_runs_ark_with_a_scripted_model(server, example):  # noqa: F811
    url, tmp = server
    g = graph_from_edges(example["graph"])
    steps = [*S.anchor("Yui Yuigahama"), *S.relation("has pet"),
             *S.reasoning([g.triples("Yui Yuigahama", "has pet")[0].key], "Her pet is Sablé.", True),
             *S.anchor("Sablé"), *S.relation("animal breed"),
             *S.reasoning([g.triples("Sablé", "animal breed")[0].key], "A dachshund.", False), *S.final(False)]
    script = tmp / "ark_script.json"
    script.write_text(json.dumps({"name": "ark", "steps": steps}), encoding="utf-8")
    client = get_client(url=url)
    assert {"kgot", "ark"} <= {a["graph_id"] for a in await client.assistants.search(limit=100)}
    thread = await client.threads.create()
    result = await client.runs.wait(thread["thread_id"], "ark",
                                    input={"question": example["question"], "kg": example["graph"]},
                                    context={"model": f"scripted:{script}", "c_max": 5, "k_max": 8})
    assert result["final_answer"] == "False", json.dumps(result)[:2000]
    state = await client.threads.get_state(thread["thread_id"])
    assert [s["anchor"] for s in state["values"]["steps"]] == ["Yui Yuigahama", "Sablé"]
    assert state["values"]["usage"]["scripted"]["calls"] == 7
