"""The one KGoT workflow on every backend: both solve modes, engine errors through the fix loops."""

from __future__ import annotations

import pytest

from kgagents.prompts.kgot import LANGUAGES
from tests import kgot_script as S
from tests.kg.conftest import CODE, Backend
from tests.kg.helpers import kg_shape, run, two_writes

pytestmark = pytest.mark.slow

EXPECTED_SHAPE = ([("array", ("Array",)), ("sorted_array", ("SortedArray",)), ("total", ("Total",))],
                  [("array", "SORTED_AS", "sorted_array"), ("sorted_array", "SUMS_TO", "total")])


@pytest.mark.parametrize("solve", ["query", "direct"])
async def test_enhance_twice_then_solve(backend: Backend, tmp_path, solve):
    state, model = await run(backend, tmp_path, two_writes(backend.language, solve=solve), solve_mode=solve)
    assert state["final_answer"] == "65"
    assert [w["status"] for w in state["kg_writes"]] == ["applied", "applied"]
    assert kg_shape(state["kg"]) == EXPECTED_SHAPE
    assert state["kg_writes"][-1]["snapshot"] == state["kg"]
    if solve == "query":
        [attempt] = state["solve_attempts"]
        assert attempt["ok"] and "65" in attempt["result"]
        prompt = next(c for c in model.calls if "retrieves from the graph" in c)
        assert f"({LANGUAGES[backend.language].name})" in prompt
    else:
        assert not state.get("solve_attempts")
    store = backend.open("t1", state["kg"], tmp_path)
    assert backend.db_snapshot(store) == state["kg"]


async def test_engine_errors_reach_the_fix_loops(backend: Backend, tmp_path):
    code = CODE[backend.language]
    # the first fix prompt is the write's, the second the read query's
    steps = [S.step(S.FIX, structured={"code": code["write_array"]}),
             S.step(S.FIX, structured={"code": code["read_total"]}),
             *two_writes(backend.language)]
    steps = [s for s in steps if s.get("when") != S.RETRIEVE]
    steps.insert(2, S.step(S.WRITE, unless="SortedArray", structured={"code": code["broken_write"]}))
    steps.insert(3, S.step(S.RETRIEVE, structured={"code": code["broken_read"]}))
    state, model = await run(backend, tmp_path, steps)
    first = state["kg_writes"][0]
    assert first["status"] == "fixed" and first["attempts"] == 2 and first["errors"]
    fix_prompts = [c for c in model.calls if S.FIX in c]
    assert first["errors"][0].splitlines()[0][:60] in fix_prompts[0]
    kinds = [(a["kind"], a["ok"]) for a in state["solve_attempts"]]
    assert kinds == [("initial", False), ("fix", True)]
    assert state["solve_attempts"][0]["error"] in fix_prompts[1]
    assert state["final_answer"] == "65"
