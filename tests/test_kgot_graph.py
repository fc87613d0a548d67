"""Every route of the KGoT graph, driven offline by a scripted chat model through the real KG and sandbox."""

from __future__ import annotations

import re

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs.io import final_state
from kgagents.graphs.kgot import compile_graph
from kgagents.nodes.kgot import NO_SOLUTION, KGoTContext
from tests import kgot_script as S

QUESTION = "The array [42, 23, 2, 88, 37, 15] is in a script. Sort it and add the third and fifth values."
ARRAY_WRITE = ("G.add_node('array', label='Array', values=[42, 23, 2, 88, 37, 15])\n"
               "G.add_node('sorted', label='SortedArray', values=[2, 15, 23, 37, 42, 88])\n"
               "G.add_edge('array', 'sorted', relationship='SORTED_AS')")
SORT_CALL = ("run_python_code", {"code": "print(sorted([42, 23, 2, 88, 37, 15]))"})
READ_SORTED = ("values = next(a['values'] for n, a in G.nodes(data=True) if a['label'] == 'SortedArray')\n"
               "result = {'third': values[2], 'fifth': values[4]}")


READ_ARRAY = "result = next(a['values'] for n, a in G.nodes(data=True) if a['label'] == 'Array')"


def enhance_once(solve: str | None = None) -> list[dict]:
    """Iteration 0: INSERT ×5, merge, one tool call, one KG write. Iteration 1 votes RETRIEVE (with ``solve`` as
    the votes' solve operation)."""
    return [*S.votes("INSERT", 5, unless="SortedArray"),
            *S.votes("RETRIEVE", 5, when_extra="SortedArray", solve=solve),
            *S.merge(), *S.tool_calls(SORT_CALL), *S.write(ARRAY_WRITE)]


def insert_always() -> list[dict]:
    """Every vote INSERT, one tool call and one KG write per iteration."""
    return [*S.votes("INSERT", 0), *S.merge(times=0), *S.tool_calls(SORT_CALL, times=0), *S.write(ARRAY_WRITE, times=0)]


async def run(tmp_path, steps, question=QUESTION, **ctx):
    model = ScriptedChatModel(steps=steps)
    context = KGoTContext(model=model, work_dir=str(tmp_path / "work"), api_backoff_base_s=0.001,
                          tool_backoff_base_s=0.001, **ctx)
    graph = compile_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}, "recursion_limit": 200}
    state = await final_state(graph, {"question": question}, config, context=context)
    return state, model


@pytest.mark.slow
async def test_enhance_then_solve_with_query_and_math(tmp_path):
    steps = [*enhance_once(solve=READ_SORTED), *S.need_math(True),
             *S.math("print(23 + 42)"), *S.parse("65", "65", "65")]
    state, model = await run(tmp_path, steps)
    assert state["final_answer"] == "65"
    assert state["iteration"] == 1
    it0 = [v for v in state["votes"] if v["iteration"] == 0]
    assert len(it0) == 5 and {v["query_type"] for v in it0} == {"INSERT"}
    assert [v["query_type"] for v in state["votes"] if v["iteration"] == 1] == ["RETRIEVE"] * 5
    [call] = state["tool_calls"]
    assert call["name"] == "run_python_code" and call["ok"] and "[2, 15, 23, 37, 42, 88]" in call["output"]
    [w] = state["kg_writes"]
    assert w["status"] == "applied" and w["snapshot"] == state["kg"]
    labels = sorted(n["labels"][0] for n in state["kg"]["nodes"])
    assert labels == ["Array", "SortedArray"]
    assert state["kg"]["relationships"][0]["type"] == "SORTED_AS"
    [attempt] = state["solve_attempts"]
    assert attempt["ok"] and '"third": 23' in attempt["result"]
    # the votes' read query ran as it was (once for the five identical votes); no other query was written
    [operation] = state["solve_operations"]
    assert operation["kind"] == "vote" and sorted(operation["votes"]) == [0, 1, 2, 3, 4]
    assert operation["operation"] == READ_SORTED and operation["query"] == READ_SORTED
    assert not any(re.search(S.RETRIEVE, c) for c in model.calls)
    assert state["need_math"] is True and state["math_output"].strip() == "65"
    [partial] = state["partial_solutions"]
    assert partial["weight"] == 5 and partial["math_output"].strip() == "65"
    assert state["candidates"] == ["65", "65", "65"]
    usage = state["usage"]["scripted"]
    assert usage["calls"] == len(model.calls) and usage["input_tokens"] > 0


