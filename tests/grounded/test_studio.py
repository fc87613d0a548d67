"""`langgraph dev` serves the grounded workflow and its baselines next to the others: a ToT run driven through
langgraph-sdk with a context of JSON values, on the GRBench-shaped fixture graph, which the server has imported
(a served run names its graph by its catalog name)."""

from __future__ import annotations

import json

import pytest
from langgraph_sdk import get_client

from kgagents.cli.grounded import gold_path_steps
from kgagents.evals.grbench import fixture_graph, fixture_questions
from kgagents.tools.pgraph import import_graph, open_graph
from tests.test_studio import server  # noqa: F401  (the module-scoped `langgraph dev` fixture)

pytestmark = pytest.mark.slow


async def test_langgraph_dev_runs_grounded_reasoning(server):  # noqa: F811
    url, tmp = server
    row = next(r for r in fixture_questions("goodreads") if r["qid"] == "0")
    source = str(fixture_graph("goodreads"))
    script = tmp / "grounded_script.json"
    script.write_text(json.dumps({"name": "grounded", "steps": gold_path_steps(row, open_graph(source))}),
                      encoding="utf-8")
    import_graph(source, name="goodreads", to=tmp / "graphs" / "goodreads")  # the server's catalog
    client = get_client(url=url)
    assert {"grounded", "text-rag", "graph-rag"} <= {a["graph_id"] for a in await client.assistants.search(limit=100)}
    thread = await client.threads.create()
    result = await client.runs.wait(thread["thread_id"], "grounded",
                                    input={"question": row["question"], "graph": "goodreads"},
                                    context={"model": f"scripted:{script}", "strategy": "tot", "branching": 2,
                                             "keep": 2})
    assert result["final_answer"] == row["answer"], json.dumps(result)[:2000]
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["selections"][0]["candidates"] == ["t0.1", "t0.2"]
