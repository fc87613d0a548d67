"""Noise mitigation before solving (appendix B.7) on every backend."""

from __future__ import annotations

import pytest

from kgagents.nodes.cleanup import CLEANUP_WRITE_ID, NoiseRemoval, RelationshipRef, checked_proposal
from tests import kgot_script as S
from tests.kg.conftest import CODE, Backend
from tests.kg.helpers import run

NOISE_PROMPT = "knowledge graph curator"


def noisy_script(language: str, removal: dict) -> list[dict]:
    code = CODE[language]
    return [*S.votes("INSERT", 0, unless="SortedArray"),
            *S.votes("INSERT", 0, when_extra="SortedArray", unless="Label: Weather"),
            *S.votes("RETRIEVE", 0, when_extra="Label: Weather"), *S.merge(times=0),
            *S.tool_calls(("run_python_code", {"code": "print(sorted([42, 23, 2, 88, 37, 15]))"})),
            *S.tool_calls(("run_python_code", {"code": "print('sunny')"}), when_extra="SortedArray"),
            S.step(S.WRITE, unless="SortedArray", structured={"code": code["write_array"]}),
            S.step("SortedArray.*" + S.WRITE, structured={"code": code["write_noise"]}),
            S.step(NOISE_PROMPT, structured=removal),
            S.step(S.RETRIEVE, structured={"code": code["read_sorted"]}),
            *S.need_math(True), *S.math("print(23 + 42)"), S.step(S.PARSE, times=0, structured={"final_answer": "65"})]


@pytest.mark.slow
async def test_irrelevant_and_duplicate_nodes_are_removed_before_solving(backend: Backend, tmp_path):
    removal = {"remove_nodes": ["weather", "array_copy", "no_such_node"],
               "remove_relationships": [], "reason": "the weather is irrelevant; array_copy duplicates array"}
    state, model = await run(backend, tmp_path, noisy_script(backend.language, removal), cleanup=True)
    assert state["final_answer"] == "65"
    [record] = state["noise_removals"]
    assert record["status"] == "applied" and record["removed_nodes"] == ["array_copy", "weather"]
    assert "no_such_node" in record["proposed_nodes"]
    assert sorted(n["id"] for n in state["kg"]["nodes"]) == ["array", "sorted_array"]
    cleanup_write = state["kg_writes"][-1]
    assert cleanup_write["tool_call_id"] == CLEANUP_WRITE_ID and cleanup_write["snapshot"] == state["kg"]
    prompt = next(c for c in model.calls if NOISE_PROMPT in c)
    assert "Label: Weather" in prompt
    # the solve step saw the cleaned KG
    retrieve_prompt = next(c for c in model.calls if "retrieves from the graph" in c)
    assert "Weather" not in retrieve_prompt
    if backend.backend != "networkx":
        assert backend.peek("t1") == state["kg"]


@pytest.mark.slow
async def test_relationships_alone_and_nothing_to_remove(backend: Backend, tmp_path):
    rel = {"remove_nodes": [], "remove_relationships": [{"source": "array_copy", "type": "SORTED_AS",
                                                         "target": "sorted_array"}], "reason": "a stray link"}
    state, _ = await run(backend, tmp_path, noisy_script(backend.language, rel), cleanup=True)
    assert ("array_copy", "SORTED_AS", "sorted_array") not in {
        (r["source"], r["type"], r["target"]) for r in state["kg"]["relationships"]}
    assert "array_copy" in {n["id"] for n in state["kg"]["nodes"]}
    nothing = {"remove_nodes": [], "remove_relationships": [], "reason": "all relevant"}
    state, _ = await run(backend, tmp_path / "2", noisy_script(backend.language, nothing), thread="t2",
                         cleanup=True)
    assert state["noise_removals"][0]["status"] == "nothing to remove"
    assert all(w["tool_call_id"] != CLEANUP_WRITE_ID for w in state["kg_writes"])


def test_a_proposal_never_removes_the_whole_kg():
    kg = {"nodes": [{"id": "a", "labels": [], "properties": {}}, {"id": "b", "labels": [], "properties": {}}],
          "relationships": [{"type": "R", "source": "a", "target": "b", "properties": {}}]}
    assert checked_proposal(NoiseRemoval(remove_nodes=["a", "b"]), kg) == ([], [])
    nodes, rels = checked_proposal(NoiseRemoval(remove_nodes=["a"], remove_relationships=[
        RelationshipRef(source="a", type="R", target="b")]), kg)
    assert nodes == ["a"] and rels == []  # the relationship goes with its node