@pytest.mark.slow
async def test_vote_tie_goes_to_enhance(tmp_path):
    # 2 RETRIEVE against 2 INSERT in iteration 0: a tie means ENHANCE.
    steps = [*S.votes("RETRIEVE", 2, unless="SortedArray"), *S.votes("INSERT", 2, unless="SortedArray"),
             *S.votes("RETRIEVE", 4, when_extra="SortedArray"), *S.merge(), *S.tool_calls(SORT_CALL),
             *S.write(ARRAY_WRITE), *S.direct("third 23, fifth 42, sum 65"), *S.need_math(False),
             *S.parse("65", "65")]
    state, _ = await run(tmp_path, steps, num_next_steps_decision=4, solve_mode="direct",
                         max_final_solution_parsing=2)
    assert len([d for d in state["votes"] if d["iteration"] == 0]) == 4
    assert state["iteration"] == 1 and len(state["tool_calls"]) == 1
    assert state["final_answer"] == "65"


async def test_majority_retrieve_solves_directly_without_math(tmp_path):
    steps = [*S.votes("RETRIEVE", 3), *S.votes("INSERT", 2), *S.direct("Paris"), *S.need_math(False),
             *S.parse("Paris", "Paris", "paris.")]
    state, model = await run(tmp_path, steps, question="What is the capital of France?", solve_mode="direct")
    assert state["final_answer"] == "Paris"
    assert state["iteration"] == 0 and not state.get("tool_calls")
    assert not any("math and Python expert" in c for c in model.calls)


@pytest.mark.slow
async def test_iteration_limit_forces_a_direct_solution(tmp_path):
    """Direct Retrieval at the iteration limit: the forced solution is the partial solution."""
    steps = [*S.votes("INSERT", 0), *S.merge(times=0),
             *S.tool_calls(SORT_CALL, times=1), *S.write(ARRAY_WRITE),
             *S.forced("sorted [2, 15, 23, 37, 42, 88]; third + fifth = 65"), *S.need_math(False),
             *S.parse("65", "65", "65")]
    state, model = await run(tmp_path, steps, max_iterations=1, solve_mode="direct")
    assert state["decision"] == "FORCED_SOLVE"
    assert state["iteration"] == 1
    assert state["final_answer"] == "65"
    assert sum(S.FORCED in c for c in model.calls) == 1
    assert not any(S.FORCED_RETRIEVE in c for c in model.calls)
    assert [op["kind"] for op in state["solve_operations"]] == ["forced_solution"]
    assert not state.get("failures")


@pytest.mark.slow
async def test_iteration_limit_defines_forced_retrieve_queries(tmp_path):
    """Query mode at the iteration limit (appendix D.5): ``num_next_steps_decision`` forced retrieve queries are
    written and run; their result is the partial solution, and no forced solution is needed."""
    steps = [*insert_always(), *S.forced_retrieve(READ_SORTED, times=3), *S.need_math(True),
             *S.math("print(23 + 42)"), *S.parse("65", "65", "65")]
    state, model = await run(tmp_path, steps, max_iterations=1, num_next_steps_decision=3)
    assert state["decision"] == "FORCED_SOLVE" and state["final_answer"] == "65"
    forced_prompts = [c for c in model.calls if S.FORCED_RETRIEVE in c]
    assert len(forced_prompts) == 3 and "SortedArray" in forced_prompts[0]
    assert not any(S.FORCED in c for c in model.calls)
    [operation] = state["solve_operations"]
    assert operation["kind"] == "forced_retrieve" and sorted(operation["votes"]) == [0, 1, 2]
    assert '"third": 23' in operation["partial_solution"]
    assert not state.get("failures")


