"""Every route of Agent-G's Algorithm 1, offline with scripted chat models through the real retriever bank and
static-KG store: accept at once, reject → feedback → accept, T exhausted, module switch after feedback, the next
batch of pages, entities not found, an empty intersection, both task modes, failing calls, and a resume."""

from __future__ import annotations

import json

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs import agent_g as agent_g_graph
from kgagents.graphs.agent_g import compile_graph
from kgagents.graphs.io import OUTPUT_NODE, final_state
from kgagents.nodes.agent_g import AgentGContext, final_answer_of
from kgagents.prompts import agent_g as P
from tests.agent_g.conftest import QUESTION, comment, decide, step, validate

BOTH = [("CYP3A4", "gene/protein"), ("strongyloidiasis", "disease")]


async def run(task_input, steps, **ctx):
    model = ScriptedChatModel(steps=steps)
    context = AgentGContext(model=model, api_backoff_base_s=0.001, **ctx)
    graph = compile_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": context.recursion_limit}
    nodes: list[str] = []
    async for chunk in graph.astream(task_input, config, context=context, stream_mode="updates"):
        nodes.extend(chunk)
    assert nodes.pop() == OUTPUT_NODE  # the output schema's step, once, last
    return dict((await graph.aget_state(config)).values), model, nodes


async def test_retrieval_accepted_at_once(prime):
    steps = [decide(1, entities=BOTH, relations=["enzyme", "indication"]),
             validate(1, "Yes", context=".*Ivermectin.*Reasoning paths:.*CYP3A4 . enzyme . Ivermectin")]
    state, model, nodes = await run({"question": QUESTION, "graph": prime}, steps, task="retrieval")
    assert nodes == ["initialise", "agent", "retriever_bank", "generator", "validator", "finish"]
    assert state["ranked_ids"] == ["0"] and json.loads(state["final_answer"]) == ["0"]
    assert state["exit_reason"] == "accepted at iteration 1" and len(state["iterations"]) == 1
    first = state["iterations"][0]
    assert first["accepted"] and first["retrieval"]["linked"] == {"CYP3A4": "1", "strongyloidiasis": "5"}
    assert "drug" in model.calls[0] and "enzyme, indication" in model.calls[0]  # the graph's vocabulary


@pytest.mark.slow
async def test_reject_feedback_then_accept(prime):
    steps = [decide(1, entities=[BOTH[0]], relations=["enzyme"]),
             validate(1, "no"),
             comment(1, "missing entity", "the disease is a second entity"),
             decide(2, entities=BOTH, relations=["enzyme", "indication"],
                    context=".*There is only one entity but there may be more"),
             validate(2, "yes")]
    state, model, nodes = await run({"question": QUESTION, "graph": prime}, steps, task="retrieval")
    assert nodes.count("agent") == 2 and nodes.count("commentor") == 1
    first, second = state["iterations"]
    assert sorted(first["ranked_ids"]) == ["0", "6"] and not first["accepted"]
    assert first["error_type"] == "missing entity"
    assert first["feedback"].startswith("There is only one entity but there may be more.")
    assert second["accepted"] and state["ranked_ids"] == ["0"]
    assert "iteration 1: source: knowledge graph" in model.calls[3]  # the agent sees its previous action


@pytest.mark.slow
async def test_T_exhausted_returns_the_last_answer(prime):
    steps = [decide("\\d", entities=[BOTH[0]], relations=["enzyme"], times=0), validate("\\d", "No.", times=0),
             comment("\\d", "incorrect entity/relation", times=0)]
    state, _, nodes = await run({"question": QUESTION, "graph": prime}, steps, task="retrieval", max_iterations=3)
    assert nodes.count("validator") == 3 and nodes.count("commentor") == 2 and nodes[-1] == "finish"
    assert state["exit_reason"].startswith("3 iteration(s) without an accepted answer")
    assert sorted(state["ranked_ids"]) == ["0", "6"]


@pytest.mark.slow
async def test_module_switch_and_no_intersection(prime):
    steps = [decide(1, entities=[("CYP3A4", "gene/protein"), ("tuberculosis", "disease"),
                                 ("Unobtainium", "drug")], relations=["enzyme", "indication", "cures"]),
             validate(1, "no"),
             step(r"\[stage: commentor, iteration 1\]", structured={"error_type": "not a type"}),
             decide(2, source="text documents", context=".*no intersection between the entities"),
             validate(2, "yes")]
    state, _, _ = await run({"question": QUESTION, "graph": prime}, steps, task="retrieval")
    first, second = state["iterations"]
    notes = first["retrieval"]["notes"]
    assert "relations not in the graph: cures" in notes and "entity not found: Unobtainium" not in notes
    assert any(n.startswith("no intersection between the ego-graphs of CYP3A4, tuberculosis") for n in notes)
    # an unknown error type from the commentor falls back on what the retrieval notes say
    assert first["error_type"] == "no intersection"
    assert second["action"]["module"] == "text" and second["retrieval"]["module"] == "text"
    assert sorted(second["ranked_ids"]) == ["0", "1", "5", "6", "7", "8", "9"]  # every document, ranked by VSS


