"""Agent-G's baselines on the same retriever bank and generator: CoT, text RAG, graph RAG, text + graph RAG,
Corrective RAG (both judgements) and ReAct (its actions, finish, and the step limit)."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs import agent_g_baselines as B
from kgagents.graphs.io import OUTPUT_NODE
from kgagents.nodes.agent_g import AgentGContext
from tests.agent_g.conftest import QUESTION, decide, step

BOTH = [("CYP3A4", "gene/protein"), ("strongyloidiasis", "disease")]
PAGES = [{"name": "Ivermectin", "url": "u0", "text": "Ivermectin treats strongyloidiasis and onchocerciasis."},
         {"name": "Weather", "url": "u1", "text": "It rains in spring."}]


async def run(workflow, task_input, steps, **ctx):
    model = ScriptedChatModel(steps=steps)
    context = AgentGContext(model=model, api_backoff_base_s=0.001, **ctx)
    graph = workflow.compile_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "b"}, "recursion_limit": context.recursion_limit}
    nodes: list[str] = []
    async for chunk in graph.astream(task_input, config, context=context, stream_mode="updates"):
        nodes.extend(chunk)
    assert nodes.pop() == OUTPUT_NODE  # the output schema's step, once, last
    return dict((await graph.aget_state(config)).values), model, nodes


def generate(answer: str, context: str = "") -> dict:
    return step(r"\[stage: generator" + context, times=0, content=f"Reasoning.\nFinal answer: {answer}")


async def test_cot_uses_no_reference():
    state, model, nodes = await run(B.cot, {"question": "Who wrote Hamlet?"}, [generate("Shakespeare")])
    assert nodes == ["initialise", "no_retrieval", "generator", "record", "finish"]
    assert state["final_answer"] == "Shakespeare" and "(no reference: no retrieval" in model.calls[0]


@pytest.mark.slow
async def test_text_rag_reads_the_first_batch_of_pages():
    state, _, _ = await run(B.text_rag, {"question": "What does Ivermectin treat?", "pages": PAGES},
                            [generate("strongyloidiasis", ".*Ivermectin treats")])
    assert state["final_answer"] == "strongyloidiasis" and state["iterations"][0]["action"]["batch"] == 0


@pytest.mark.slow
async def test_graph_rag_ranks_the_intersection(prime):
    steps = [decide(1, source="text documents", entities=BOTH, relations=["enzyme", "indication"])]
    state, _, nodes = await run(B.graph_rag, {"question": QUESTION, "graph": prime}, steps, task="retrieval")
    assert "extract" in nodes and state["iterations"][0]["action"]["module"] == "graph"  # forced to the graph
    assert state["ranked_ids"] == ["0"]


@pytest.mark.slow
async def test_hybrid_rag_concatenates_both_modules(prime):
    steps = [decide(1, entities=[("Ivermectin", "drug")], relations=["indication"]),
             generate("strongyloidiasis", ".*Ivermectin → indication → strongyloidiasis.*Ivermectin treats")]
    state, _, _ = await run(B.hybrid_rag, {"question": "What does Ivermectin treat?", "graph": prime,
                                           "pages": PAGES}, steps)
    kinds = [r["kind"] for r in state["iterations"][0]["retrieval"]["references"]]
    assert "path" in kinds and "page" in kinds and state["final_answer"] == "strongyloidiasis"


@pytest.mark.slow
@pytest.mark.parametrize("judgement, module", [("correct", "text"), ("The references are ambiguous.", "graph")])
async def test_corrective_rag(prime, judgement, module):
    steps = [step(r"\[stage: retrieval evaluator\]", structured={"judgement": judgement}),
             decide(1, entities=[("Ivermectin", "drug")], relations=["indication"]), generate("strongyloidiasis")]
    state, _, nodes = await run(B.corrective_rag, {"question": "What does Ivermectin treat?", "graph": prime,
                                                   "pages": PAGES}, steps)
    assert state["iterations"][-1]["action"]["module"] == module and nodes.count("evaluate_retrieval") == 1
    assert state["final_answer"] == "strongyloidiasis"


@pytest.mark.slow
async def test_react_actions_and_finish(prime):
    steps = [step(r"\[stage: react, step 1\]", structured={"thought": "extract first", "action": "extract",
                                                            "entities": "Ivermectin (drug)",
                                                            "relations": ["indication"]}),
             step(r"\[stage: react, step 2\]", structured={"thought": "search the graph", "action": "search_kg"}),
             step(r"\[stage: react, step 3\].*Ivermectin → indication → strongyloidiasis",
                  structured={"thought": "done", "action": "finish", "answer": "strongyloidiasis"})]
    state, _, nodes = await run(B.react, {"question": "What does Ivermectin treat?", "graph": prime}, steps)
    assert nodes.count("react_step") == 3 and "generator" not in nodes
    assert [i["error_type"] for i in state["iterations"]] == ["extract", "search_kg", "finish"]
    assert state["final_answer"] == "strongyloidiasis"


@pytest.mark.slow
async def test_react_at_its_step_limit_answers_from_the_last_references():
    steps = [step(r"\[stage: react", times=0, structured={"thought": "read", "action": "search_web"}),
             generate("strongyloidiasis")]
    state, _, nodes = await run(B.react, {"question": "What does Ivermectin treat?", "pages": PAGES}, steps,
                                react_steps=2)
    assert nodes.count("react_step") == 2 and nodes[-3:] == ["generator", "record", "finish"]
    assert [i["action"]["batch"] for i in state["iterations"][:2]] == [0, 1]
    assert state["final_answer"] == "strongyloidiasis"