@pytest.mark.slow
async def test_forced_solution_when_the_forced_retrievals_fail(tmp_path):
    failing = "result = G.nodes['missing']['values']"
    steps = [*insert_always(), *S.forced_retrieve(failing, times=0), *S.fix(failing, times=0),
             *S.regenerate(failing, times=0), *S.forced("third 23, fifth 42, so 65"), *S.need_math(False),
             *S.parse("65", "65", "65")]
    state, model = await run(tmp_path, steps, max_iterations=1, num_next_steps_decision=2,
                             max_retrieve_query_retry=1, max_cypher_fixing_retry=1)
    assert state["final_answer"] == "65"
    kinds = [(op["kind"], op["partial_solution"] is not None) for op in state["solve_operations"]]
    assert kinds == [("forced_retrieve", False), ("forced_solution", True)]
    assert "KeyError" in state["solve_operations"][0]["error"]
    assert sum(S.FORCED in c for c in model.calls) == 1
    assert state["partial_solution"] == "third 23, fifth 42, so 65"


async def test_zero_iterations_forces_immediately(tmp_path):
    steps = [*S.forced("nothing known"), *S.need_math(False), *S.parse("", "", "")]
    state, model = await run(tmp_path, steps, max_iterations=0, solve_mode="direct")
    assert state["final_answer"] == NO_SOLUTION
    assert not state.get("votes")
    assert sum(S.FORCED in c for c in model.calls) == 1  # asked once: nothing parsed from it is the end


@pytest.mark.slow
async def test_every_retrieve_vote_brings_its_own_read_query(tmp_path):
    """Appendix C.1 / C.3.1: the RETRIEVE votes' read queries run one after the other (identical ones once), each
    result is parsed, and the answers count once per vote: three votes for one query outweigh two for another."""
    steps = [*S.votes("INSERT", 5, unless="SortedArray"),
             *S.votes("RETRIEVE", 3, when_extra="SortedArray", solve=READ_SORTED),
             *S.votes("RETRIEVE", 2, when_extra="SortedArray", solve=READ_ARRAY),
             *S.merge(), *S.tool_calls(SORT_CALL), *S.write(ARRAY_WRITE), *S.need_math(False, times=2),
             S.step(S.PARSE + '.*"third": 23', times=3, structured={"final_answer": "65"}),
             S.step(S.PARSE + ".*42, 23, 2, 88", times=3, structured={"final_answer": "25"})]
    state, model = await run(tmp_path, steps)
    assert state["final_answer"] == "65"
    operations = state["solve_operations"]
    assert [(op["operation"], len(op["votes"])) for op in operations] == [(READ_SORTED, 3), (READ_ARRAY, 2)]
    assert all(op["partial_solution"] for op in operations)
    assert [p["weight"] for p in state["partial_solutions"]] == [3, 2]
    assert sorted(p["partial"] for p in state["parsed_solutions"]) == [0, 0, 0, 1, 1, 1]
    assert sorted(state["candidates"]) == ["25", "25", "25", "65", "65", "65"]
    assert not any(S.CHOOSE in c for c in model.calls)  # 9 against 6: no tie to judge
    assert not any(re.search(S.RETRIEVE, c) for c in model.calls)
    assert [a["operation"] for a in state["solve_attempts"]] == [0, 1]
    vote_prompt = next(c for c in model.calls if S.VOTE in c)
    assert "solve_operation" in vote_prompt and "G.nodes(data=True)" in vote_prompt  # the read guide is given


async def test_direct_mode_votes_bring_their_answers(tmp_path):
    """Direct Retrieval: a RETRIEVE vote's answer is its partial solution; no further call states one."""
    steps = [*S.votes("RETRIEVE", 4, solve="Paris is the capital."), *S.votes("RETRIEVE", 1, solve="Lyon"),
             *S.need_math(False, times=2), S.step(S.PARSE + ".*Paris is", times=3,
                                                  structured={"final_answer": "Paris"}),
             S.step(S.PARSE + ".*Lyon", times=3, structured={"final_answer": "Lyon"})]
    state, model = await run(tmp_path, steps, question="What is the capital of France?", solve_mode="direct")
    assert state["final_answer"] == "Paris"
    assert not any(S.DIRECT in c for c in model.calls)
    assert [(op["operation"], len(op["votes"])) for op in state["solve_operations"]] == [
        ("Paris is the capital.", 4), ("Lyon", 1)]
    assert state["partial_solution"] == "Paris is the capital."
    vote_prompt = next(c for c in model.calls if S.VOTE in c)
    assert "the solution you derive" in vote_prompt