@pytest.mark.slow
async def test_entities_not_found_and_an_unusable_agent_reply(prime):
    steps = [decide(1, entities=[("zzzz qqqq", "chemical")], relations=["enzyme"]),
             validate(1, "no"), comment(1, "incorrect entity/relation"),
             step(r"\[stage: agent, iteration 2\]", times=0, content="no structured reply"),
             validate(2, "no")]
    state, _, _ = await run({"question": QUESTION, "graph": prime}, steps, task="retrieval", max_iterations=2,
                            max_parse_retries=0)
    first, second = state["iterations"]
    assert first["retrieval"]["linked"]  # the nearest name is linked even for a made-up entity
    assert second["action"]["module"] == "text"  # no usable action: the text module


# --------------------------------------------------------------------------------------------------------------
# Generation (CRAG-style): pages in batches, reasoning paths
# --------------------------------------------------------------------------------------------------------------
PAGES = [{"name": f"Page {i}", "url": f"https://example.org/{i}",
          "html": f"<html><body><h1>Page {i}</h1><p>{text}</p></body></html>"}
         for i, text in enumerate([
             "Maroon 5 is an American pop rock band formed in Los Angeles.",
             "The weather in Paris is mild in spring.",
             "Adam Levine is the lead singer of Maroon 5; James Valentine plays guitar.",
             "Recipes for apple pie.", "Stock prices fell on Monday.", "Cats sleep a lot.",
             "Maroon 5 members: Adam Levine, Jesse Carmichael, James Valentine, Matt Flynn, PJ Morton."])]


@pytest.mark.slow
async def test_generation_reads_pages_in_batches(tmp_path):
    steps = [decide(1, source="text documents", domain="music", question_type="set", dynamism="slow-changing"),
             step(r"\[stage: generator, iteration 1\]", content="Problems: none.\nFinal answer: Adam Levine"),
             validate(1, "no"), comment(1, "incorrect retrieval module"),
             decide(2, source="text documents", next_batch=True, context=".*reference does not contain useful"),
             step(r"\[stage: generator, iteration 2\]", content="1. ...\nFinal answer: **PJ Morton**"),
             validate(2, "yes")]
    task = {"question": "who plays keyboards in maroon 5?", "query_time": "03/01/2024, 10:00:00 PT", "pages": PAGES}
    state, model, _ = await run(task, steps, task="generation", batch_size=5)
    first, second = state["iterations"]
    assert first["action"]["batch"] == 0 and len(first["retrieval"]["references"]) == 5
    assert second["action"]["batch"] == 1 and len(second["retrieval"]["references"]) == 2
    ranked = [int(i) for i, _ in state["page_order"]]
    assert ranked[0] in (0, 2, 6) and sorted(ranked) == list(range(7))
    assert state["final_answer"] == "PJ Morton" and state["exit_reason"] == "accepted at iteration 2"
    generator_prompt = next(c for c in model.calls if "[stage: generator, iteration 1]" in c)
    assert "<query_domain>music</query_domain>" in generator_prompt and "03/01/2024" in generator_prompt
    assert "Page " in generator_prompt and "<html>" not in generator_prompt  # the HTML was converted


@pytest.mark.slow
async def test_generation_with_reasoning_paths(prime):
    steps = [decide(1, entities=[("Ivermectin", "drug")], relations=["indication"], domain="encyclopedia"),
             step(r"\[stage: generator, iteration 1\].*Ivermectin → indication → strongyloidiasis",
                  content="Final answer: strongyloidiasis"),
             validate(1, "yes")]
    state, _, _ = await run({"question": "What does Ivermectin treat?", "graph": prime}, steps, task="generation")
    paths = state["iterations"][0]["retrieval"]["paths"]
    assert paths[0] == "Ivermectin → indication → strongyloidiasis" and state["final_answer"] == "strongyloidiasis"
    assert "Ivermectin → indication → strongyloidiasis → indication → Albendazole" in paths  # radius 2


@pytest.mark.slow
async def test_failing_generator_and_validator_calls_end_in_an_answer(prime):
    steps = [decide("\\d", source="text documents", times=0),
             # a decision answers between the failures: three failed calls in a row would stop the run (breaker)
             {"when": r"\[stage: (generator|validator)", "raise": "down", "status": 500, "times": 0}]
    state, _, _ = await run({"question": "Q?", "pages": PAGES[:2]}, steps, task="generation", max_iterations=2,
                            max_api_retries=0)
    assert state["final_answer"] == "I don't know" and len(state["iterations"]) == 2
    assert all(i["validator_reply"].startswith("(no reply") for i in state["iterations"])


def test_final_answer_parsing_and_inputs():
    assert final_answer_of("steps\nFinal answer: 42\n") == "42"
    assert final_answer_of("final answer : `x`") == "x" and final_answer_of("just this") == "just this"
    assert final_answer_of("") == "I don't know"
    with pytest.raises(ValueError, match="task must be"):
        AgentGContext(task="chat")


