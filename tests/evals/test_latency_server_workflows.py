"""The latency server answers every workflow's calls: a reply made from the schema each request carries is valid
for that schema (as the OpenAI client sends it, as a forced tool or a ``response_format``), and the benchmark's
scripts route ARK-V1, grounded reasoning and Agent-G runs to an end by the calls' stages."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.utils.function_calling import convert_to_json_schema, convert_to_openai_tool
from pydantic import BaseModel

from kgagents.evals.bench_workflows import AGENT_G_SCRIPT, ARK_SCRIPT, GROUNDED_SCRIPT, critical_path
from kgagents.evals.latency_server import LatencyServer, Responder, example_value
from kgagents.nodes import agent_g, ark, grounded
from kgagents.tools import graph_functions

#: Every schema a workflow's model calls ask for.
SCHEMAS: list[type[BaseModel]] = [
    ark.AnchorChoice, ark.RelationChoice, ark.ReasoningReply, ark.YesNoAnswer, ark.EntityListAnswer,
    grounded.EntityList, grounded.RelationChoice, grounded.EntityChoice, grounded.AttributeChoice,
    grounded.EndDecision, grounded.SelectionVote, grounded.BestChoice, grounded.ScoreVote, grounded.FinalAnswer,
    agent_g.AgentDecision, agent_g.CommentorReply,
    graph_functions.RetrieveNodeArgs, graph_functions.NodeFeatureArgs, graph_functions.NeighbourArgs,
    graph_functions.FinishArgs,
]


def body(prompt: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": prompt}], **extra}


def as_tool(schema: type[BaseModel]) -> dict[str, Any]:
    tool = convert_to_openai_tool(schema)
    return {"tools": [tool], "tool_choice": {"type": "function", "function": {"name": tool["function"]["name"]}}}


def as_response_format(schema: type[BaseModel]) -> dict[str, Any]:
    return {"response_format": {"type": "json_schema", "json_schema": {"name": schema.__name__, "strict": True,
                                                                       "schema": convert_to_json_schema(schema)}}}


def args_of(reply: dict[str, Any], choice: int = 0) -> dict[str, Any]:
    message = reply["choices"][choice]["message"]
    if message.get("tool_calls"):
        return json.loads(message["tool_calls"][0]["function"]["arguments"])
    return json.loads(message["content"])


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: f"{s.__module__.rsplit('.', 1)[-1]}.{s.__name__}")
def test_a_reply_made_from_the_schema_is_valid_for_it(schema):
    responder = Responder([], auto_fallback=True)
    for extra in (as_tool(schema), as_response_format(schema)):
        status, reply = responder.answer(body("any prompt", n=2, **extra))
        assert status == 200 and len(reply["choices"]) == 2
        schema.model_validate(args_of(reply))
        schema.model_validate(args_of(reply, 1))


def test_example_values_follow_the_schema_rules():
    assert example_value({"enum": ["b", "a"]}) == "b"
    assert example_value({"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 3}]}) == 3
    assert example_value({"type": "array", "items": {"type": "string"}, "minItems": 2}) == ["x", "x"]
    assert example_value({"type": ["null", "boolean"]}) is False
    assert example_value({"$defs": {"P": {"type": "object", "properties": {"n": {"type": "number"}}}},
                          "$ref": "#/$defs/P"}) == {"n": 0.0}
    assert example_value({"type": "string", "minLength": 3}) == "xxx"


def test_a_request_without_a_schema_gets_text_and_without_fallback_an_error():
    assert Responder([], auto_fallback=True).answer(body("hi"))[1]["choices"][0]["message"]["content"] == "ok"
    assert Responder([]).answer(body("hi"))[0] == 400
    with pytest.raises(ValueError, match="no other reply"):
        Responder([{"auto": {}, "content": "x"}])
    with pytest.raises(ValueError, match="an object"):
        LatencyServer([{"auto": "Finish"}], 0.0)


def answer(script: list[dict[str, Any]], stage: str, prompt: str, **extra: Any) -> dict[str, Any]:
    status, reply = Responder(script, auto_fallback=True).answer(body(prompt, **extra), stage)
    assert status == 200, reply
    return reply


def test_the_ark_script_takes_the_hinted_anchor_the_listed_relation_and_stops_after_step_two():
    anchor = answer(ARK_SCRIPT, "reasoning step 1, select anchor, attempt 2",
                    'The closest entities that are: "Old", "Older".\n...The closest entities that are: "Ikast", '
                    '"Horsens".', **as_tool(ark.AnchorChoice))
    assert args_of(anchor)["anchor"] == "Ikast"
    relation = answer(ARK_SCRIPT, "reasoning step 2, select relation, attempt 1",
                      'Its 2 outgoing relation(s):\n- population\n- country', **as_tool(ark.RelationChoice))
    assert args_of(relation)["relation"] == "population"
    keys = "Task: ... only from: t1, t2 (an empty list if none helps)."
    first = args_of(answer(ARK_SCRIPT, "reasoning step 1, reasoning, attempt 1", keys,
                           **as_tool(ark.ReasoningReply)))
    second = args_of(answer(ARK_SCRIPT, "reasoning step 2, reasoning, attempt 1", keys,
                            **as_tool(ark.ReasoningReply)))
    assert first["continue_exploration"] is True and second["continue_exploration"] is False
    assert first["triple_keys"] == ["t1"]
    none = args_of(answer(ARK_SCRIPT, "reasoning step 2, reasoning, attempt 1", "only from: (none)",
                          **as_tool(ark.ReasoningReply)))
    assert none["triple_keys"] == []


def test_the_grounded_script_follows_the_first_listing_and_finishes():
    relations = answer(GROUNDED_SCRIPT, "prune relations", "<relations>\nauthor\nvenue\n</relations>",
                       **as_response_format(grounded.RelationChoice))
    assert args_of(relations)["relations"] == ["author"]
    tails = answer(GROUNDED_SCRIPT, "prune entities", "<tail_entities>\nMaria\nKen\n</tail_entities>",
                   **as_tool(grounded.EntityChoice))
    assert args_of(tails)["entities"] == ["Maria"]
    assert args_of(answer(GROUNDED_SCRIPT, "search end", "<thoughts>\nThought 1: a\n</thoughts>",
                          **as_tool(grounded.EndDecision)))["sufficient"] is False
    assert args_of(answer(GROUNDED_SCRIPT, "search end", "Thought 1: a\nThought 2: b",
                          **as_tool(grounded.EndDecision)))["sufficient"] is True
    functions = [convert_to_openai_tool(t) for t in graph_functions.GraphFunctions(None).tools()]  # type: ignore[arg-type]
    first = answer(GROUNDED_SCRIPT, "agent action, step 1, candidate 1 of 3", "act", tools=functions)
    later = answer(GROUNDED_SCRIPT, "agent action, step 2, candidate 1 of 3", "act", tools=functions)
    assert first["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "RetrieveNode"
    call = later["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call["name"] == "Finish" and graph_functions.FinishArgs.model_validate(json.loads(call["arguments"]))
    text = answer(GROUNDED_SCRIPT, "agent action, step 3, candidate 2 of 3", "write the action")
    assert text["choices"][0]["message"]["content"] == "Finish[x]"


def test_the_agent_g_script_rejects_the_first_answer_and_accepts_the_second():
    def verdict(iteration: int) -> str:
        return answer(AGENT_G_SCRIPT, f"validator, iteration {iteration}", "yes or no?")["choices"][0]["message"][
            "content"]

    assert (verdict(1), verdict(2), verdict(5)) == ("no", "yes", "yes")
    decision = args_of(answer(AGENT_G_SCRIPT, "agent, iteration 1", "act", **as_tool(agent_g.AgentDecision)))
    assert agent_g.AgentDecision.model_validate(decision).source == "knowledge graph"


def test_the_critical_path_is_the_longest_chain_of_calls_that_do_not_overlap():
    assert critical_path([]) == 0
    assert critical_path([(0, 1), (0, 1), (0, 1)]) == 1  # three calls at once: one round
    assert critical_path([(0, 1), (1, 2), (2, 3)]) == 3  # a chain
    # two rounds of fan-out, and a call that overlaps both does not lengthen the chain
    assert critical_path([(0, 1), (0.1, 1.1), (1.2, 2.2), (1.3, 2.3), (0.5, 1.5)]) == 2
    assert critical_path([(0, 10), (0, 1), (1, 2), (2, 3)]) == 3


@pytest.mark.slow
@pytest.mark.parametrize(("workflow", "dataset"), [("ark", None), ("grounded", None), ("agent-g", "stark-prime")])
async def test_the_benchmark_runs_a_workflow_to_its_end(workflow, dataset):
    """Through the runner, the OpenAI client and the server: every run ends, its calls traced."""
    from kgagents.evals.bench_workflows import run_workflow_benchmark, workflow_markdown

    result = await run_workflow_benchmark(workflow, dataset=dataset, latency=0.2, concurrencies=[2], waves=1,
                                          sequential_items=1, single_items=1)
    single = result["single_task"][0]
    assert 0 < single["rounds"] <= single["calls"] and single["wall_over_critical"] >= 1
    if workflow == "ark":  # every call waits for the one before
        assert single["calls"] == single["rounds"] == 9
    elif workflow == "agent-g":  # agent, generator, validator (no), commentor, agent, generator, validator (yes)
        assert single["rounds"] == single["calls"] >= 5
    else:  # ToT's 3 × 3 candidates of a depth at once: far fewer rounds than calls
        assert single["calls"] == 64 and single["rounds"] <= 20
    assert result["batch"]["rows"][0]["items"] == 2 and result["batch"]["sequential"]["calls_per_item"] > 1
    assert f"Workflow `{workflow}`" in workflow_markdown(result)


def test_the_profile_names_embedding_and_page_parsing_apart_from_the_standard_library():
    from kgagents.evals.profiling import component

    assert component("/v/lib/python3.12/site-packages/torch/nn/functional.py", "linear").startswith("embeddings")
    assert component("/v/lib/python3.12/site-packages/bs4/element.py", "find").startswith("embeddings")
    assert component("/usr/lib/python3.12/json/decoder.py", "decode").startswith("json")


@pytest.mark.slow
async def test_the_benchmark_shares_batch_runs_between_worker_processes():
    """``--processes``: the batch runs' items go to worker processes, through the same client and server."""
    from kgagents.evals.bench_workflows import run_workflow_benchmark, workflow_markdown

    result = await run_workflow_benchmark("ark", latency=0.05, concurrencies=[1, 4], waves=1, sequential_items=1,
                                          single_items=1, processes=2)
    rows = result["batch"]["rows"]
    assert [r["processes"] for r in rows] == [1, 2] and [r["items"] for r in rows] == [1, 4]
    assert rows[1]["cpu_s"] is None and rows[1]["calls_per_item"] == 9
    assert "| 4 | 2 | 4 |" in workflow_markdown(result)