async def test_forced_solution_when_no_partial_solution_parses(tmp_path):
    steps = [*S.votes("RETRIEVE", 5, solve="unclear"), *S.need_math(False, times=2),
             S.step(S.PARSE + ".*unclear", times=3, structured={"final_answer": ""}),
             *S.forced("42, from the only value"), S.step(S.PARSE + ".*only value", times=3,
                                                          structured={"final_answer": "42"})]
    state, model = await run(tmp_path, steps, solve_mode="direct")
    assert state["final_answer"] == "42"
    assert [op["kind"] for op in state["solve_operations"]] == ["vote", "forced_solution"]
    assert sum(S.FORCED in c for c in model.calls) == 1
    assert [p["answer"] for p in state["parsed_solutions"]] == ["", "", "", "42", "42", "42"]


@pytest.mark.slow
async def test_write_fixed_after_an_error(tmp_path):
    broken = "G.add_node('array', label='Array', values=[42, 23, 2, 88, 37, 15]\n"  # syntax error
    steps = [*S.votes("INSERT", 5, unless="SortedArray"), *S.votes("RETRIEVE", 5, when_extra="SortedArray"),
             *S.merge(), *S.tool_calls(SORT_CALL), *S.write(broken), *S.fix(ARRAY_WRITE),
             *S.direct("65"), *S.need_math(False), *S.parse("65", "65", "65")]
    state, model = await run(tmp_path, steps, solve_mode="direct")
    [w] = state["kg_writes"]
    assert w["status"] == "fixed" and w["attempts"] == 2
    assert "SyntaxError" in w["errors"][0] or "syntax" in w["errors"][0].lower()
    fix_prompt = next(c for c in model.calls if S.FIX in c)
    assert "<error_log>" in fix_prompt and broken.strip() in fix_prompt
    assert len(state["kg"]["nodes"]) == 2


@pytest.mark.slow
async def test_write_discarded_after_the_fix_limit_and_run_goes_on(tmp_path):
    bad = "G.add_node('x')  # no label"
    steps = [*S.votes("INSERT", 0, unless="SortedArray"), *S.votes("RETRIEVE", 0, when_extra="SortedArray"),
             *S.merge(times=0), *S.tool_calls(SORT_CALL), *S.tool_calls(("llm_query", {"query": "sorted?"})),
             *S.write(bad), *S.fix(bad, times=2),
             *S.write(ARRAY_WRITE),
             *S.direct("65"), *S.need_math(False), *S.parse("65", "65", "65")]
    # the llm_query tool answers with the same scripted model
    steps.insert(0, S.step("self-contained questions", content="It is [2, 15, 23, 37, 42, 88].", times=0))
    state, _ = await run(tmp_path, steps, solve_mode="direct", max_cypher_fixing_retry=2)
    first, second = state["kg_writes"]
    assert first["status"] == "discarded" and first["attempts"] == 3 and first["snapshot"] is None
    assert all("label" in e for e in first["errors"])
    assert second["status"] == "applied" and second["iteration"] == 1
    assert state["final_answer"] == "65" and state["iteration"] == 2


@pytest.mark.slow
async def test_read_query_fixed_then_regenerated_after_empty_result(tmp_path):
    failing = "result = G.nodes['missing']['values']"
    empty = "result = [n for n, a in G.nodes(data=True) if a['label'] == 'Nothing']"
    steps = [*enhance_once(solve=failing), *S.fix(empty), *S.regenerate(READ_SORTED),
             *S.need_math(True), *S.math("print(23 + 42)"), *S.parse("65", "65", "65")]
    state, model = await run(tmp_path, steps)
    kinds = [(a["kind"], a["ok"], a["empty"]) for a in state["solve_attempts"]]
    assert kinds == [("initial", False, False), ("fix", True, True), ("regenerate", True, False)]
    assert "KeyError" in state["solve_attempts"][0]["error"]
    regen_prompt = next(c for c in model.calls if S.REGENERATE in c)
    assert empty in regen_prompt and "empty result" in regen_prompt
    assert state["final_answer"] == "65"


