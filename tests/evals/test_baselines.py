"""The KGoT paper's baselines as graphs (§5, Figure 5): zero-shot, simple RAG and GraphRAG over KGoT's own tool
outputs, and KGoT's loop with no KG; driven offline by scripted models through the real graphs, the real
FAISS index and the packaged embedding model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.runs import open_checkpointer
from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.datasets import Dataset, DatasetError, Item
from kgagents.evals.runner import EvalOptions, evaluate, read_results
from kgagents.graphs import kgot
from kgagents.graphs.baselines import (
    build_graphrag,
    build_nokg,
    build_rag,
    build_zeroshot,
    graphrag,
    nokg,
    rag,
    zeroshot,
)
from kgagents.graphs.io import final_state
from kgagents.graphs.workflows import load_workflow, make_context
from kgagents.nodes.baselines import BaselineContext, build_knowledge_graph, chunks_of, final_answer_of
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.state import NO_SOLUTION
from kgagents.prompts import baselines as P
from tests import kgot_script as S
from tests.evals.helpers import FAST, both

ROOT = Path(__file__).resolve().parents[2]
RAG = "retrieved chunks of tool outputs"
EXTRACT = "information extractor building a knowledge graph"
GRAPH_ANSWER = "part of the knowledge graph retrieved"
NOKG_SOLVE = "using only the tool outputs given below"
NOKG_FORCED = "best solution the tool\\s+outputs below support"
LLM_TOOL = "self-contained questions"
FAST_API = {"api_backoff_base_s": 0.001, "max_api_retries": 0, "tool_backoff_base_s": 0.001}
KGOT_FAST = {**FAST, **FAST_API}


def config(thread="t1"):
    return {"configurable": {"thread_id": thread}, "recursion_limit": 100}


def record(name, args, output, *, iteration=0, ok=True, cached=False, id="c"):
    return {"iteration": iteration, "id": id, "name": name, "args": args, "output": output, "ok": ok,
            "attempts": 1, "cached": cached}


LONG = "The Eiffel Tower is 330 metres tall. " + "It stands on the Champ de Mars in Paris. " * 120
CALLS = [record("llm_query", {"query": "How tall is the Eiffel Tower?"}, LONG, id="a"),
         record("web_search", {"query": "Louvre opening hours"}, "The Louvre opens at 9 am and closes at 6 pm.",
                id="b"),
         record("web_search", {"query": "Mona Lisa painter"}, "Leonardo da Vinci painted the Mona Lisa.",
                iteration=1, id="c"),
         record("llm_query", {"query": "How tall is the Eiffel Tower?"}, LONG, iteration=1, cached=True, id="d"),
         record("inspect_file_as_text", {"file_path": "/x"}, "Error: no such file", iteration=1, ok=False, id="e")]


def test_final_answer_parsing():
    assert final_answer_of("Let me think.\nFINAL ANSWER: Paris") == "Paris"
    assert final_answer_of("final answer: 1\nmore\nFINAL ANSWER: **42**") == "42"
    assert final_answer_of("  just this  ") == "just this"
    assert final_answer_of("") == ""


def test_templates_take_what_the_nodes_give():
    assert P.placeholders(P.ZERO_SHOT) == {"format_rules", "problem", "attachments"}
    assert P.placeholders(P.RAG_ANSWER) == {"format_rules", "problem", "retrieved"}
    assert P.placeholders(P.GRAPHRAG_EXTRACT) == {"source", "text"}
    assert P.placeholders(P.GRAPHRAG_ANSWER) == {"format_rules", "problem", "graph", "chunks"}
    assert P.placeholders(P.NOKG_NEXT_STEP) == {"problem", "tool_outputs", "tool_calls_made"}
    assert P.placeholders(P.NOKG_SOLUTION) == P.placeholders(P.NOKG_FORCED_SOLUTION) == {"problem", "tool_outputs"}


def test_registered_as_workflows_and_served_without_a_checkpointer():
    assert load_workflow("zeroshot") is zeroshot and load_workflow("rag") is rag
    assert load_workflow("kgot-graphrag") is graphrag and load_workflow("kgot-nokg") is nokg
    ctx = make_context(load_workflow("kgot-graphrag"), {"rag_top_k": 2, "graph_hops": 2, "kgot_results": "x"})
    assert isinstance(ctx, BaselineContext) and ctx.rag_top_k == 2 and ctx.graph_hops == 2
    with pytest.raises(ValueError, match="rag_top_k must be at least 1"):
        make_context(load_workflow("rag"), {"rag_top_k": 0})
    with pytest.raises(ValueError, match="unknown context field"):
        make_context(load_workflow("rag"), {"rag_chunk_chars": 1000})  # there is no re-chunking
    served = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
    import kgagents.graphs.baselines as module
    for name, workflow in {"rag": rag, "kgot-graphrag": graphrag, "kgot-nokg": nokg}.items():
        path = served[name]["path"]
        assert path == workflow.served and path.startswith("kgagents.graphs.baselines:") and served[name]["description"]
        attribute = path.rpartition(":")[2]
        exported = getattr(module, attribute)
        assert exported.checkpointer is None and exported.name == workflow.name


def test_one_chunk_per_tool_call_output():
    chunks = chunks_of(CALLS)
    # the long output stays one whole chunk; the cached repeat and the failed call are no chunks
    assert [c["text"] for c in chunks] == [LONG.strip(), CALLS[1]["output"], CALLS[2]["output"]]
    assert chunks[0]["source"] == 'llm_query({"query": "How tall is the Eiffel Tower?"})'
    assert [c["id"] for c in chunks] == [0, 1, 2] and chunks[2]["iteration"] == 1


async def test_zero_shot_is_the_model_alone():
    model = ScriptedChatModel(steps=[S.step("general AI assistant", content="2 and 2 make 4.\nFINAL ANSWER: 4")])
    graph = build_zeroshot().compile(checkpointer=InMemorySaver())
    state = await final_state(graph,
                              {"question": "What is 2 + 2?"}, config(), context=BaselineContext(model=model))
    assert state["final_answer"] == "4"
    assert state["usage"]["scripted"]["calls"] == 1 and len(model.calls) == 1
    assert "What is 2 + 2?" in model.calls[0] and "FINAL ANSWER" in model.calls[0]


# ----------------------------------------------------------------------------------------------------------------
# Simple RAG
# ----------------------------------------------------------------------------------------------------------------
async def test_rag_answers_from_the_closest_tool_outputs_and_calls_no_tool():
    model = ScriptedChatModel(steps=[S.step(RAG, content="It is 330 m.\nFINAL ANSWER: 330")])
    graph = build_rag().compile(checkpointer=InMemorySaver())
    state = await final_state(graph,
                              {"question": "How tall is the Eiffel Tower in metres?", "tool_calls": CALLS},
                                config(), context=BaselineContext(model=model, rag_top_k=2))
    assert state["final_answer"] == "330"
    assert len(state["chunks"]) == 3 and state["corpus_source"] == "the task's tool_calls"
    assert state["retrieved"][0].startswith("llm_query(")  # the closest output comes first
    assert len(state["retrieved"]) == 2
    [prompt] = model.calls  # one model call: no tool executor, no tool
    assert LONG.strip() in prompt  # the whole output, not a piece of it
    assert state["usage"]["scripted"]["calls"] == 1


async def test_rag_without_kgot_outputs_is_refused():
    model = ScriptedChatModel(steps=[S.step(RAG, content="FINAL ANSWER: x")])
    graph = build_rag().compile(checkpointer=InMemorySaver())
    with pytest.raises(ValueError, match="answers from KGoT's tool outputs of the same task"):
        await final_state(graph,
                          {"question": "How tall is it?"}, config(), context=BaselineContext(model=model))
    with pytest.raises(ValueError, match="not a KGoT tool-call record"):
        await final_state(graph,
                          {"question": "How tall is it?", "tool_calls": [{"output": "x"}]}, config("t2"),
                            context=BaselineContext(model=model))
    assert model.calls == []


async def test_rag_answer_failure_is_no_solution_and_logged():
    model = ScriptedChatModel(steps=[S.step(RAG, **{"raise": "overloaded", "status": 500})])
    graph = build_rag().compile(checkpointer=InMemorySaver())
    state = await final_state(graph,
                              {"question": "How tall is the Eiffel Tower?", "tool_calls": CALLS}, config(),
                                context=BaselineContext(model=model, **FAST_API))
    assert state["final_answer"] == NO_SOLUTION
    [failure] = state["failures"]
    assert failure["node"] == "retrieve_and_answer" and "overloaded" in failure["error"]


def kgot_tool_steps(facts: dict[str, str]) -> list[dict]:
    """KGoT with one llm_query call per question (marker -> the tool's answer), then a direct solve."""
    steps = [S.step(S.VOTE, unless=r"-> ok", times=0, structured={"query_type": "INSERT", "reason": "missing"}),
             *S.votes("RETRIEVE", 0), *S.merge(times=0), *S.write("", times=0), *S.need_math(False, times=0)]
    for marker, fact in facts.items():
        steps += [S.step(both(S.DEFINE_TOOLS, re.escape(marker)), times=0,
                         tool_calls=[{"name": "llm_query", "args": {"query": f"Facts about {marker}?"}}]),
                  S.step(both(LLM_TOOL, re.escape(f"about {marker}?")), times=0, content=fact),
                  S.step(both(S.DIRECT, re.escape(marker)), times=0, structured={"solution": fact}),
                  S.step(both(S.PARSE, re.escape(marker)), times=0, structured={"final_answer": fact})]
    return steps


async def test_rag_reads_the_tool_outputs_of_a_finished_kgot_thread(tmp_path):
    store = tmp_path / "runs" / "checkpoints.sqlite"
    kgot_model = ScriptedChatModel(steps=kgot_tool_steps({"Q7": "Q7's answer is seven."}))
    ctx = KGoTContext(model=kgot_model, work_dir=str(tmp_path / "work"), **KGOT_FAST)
    async with open_checkpointer(store) as saver:
        done = await final_state(kgot.compile_graph(saver),
                                 {"question": "Question Q7: what is it?"}, config("k1"),
                                                        context=ctx)
    [output] = [c["output"] for c in done["tool_calls"]]
    assert output.endswith("Q7's answer is seven.")

    model = ScriptedChatModel(steps=[S.step(both(RAG, "Q7's answer is seven"), content="FINAL ANSWER: seven")])
    graph = build_rag().compile(checkpointer=InMemorySaver())
    rag_ctx = BaselineContext(model=model, kgot_checkpointer=str(store))
    state = await final_state(graph, {"question": "Question Q7: what is it?", "kgot_thread": "k1"}, config(),
                                context=rag_ctx)
    assert state["final_answer"] == "seven" and state["corpus_source"] == "KGoT thread k1"
    assert [c["text"] for c in state["chunks"]] == [output]
    with pytest.raises(ValueError, match="no KGoT thread 'nope'"):
        await final_state(graph, {"question": "Q?", "kgot_thread": "nope"}, config("t2"), context=rag_ctx)
    other = tmp_path / "other.sqlite"
    other.write_bytes(b"not a database")
    with pytest.raises(ValueError, match="is not a checkpoint database"):
        await final_state(graph, {"question": "Q?", "kgot_thread": "k1"}, config("t4"),
                            context=BaselineContext(model=model, kgot_checkpointer=str(other)))
    assert other.read_bytes() == b"not a database"
    with pytest.raises(ValueError, match="no KGoT checkpoints at"):
        await final_state(
            graph, {"question": "Q?", "kgot_thread": "k1"}, config("t3"),
            context=BaselineContext(model=model, kgot_checkpointer=str(tmp_path / "none.sqlite")))


def two_questions(n: int = 2) -> Dataset:
    items = [Item(id=f"t{i}", question=f"Question Q{i}: what is it?", gold=f"answer {i}") for i in range(n)]
    return Dataset(name="tiny", split="validation", items=items, scorer="gaia", group_label="Level")


@pytest.mark.slow
async def test_eval_the_baselines_over_a_kgot_evaluation(tmp_path):
    """The paper's comparison: KGoT first, then simple RAG and GraphRAG over its results directory, each item
    reading the KGoT run of the same question."""
    facts = {"Q0": "Q0's answer is answer 0.", "Q1": "Q1's answer is answer 1."}
    kgot_dir = tmp_path / "kgot"
    kgot_model = ScriptedChatModel(steps=kgot_tool_steps(facts))
    result = await evaluate(EvalOptions(workflow="kgot", out_dir=kgot_dir, progress=False, concurrency=2,
                                        context=KGoTContext(model=kgot_model, **KGOT_FAST)), two_questions())
    assert result.failed == 0 and {r["tool_calls"] for r in result.records} == {1}

    # each answer is only reachable from its own question's KGoT tool output
    steps = [S.step(both(RAG, re.escape(fact)), times=0, content=f"FINAL ANSWER: answer {i}")
             for i, fact in enumerate(facts.values())]
    steps += [S.step(EXTRACT, times=0, structured={"entities": [{"name": "Q0", "type": "Question"}],
                                                   "relations": []}),
              *[S.step(both(GRAPH_ANSWER, re.escape(fact)), times=0, content=f"FINAL ANSWER: answer {i}")
                for i, fact in enumerate(facts.values())]]
    model = ScriptedChatModel(steps=steps)
    for workflow in ("rag", "kgot-graphrag"):
        out = tmp_path / workflow
        options = EvalOptions(workflow=workflow, out_dir=out, progress=False, concurrency=2,
                              context_values={"kgot_results": str(kgot_dir)})
        options.context = BaselineContext(model=model, kgot_results=str(kgot_dir))
        result = await evaluate(options, two_questions())
        assert result.failed == 0, result.records
        by_id = {r["id"]: r for r in result.records}
        assert [by_id[f"t{i}"]["answer"] for i in range(2)] == ["answer 0", "answer 1"]
        assert all(r["correct"] and r["tool_calls"] == 0 for r in result.records)
        assert by_id["t0"]["thread_id"] == "tiny-t0-run0"


async def test_eval_of_a_rag_baseline_without_kgot_results_is_refused_before_anything_runs(tmp_path):
    model = ScriptedChatModel(steps=[])
    for values, match in [({}, "run KGoT on the same dataset first"),
                          ({"kgot_results": str(tmp_path / "missing")}, "not an evaluation's results directory")]:
        out = tmp_path / "rag"
        options = EvalOptions(workflow="rag", out_dir=out, progress=False, context_values=values)
        options.context = BaselineContext(model=model, **values)
        with pytest.raises(DatasetError, match=match):
            await evaluate(options, two_questions())
        assert not out.exists()

    # a KGoT evaluation of fewer questions (or another dataset) is refused too, naming what is missing
    facts = {"Q0": "Q0's answer is answer 0."}
    kgot_dir = tmp_path / "kgot"
    await evaluate(EvalOptions(workflow="kgot", out_dir=kgot_dir, progress=False,
                               context=KGoTContext(model=ScriptedChatModel(steps=kgot_tool_steps(facts)),
                                                   **KGOT_FAST)), two_questions(1))
    assert len(read_results(kgot_dir)) == 1
    options = EvalOptions(workflow="kgot-graphrag", out_dir=tmp_path / "g", progress=False,
                          context_values={"kgot_results": str(kgot_dir)})
    with pytest.raises(DatasetError, match=r"has not finished 1 of the 2 .*e\.g\. t1\)"):
        await evaluate(options, two_questions(2))
    with pytest.raises(DatasetError, match="has not finished 1 of the 2"):
        await evaluate(EvalOptions(workflow="rag", out_dir=tmp_path / "r", progress=False, runs=2,
                                   context_values={"kgot_results": str(kgot_dir)}), two_questions(1))
    other = Dataset(name="other", split="validation", items=two_questions(1).items, scorer="gaia")
    with pytest.raises(DatasetError, match="evaluated 'tiny'"):
        await evaluate(EvalOptions(workflow="rag", out_dir=tmp_path / "o", progress=False,
                                   context_values={"kgot_results": str(kgot_dir)}), other)
    assert not (tmp_path / "g").exists() and not (tmp_path / "r").exists()


# ----------------------------------------------------------------------------------------------------------------
# GraphRAG
# ----------------------------------------------------------------------------------------------------------------
def extraction(entities, relations=()):
    return {"entities": [{"name": n, "type": t, "description": d} for n, t, d in entities],
            "relations": [{"source": s, "relation": r, "target": o, "description": ""} for s, r, o in relations]}


GRAPH_CALLS = [
    record("web_search", {"query": "Eiffel Tower"}, "The Eiffel Tower, designed by Gustave Eiffel's company, is in "
           "Paris.", id="a"),
    record("web_search", {"query": "Gustave Eiffel"}, "Gustave Eiffel was born in Dijon in 1832.", id="b"),
    record("web_search", {"query": "Louvre"}, "The Louvre is a museum in Paris.", id="c"),
]


def graphrag_steps(answer_when: str):
    return [
        S.step(both(EXTRACT, "designed by Gustave"), structured=extraction(
            [("Eiffel Tower", "Landmark", "A tower in Paris."), ("Gustave Eiffel", "Person", "")],
            [("Eiffel Tower", "DESIGNED_BY", "Gustave Eiffel"), ("Eiffel Tower", "LOCATED_IN", "Paris")])),
        S.step(both(EXTRACT, "born in Dijon"), structured=extraction(
            [("gustave  eiffel", "", "Engineer born in 1832."), ("Dijon", "City", "")],
            [("Gustave Eiffel", "BORN_IN", "Dijon")])),
        S.step(both(EXTRACT, "museum in Paris"), **{"raise": "overloaded", "status": 500}),
        S.step(both(GRAPH_ANSWER, answer_when), content="He was born in Dijon.\nFINAL ANSWER: Dijon"),
    ]


async def test_graphrag_extracts_a_static_kg_and_answers_by_traversal():
    model = ScriptedChatModel(steps=graphrag_steps("Gustave Eiffel -\\[BORN_IN\\]-> Dijon"))
    graph = build_graphrag().compile(checkpointer=InMemorySaver())
    ctx = BaselineContext(model=model, graph_top_entities=1, graph_hops=2, graph_top_chunks=2, **FAST_API)
    state = await final_state(graph, {"question": "Where was the designer of the Eiffel Tower born?",
                                 "tool_calls": GRAPH_CALLS}, config(), context=ctx)
    assert state["final_answer"] == "Dijon"
    # the KG is in the state (node-link data): case and spacing do not make two entities
    nodes = {n["id"]: n for n in state["graph"]["nodes"]}
    assert set(nodes) == {"eiffel tower", "gustave eiffel", "paris", "dijon"}
    assert nodes["gustave eiffel"]["chunks"] == [0, 1] and nodes["dijon"]["type"] == "City"
    assert {(e["source"], e["relation"], e["target"]) for e in state["graph"]["edges"]} == {
        ("eiffel tower", "DESIGNED_BY", "gustave eiffel"), ("eiffel tower", "LOCATED_IN", "paris"),
        ("gustave eiffel", "BORN_IN", "dijon")}
    # the question names the Eiffel Tower: two hops reach Dijon; the chunks they came from are shown
    assert state["matched_entities"][0] == "Eiffel Tower"
    answer_prompt = model.calls[-1]
    assert "Gustave Eiffel was born in Dijon in 1832." in answer_prompt
    assert "museum" not in answer_prompt  # the Louvre's chunk failed to extract: nothing of it is retrieved
    [failure] = state["failures"]
    assert failure["node"] == "extract_chunk" and "chunk 2 adds nothing" in failure["outcome"]
    assert len(model.calls) == 4 and state["usage"]["scripted"]["calls"] == 3  # the failed call has no usage


async def test_graphrag_traversal_depth_bounds_the_context():
    model = ScriptedChatModel(steps=graphrag_steps("Eiffel Tower -\\[DESIGNED_BY\\]-> Gustave Eiffel"))
    graph = build_graphrag().compile(checkpointer=InMemorySaver())
    ctx = BaselineContext(model=model, graph_top_entities=1, graph_hops=0, **FAST_API)
    state = await final_state(graph, {"question": "Did Gustave Eiffel design the Eiffel Tower?",
                                 "tool_calls": GRAPH_CALLS}, config(), context=ctx)
    # zero hops: only the relations among the matched entities (Dijon is one hop away)
    assert "BORN_IN" not in state["context"] and "DESIGNED_BY" in state["context"]


async def test_graphrag_with_no_tool_output_answers_from_an_empty_graph():
    model = ScriptedChatModel(steps=[S.step(both(GRAPH_ANSWER, "the knowledge graph is empty"),
                                            content="FINAL ANSWER: unknown")])
    state = await final_state(
        build_graphrag().compile(checkpointer=InMemorySaver()),
        {"question": "Anything?", "tool_calls": []}, config(), context=BaselineContext(model=model))
    assert state["final_answer"] == "unknown" and state["graph"]["nodes"] == []


async def test_graphrag_answer_failure_is_no_solution_and_logged():
    steps = [*graphrag_steps("never")[:2], S.step(EXTRACT, structured=extraction([])),
             S.step(GRAPH_ANSWER, **{"raise": "overloaded", "status": 500})]
    model = ScriptedChatModel(steps=steps)
    state = await final_state(
        build_graphrag().compile(checkpointer=InMemorySaver()),
        {"question": "Where was Gustave Eiffel born?", "tool_calls": GRAPH_CALLS}, config(),
        context=BaselineContext(model=model, **FAST_API))
    assert state["final_answer"] == NO_SOLUTION and state["reply"] == ""
    [failure] = state["failures"]
    assert failure["node"] == "answer_from_graph" and "overloaded" in failure["error"]
    assert state["usage"]["scripted"]["calls"] == 3  # the three extractions are paid for and counted


def test_relations_name_entities_that_no_extraction_listed():
    graph = build_knowledge_graph([{"chunk": 3, "entities": [],
                                    "relations": [{"source": "A", "relation": "R", "target": "B"}]}])
    assert sorted(graph.nodes) == ["a", "b"] and graph.nodes["a"]["chunks"] == [3]


# ----------------------------------------------------------------------------------------------------------------
# No KG
# ----------------------------------------------------------------------------------------------------------------
TOWER = "The Eiffel Tower is 330 metres tall. " + "Its iron lattice was built for the 1889 World's Fair. " * 20


async def test_nokg_runs_kgots_loop_on_the_tool_outputs_themselves(tmp_path):
    steps = [
        S.step(S.VOTE, unless="330 metres", times=2, structured={"query_type": "INSERT", "reason": "no height"}),
        *S.votes("RETRIEVE", 2, reason="330 m"),
        *S.merge("The height is missing."),
        *S.tool_calls(("llm_query", {"query": "How tall is the Eiffel Tower?"})),
        S.step(LLM_TOOL, content=TOWER),
        S.step(NOKG_SOLVE, structured={"solution": "330 metres"}),
        *S.need_math(False),
        *S.parse("330"),
    ]
    model = ScriptedChatModel(steps=steps)
    ctx = KGoTContext(model=model, work_dir=str(tmp_path / "work"), num_next_steps_decision=2,
                      max_final_solution_parsing=1, **FAST_API)
    state = await final_state(build_nokg().compile(checkpointer=InMemorySaver()),
                              {"question": "How tall is the Eiffel Tower in metres?"}, config(), context=ctx)
    assert state["final_answer"] == "330" and state["iteration"] == 1 and state["decision"] == "SOLVE"
    assert "kg" not in state and "kg_writes" not in state  # no knowledge graph at all
    [call] = state["tool_calls"]
    assert call["name"] == "llm_query" and TOWER.strip() in call["output"]
    # the second vote and the solution read the whole output (KGoT's tool listing cuts it at 300 characters)
    second_votes = [c for c in model.calls if "Can you solve the initial problem" in c][2:]
    assert len(second_votes) == 2 and all(TOWER.strip() in c for c in second_votes)
    assert TOWER.strip() in next(c for c in model.calls if re.search(NOKG_SOLVE, c))
    # 4 votes, merge, define, the tool's own model, solve, need for math, parse: all counted
    assert state["usage"]["scripted"]["calls"] == len(model.calls) == 10


async def test_nokg_forced_solution_at_the_limit_and_failures_degrade(tmp_path):
    steps = [*S.votes("INSERT", 0), *S.merge(times=0), S.step(S.DEFINE_TOOLS, times=0, content="none needed"),
             S.step(NOKG_FORCED, **{"raise": "overloaded", "status": 500})]
    model = ScriptedChatModel(steps=steps)
    ctx = KGoTContext(model=model, work_dir=str(tmp_path / "work"), max_iterations=2, num_next_steps_decision=2,
                      **FAST_API)
    state = await final_state(build_nokg().compile(checkpointer=InMemorySaver()),
                              {"question": "What is unknowable?"}, config(), context=ctx)
    assert state["iteration"] == 2 and state["decision"] == "FORCED_SOLVE"
    assert state["final_answer"] == NO_SOLUTION and state["tool_calls"] == []
    [failure] = state["failures"]
    assert failure["node"] == "solve_forced_from_tool_outputs"


# ----------------------------------------------------------------------------------------------------------------
# `kgagents eval`: the paper's comparison from the command line
# ----------------------------------------------------------------------------------------------------------------
def test_cli_kgot_first_then_the_baselines_over_its_results(tmp_path, capsys):
    from kgagents.cli import main
    from tests.evals.test_cli_eval import GRADER

    data = tmp_path / "simpleqa.csv"
    data.write_text("metadata,problem,answer\n\"{'topic': 'Art'}\",Question Q0: who painted it?,answer 0\n"
                    "\"{'topic': 'Art'}\",Question Q1: who sculpted it?,answer 1\n", encoding="utf-8")
    facts = {"Q0": "Q0's answer is answer 0.", "Q1": "Q1's answer is answer 1."}
    steps = [S.step(GRADER, times=0, content="A"), *kgot_tool_steps(facts),
             *[S.step(both(RAG, re.escape(fact)), times=0, content=f"FINAL ANSWER: answer {i}")
               for i, fact in enumerate(facts.values())],
             S.step(NOKG_SOLVE, times=0, structured={"solution": "from the outputs"})]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "cli", "steps": steps}))
    common = ["--dataset", "simpleqa", "--data", str(data), "--model", f"scripted:{script}", "--no-progress",
              "--no-report", "--set", "num_next_steps_decision=2", "--set", "max_final_solution_parsing=1"]

    assert main(["eval", "rag", *common, "--out", str(tmp_path / "rag")]) == 2
    assert "run KGoT on the same dataset first" in capsys.readouterr().err
    assert not (tmp_path / "rag").exists()

    assert main(["eval", "kgot", *common, "--set", "solve_mode=direct", "--out", str(tmp_path / "kgot")]) == 0
    assert main(["eval", "rag", *common, "--set", f"kgot_results={tmp_path / 'kgot'}",
                 "--out", str(tmp_path / "rag")]) == 0
    assert "2 ran" in capsys.readouterr().err
    records = {r["id"]: r for r in read_results(tmp_path / "rag")}
    assert sorted(r["answer"] for r in records.values()) == ["answer 0", "answer 1"]
    assert all(r["error"] is None and sum(u["calls"] for u in r["usage"].values()) == 1
               for r in records.values())

    assert main(["eval", "kgot-nokg", *common, "--out", str(tmp_path / "nokg")]) == 0
    assert all(r["error"] is None and r["iterations"] == 1 and r["tool_calls"] == 1
               for r in read_results(tmp_path / "nokg"))


def test_cli_ask_rag_over_a_kgot_run(tmp_path, capsys):
    from kgagents.cli import main

    steps = [*kgot_tool_steps({"Q7": "Q7's answer is seven."}),
             S.step(both(RAG, "Q7's answer is seven"), content="FINAL ANSWER: seven")]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "cli", "steps": steps}))
    common = ["--model", f"scripted:{script}", "--quiet", "--set", "num_next_steps_decision=2",
              "--set", "max_final_solution_parsing=1", "--set", "max_api_retries=0"]
    runs = ["--runs-dir", str(tmp_path / "runs")]
    assert main([*runs, "ask", "Question Q7: what is it?", "--thread", "k1", "--solve-mode", "direct", *common]) == 0
    capsys.readouterr()
    assert main([*runs, "ask", "Question Q7: what is it?", "--workflow", "rag", "--kgot-thread", "k1", *common]) == 0
    assert capsys.readouterr().out.strip() == "seven"
    assert main([*runs, "ask", "Question Q7?", "--workflow", "zeroshot", "--kgot-thread", "k1", *common]) == 2
    assert "--kgot-thread is for rag, kgot-graphrag" in capsys.readouterr().err
