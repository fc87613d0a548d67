"""The KGoT paper's baselines as graphs: zero-shot and simple RAG over tool outputs, driven offline."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from graphs.baselines import build_rag, build_zeroshot, rag, zeroshot
from kgagents.scripted import ScriptedChatModel
from kgagents.workflows import load_workflow, make_context
from nodes.baselines import BaselineContext, chunk_text, final_answer_of
from prompts import baselines as P
from tests import kgot_script as S


def config(thread="t1"):
    return {"configurable": {"thread_id": thread}, "recursion_limit": 100}


def test_final_answer_parsing():
    assert final_answer_of("Let me think.\nFINAL ANSWER: Paris") == "Paris"
    assert final_answer_of("final answer: 1\nmore\nFINAL ANSWER: **42**") == "42"
    assert final_answer_of("  just this  ") == "just this"
    assert final_answer_of("") == ""


def test_templates_take_what_the_nodes_give():
    assert P.placeholders(P.ZERO_SHOT) == {"format_rules", "problem", "attachments"}
    assert P.placeholders(P.RAG_TOOL_CALLS) == {"problem", "attachments", "retrieved", "tool_calls_made"}
    assert P.placeholders(P.RAG_ANSWER) == {"format_rules", "problem", "retrieved"}


def test_chunks_respect_the_size():
    text = " ".join(f"word{i}" for i in range(500))
    pieces = chunk_text(text, 200)
    assert all(len(p) <= 200 for p in pieces) and " ".join(pieces) == text
    assert chunk_text("short", 200) == ["short"] and chunk_text("   ", 10) == []


def test_registered_as_workflows():
    assert load_workflow("zeroshot") is zeroshot and load_workflow("rag") is rag
    ctx = make_context(load_workflow("rag"), {"rag_top_k": 2, "max_iterations": 1})
    assert isinstance(ctx, BaselineContext) and ctx.rag_top_k == 2


async def test_zero_shot_is_the_model_alone():
    model = ScriptedChatModel(steps=[S.step("general AI assistant", content="2 and 2 make 4.\nFINAL ANSWER: 4")])
    graph = build_zeroshot().compile(checkpointer=InMemorySaver())
    state = await graph.ainvoke({"question": "What is 2 + 2?"}, config(), context=BaselineContext(model=model))
    assert state["final_answer"] == "4"
    assert state["usage"]["scripted"]["calls"] == 1 and len(model.calls) == 1
    assert "What is 2 + 2?" in model.calls[0] and "FINAL ANSWER" in model.calls[0]


async def test_rag_gathers_tool_outputs_as_chunks_and_answers_from_the_retrieved_ones(tmp_path):
    steps = [
        # the tool executor: one llm_query call in iteration 0, then nothing more (DONE)
        S.step("information retriever", unless="Eiffel Tower is 330", times=1,
               tool_calls=[{"name": "llm_query", "args": {"query": "How tall is the Eiffel Tower?"}}]),
        S.step("information retriever", content="DONE"),
        # the llm_query tool's own model
        S.step("self-contained questions", content="The Eiffel Tower is 330 metres tall. " + "Paris. " * 300),
        # the answer
        S.step(r"retrieved chunks of tool outputs", content="FINAL ANSWER: 330"),
    ]
    model = ScriptedChatModel(steps=steps)
    ctx = BaselineContext(model=model, work_dir=str(tmp_path / "work"), rag_top_k=2, rag_chunk_chars=300,
                          tool_backoff_base_s=0.001)
    graph = build_rag().compile(checkpointer=InMemorySaver())
    state = await graph.ainvoke({"question": "How tall is the Eiffel Tower in metres?"}, config(), context=ctx)
    assert state["final_answer"] == "330"
    [call] = state["tool_calls"]
    assert call["name"] == "llm_query" and call["ok"]
    assert len(state["chunks"]) > 2 and all(len(c["text"]) <= 300 for c in state["chunks"])
    assert state["iteration"] == 1 and len(state["retrieved"]) == 2
    assert "330 metres" in state["retrieved"][0]  # the most relevant chunk comes first
    answer_prompt = model.calls[-1]
    assert "330 metres" in answer_prompt
    assert state["usage"]["scripted"]["calls"] == 4  # define ×2, the tool's model, the answer


async def test_rag_stops_at_the_iteration_limit(tmp_path):
    steps = [S.step("information retriever", times=0,
                    tool_calls=[{"name": "llm_query", "args": {"query": "anything new?"}}]),
             S.step("self-contained questions", times=0, content="Nothing new."),
             S.step(r"retrieved chunks of tool outputs", content="FINAL ANSWER: unknown")]
    model = ScriptedChatModel(steps=steps)
    ctx = BaselineContext(model=model, work_dir=str(tmp_path / "work"), max_iterations=2)
    state = await build_rag().compile(checkpointer=InMemorySaver()).ainvoke(
        {"question": "Is there anything new?"}, config(), context=ctx)
    assert state["iteration"] == 2 and state["final_answer"] == "unknown"
    # the same call again is served from the run's cache, so it adds no new chunk
    assert [c["cached"] for c in state["tool_calls"]] == [False, True]
    assert len(state["chunks"]) == 1