@pytest.mark.slow
async def test_a_vote_without_a_read_query_gets_one_from_the_retrieve_prompt(tmp_path):
    steps = [*enhance_once(), *S.retrieve(READ_SORTED), *S.need_math(False), *S.parse("65", "65", "65")]
    state, model = await run(tmp_path, steps)
    assert state["final_answer"] == "65"
    [operation] = state["solve_operations"]
    assert operation["operation"] == "" and operation["query"] == READ_SORTED and len(operation["votes"]) == 5
    assert sum(bool(re.search(S.RETRIEVE, c)) for c in model.calls) == 1


@pytest.mark.slow
async def test_no_solution_when_every_query_and_the_forced_solution_fail(tmp_path):
    failing = "result = G.nodes['missing']['values']"
    steps = [*enhance_once(solve=failing), *S.fix(failing, times=0), *S.regenerate(failing, times=0),
             *S.forced("")]
    state, model = await run(tmp_path, steps, max_retrieve_query_retry=2, max_cypher_fixing_retry=1)
    assert state["final_answer"] == NO_SOLUTION
    assert state["partial_solution"] is None
    # 3 rounds (initial + 2 regenerations), each with one fix
    assert len(state["solve_attempts"]) == 6
    assert [op["kind"] for op in state["solve_operations"]] == ["vote", "forced_solution"]
    assert sum(S.FORCED in c for c in model.calls) == 1
    assert not any(S.PARSE in c for c in model.calls)
    assert not state.get("failures")


async def test_parse_failures_are_retried(tmp_path):
    bad = S.step(S.PARSE, structured={"wrong_field": 1}, times=2)
    steps = [*S.votes("RETRIEVE", 5), *S.direct("42"), *S.need_math(False), bad,
             S.step(S.PARSE, structured={"final_answer": "42"}, times=0)]
    state, model = await run(tmp_path, steps, solve_mode="direct", max_parse_retries=1)
    assert [p["answer"] for p in state["parsed_solutions"]] == ["42", "42", "42"]
    assert sum(S.PARSE in c for c in model.calls) == 5  # two samples needed a second attempt
    retry = [c for c in model.calls if S.PARSE in c and "could not be used" in c]
    assert len(retry) == 2 and "final_answer" in retry[0]
    assert state["final_answer"] == "42"


async def test_a_parse_that_keeps_failing_is_no_candidate(tmp_path):
    bad = S.step(S.PARSE, structured={"wrong_field": 1}, times=1)
    steps = [*S.votes("RETRIEVE", 5), *S.direct("42"), *S.need_math(False), bad,
             S.step(S.PARSE, structured={"final_answer": "42"}, times=0)]
    state, _ = await run(tmp_path, steps, solve_mode="direct", max_parse_retries=0)
    errors = [p for p in state["parsed_solutions"] if p["error"]]
    assert len(errors) == 1 and "no valid ParsedSolution" in errors[0]["error"]
    assert state["candidates"] == ["42", "42"] and state["final_answer"] == "42"


@pytest.mark.slow
async def test_all_parses_fail_gives_no_solution(tmp_path):
    bad = S.step(S.PARSE, structured={"wrong_field": 1}, times=0)
    steps = [*S.votes("RETRIEVE", 5), *S.direct("42"), *S.need_math(False, times=2), bad, *S.forced("42")]
    state, model = await run(tmp_path, steps, solve_mode="direct", max_parse_retries=0)
    assert state["final_answer"] == NO_SOLUTION
    assert sum(S.FORCED in c for c in model.calls) == 1  # the forced solution, whose parses fail as well
    assert len(state["parsed_solutions"]) == 6