@pytest.mark.slow
async def test_a_resumed_run_finishes_like_an_uninterrupted_one(prime):
    steps = [decide(1, entities=[BOTH[0]], relations=["enzyme"]), validate(1, "no"), comment(1, "missing entity"),
             decide(2, entities=BOTH, relations=["enzyme", "indication"]), validate(2, "yes")]
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "r"}, "recursion_limit": 100}
    interrupted = compile_graph(saver, interrupt_before=["agent"])
    context = AgentGContext(model=ScriptedChatModel(steps=steps), task="retrieval")
    await final_state(interrupted, {"question": QUESTION, "graph": prime}, config, context=context)
    await final_state(interrupted,
                      None, config, context=context)  # iteration 1, stopped before the second action
    assert len((await interrupted.aget_state(config)).values["iterations"]) == 1
    fresh = AgentGContext(model=ScriptedChatModel(steps=steps[3:]), task="retrieval")  # a new process
    state = await final_state(compile_graph(saver), None, config, context=fresh)
    assert state["ranked_ids"] == ["0"] and [i["accepted"] for i in state["iterations"]] == [False, True]


EXPECTED = {
    "AGENT": {"iteration", "decisions", "examples", "entity_types", "relation_types", "question", "query_time",
              "previous", "feedback"},
    "GENERATOR": {"iteration", "example", "idk_instruction", "source", "references", "question", "query_time",
                  "question_type", "dynamism", "domain"},
    "EVALUATOR": {"question", "answer", "prediction"},
    "VALIDATOR_GENERATION": {"iteration", "context", "answer", "question", "query_time"},
    "VALIDATOR_RETRIEVAL": {"iteration", "question", "context"},
    "COMMENTOR": {"iteration", "error_types", "examples", "question", "query_time", "action", "retrieval"},
    "CORRECTIVE_EVALUATOR": {"question", "references"},
    "REACT_STEP": {"step", "examples", "entity_types", "relation_types", "question", "query_time", "scratchpad"},
    "VALIDATOR_GENERATION_BARE": {"iteration", "answer", "question", "query_time"},
    "VALIDATOR_RETRIEVAL_BARE": {"iteration", "question", "context"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_prompt_placeholders(name):
    assert P.placeholders(getattr(P, name)) == EXPECTED[name]


async def test_the_served_graph(prime, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": [decide(1, entities=BOTH, relations=["enzyme", "indication"]),
                                            validate(1, "yes")]}), encoding="utf-8")
    state = await final_state(agent_g_graph.graph,
                              {"question": QUESTION, "graph": prime}, {"recursion_limit": 60},
                                              context={"model": f"scripted:{script}", "task": "retrieval"})
    assert state["ranked_ids"] == ["0"] and agent_g_graph.graph.checkpointer is None


@pytest.mark.slow
def test_pages_are_read_where_they_speak_to_the_question():
    """A long page is cut into passages; the generator reads its passages most similar to the question (not
    its navigation), and pages rank by their best passage; repeated passages are embedded once."""
    from kgagents.nodes.agent_g import page_text
    from kgagents.nodes.retriever_bank import passages, rank_pages

    navigation = "\n\n".join(f"* [Menu item {i}](/wiki/item_{i})" for i in range(400))
    html = (f"<html><body><nav>{navigation}</nav><h1>Maroon 5</h1><p>Maroon 5 is an American pop rock band. "
            "Its members are Adam Levine, James Valentine and PJ Morton, who plays keyboards.</p></body></html>")
    text = page_text({"html": html})
    assert "](/wiki" not in text and "Menu item 3" in text  # links read as their text
    assert all(len(p) <= 500 for p in passages(text))
    kept, order = rank_pages("who plays keyboards in maroon 5?",
                             [("Band page", text), ("Weather", "It rains in Paris in spring."), ("Copy", text)],
                             max_chars=300)
    assert "PJ Morton, who plays keyboards" in kept[0] and len(kept[0]) <= 300
    assert [i for i, _ in order][2] == 1 and order[0][1] == order[1][1]  # the copy scores like the original


async def test_in_context_examples_from_files(prime, tmp_path):
    agent_file, commentor_file = tmp_path / "agent.txt", tmp_path / "commentor.txt"
    agent_file.write_text("Question: Which drug treats malaria?\nAction: entities: malaria (disease)\n")
    commentor_file.write_text("Action: entities: aspirin (drug)\nFeedback: missing entity\n")
    steps = [decide(1, entities=[BOTH[0]], relations=["enzyme"], context=".*Which drug treats malaria"),
             validate(1, "no"), comment(1, "missing entity").copy(), decide(2, entities=BOTH), validate(2, "yes")]
    steps[2]["when"] += r".*Feedback: missing entity"
    state, model, _ = await run({"question": QUESTION, "graph": prime}, steps, task="retrieval",
                                agent_examples=str(agent_file), commentor_examples=str(commentor_file))
    assert [i["accepted"] for i in state["iterations"]] == [False, True]
    assert "Maria Ortiz" not in model.calls[0]  # the built-in examples were replaced
    with pytest.raises(ValueError, match="cannot read the commentor's examples file"):
        AgentGContext(commentor_examples=str(tmp_path / "missing.txt")).examples("commentor")