async def test_tied_candidates_are_chosen_by_the_llm(tmp_path):
    steps = [*S.votes("RETRIEVE", 5), *S.direct("Lyon or Paris"), *S.need_math(False),
             *S.parse("Lyon", "Paris"), *S.choose(1)]
    state, model = await run(tmp_path, steps, solve_mode="direct", max_final_solution_parsing=2)
    assert sorted(state["candidates"]) == ["Lyon", "Paris"]
    chosen_prompt = next(c for c in model.calls if S.CHOOSE in c)
    assert state["final_answer"] == ("Paris" if "1: Paris" in chosen_prompt else "Lyon")


@pytest.mark.slow
async def test_repeated_tool_call_is_served_from_the_run_cache(tmp_path):
    steps = [*S.votes("INSERT", 5, unless="Array"), *S.votes("INSERT", 5, when_extra="Array", unless="Checked"),
             *S.votes("RETRIEVE", 5, when_extra="Checked"), *S.merge(times=2),
             *S.tool_calls(SORT_CALL, times=2), *S.write(ARRAY_WRITE),
             *S.write("G.nodes['array']['note'] = 'Checked'"), *S.direct("65"), *S.need_math(False),
             *S.parse("65", "65", "65")]
    state, _ = await run(tmp_path, steps, solve_mode="direct")
    first, second = state["tool_calls"]
    assert not first["cached"] and second["cached"] and second["output"] == first["output"]
    assert second["attempts"] == 0


@pytest.mark.slow
async def test_failing_tool_is_retried_and_reported_without_ending_the_run(tmp_path, monkeypatch):
    from langchain_core.tools import tool

    from kgagents.tools.manager import register_tool, unregister_tool

    calls = {"n": 0}

    @tool
    def flaky(x: str) -> str:
        """Always fails."""
        calls["n"] += 1
        raise ConnectionError("service down")

    register_tool(flaky)
    try:
        steps = [*S.votes("INSERT", 5, unless="Attempted"), *S.votes("RETRIEVE", 5, when_extra="Attempted"),
                 *S.merge(), *S.tool_calls(("flaky", {"x": "1"})),
                 *S.write("G.add_node('n', label='Attempted', tool='flaky')"),
                 *S.direct("unknown"), *S.need_math(False, times=2), *S.parse("", "", ""), *S.forced("")]
        state, _ = await run(tmp_path, steps, solve_mode="direct", max_tool_retries=3)
    finally:
        unregister_tool("flaky")
    [call] = state["tool_calls"]
    assert not call["ok"] and call["attempts"] == 3 and calls["n"] == 3
    assert "service down" in call["output"]
    assert state["final_answer"] == NO_SOLUTION


@pytest.mark.slow
async def test_unknown_tool_call_is_recorded_as_an_error(tmp_path):
    steps = [*S.votes("INSERT", 5, unless="Seen"), *S.votes("RETRIEVE", 5, when_extra="Seen"), *S.merge(),
             *S.tool_calls(("no_such_tool", {})), *S.write("G.add_node('s', label='Seen')"),
             *S.direct("x"), *S.need_math(False), *S.parse("x", "x", "x")]
    state, _ = await run(tmp_path, steps, solve_mode="direct")
    [call] = state["tool_calls"]
    assert not call["ok"] and "not available" in call["output"]


@pytest.mark.slow
async def test_invalid_vote_replies_count_as_no_vote(tmp_path):
    invalid = S.step(S.VOTE, structured={"query_type": "MAYBE", "reason": "?"}, times=0, unless="Seen")
    steps = [invalid, *S.votes("RETRIEVE", 5, when_extra="Seen"), *S.merge(), *S.tool_calls(SORT_CALL),
             *S.write("G.add_node('s', label='Seen')"), *S.direct("x"), *S.need_math(False),
             *S.parse("x", "x", "x")]
    state, _ = await run(tmp_path, steps, solve_mode="direct", max_parse_retries=0)
    it0 = [v for v in state["votes"] if v["iteration"] == 0]
    assert {v["query_type"] for v in it0} == {"INVALID"}
    assert state["iteration"] == 1  # no valid vote is a tie: ENHANCE


async def test_empty_question_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no question"):
        await run(tmp_path, [], question="  ")
