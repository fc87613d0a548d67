"""Scripted KGoT runs on any backend: per-language scripts and a runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs.io import final_state
from kgagents.graphs.kgot import compile_graph
from kgagents.nodes.kgot import KGoTContext
from tests import kgot_script as S
from tests.kg.conftest import CODE, Backend

QUESTION = "The array [42, 23, 2, 88, 37, 15] is in a script. Sort it and add the third and fifth values."
SORT_CALL = ("run_python_code", {"code": "print(sorted([42, 23, 2, 88, 37, 15]))"})
TOTAL_CALL = ("run_python_code", {"code": "print('third + fifth =', 23 + 42)"})


def two_writes(language: str, *, solve: str = "query") -> list[dict[str, Any]]:
    """Iteration 0 writes the array, iteration 1 the total; then solve (query or direct) and parse 65."""
    code = CODE[language]
    steps = [*S.votes("INSERT", 0, unless="SortedArray"),
             *S.votes("INSERT", 0, when_extra="SortedArray", unless="Label: Total"),
             *S.votes("RETRIEVE", 0, when_extra="Label: Total"), *S.merge(times=0),
             S.step(S.DEFINE_TOOLS, unless="SortedArray", times=0,
                    tool_calls=[{"name": SORT_CALL[0], "args": SORT_CALL[1]}]),
             S.step(S.DEFINE_TOOLS + ".*SortedArray", times=0,
                    tool_calls=[{"name": TOTAL_CALL[0], "args": TOTAL_CALL[1]}]),
             S.step(S.WRITE, unless="SortedArray", times=0, structured={"code": code["write_array"]}),
             S.step("SortedArray.*" + S.WRITE, times=0, structured={"code": code["write_total"]})]
    if solve == "query":
        steps += [S.step(S.RETRIEVE, times=0, structured={"code": code["read_total"]})]
    else:
        steps += [S.step(S.DIRECT, times=0, structured={"solution": "The total node holds 65."})]
    steps += [*S.need_math(False, times=0), S.step(S.PARSE, times=0, structured={"final_answer": "65"})]
    return steps


def context(backend: Backend, model: Any, tmp_path: Path, **kw: Any) -> KGoTContext:
    return KGoTContext(model=model, work_dir=str(tmp_path / "work"), api_backoff_base_s=0.001,
                       tool_backoff_base_s=0.001, allow_weak_sandbox=True,
                       num_next_steps_decision=kw.pop("num_next_steps_decision", 1),
                       max_final_solution_parsing=kw.pop("max_final_solution_parsing", 1), **backend.context(**kw))


async def run(backend: Backend, tmp_path: Path, steps: list[dict[str, Any]], *, thread: str = "t1",
              checkpointer: Any = None, question: str = QUESTION,
              **ctx: Any) -> tuple[dict[str, Any], ScriptedChatModel]:
    model = ScriptedChatModel(steps=steps)
    graph = compile_graph(checkpointer or InMemorySaver())
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 200}
    state = await final_state(
        graph,
        {"question": question}, config, context=context(backend, model, tmp_path, **ctx))
    return state, model


def kg_shape(kg: dict[str, Any]) -> tuple[list[tuple[str, tuple[str, ...]]], list[tuple[str, str, str]]]:
    """Node ids with labels and relationship triples: what must be equal between runs."""
    return (sorted((n["id"], tuple(n["labels"])) for n in kg["nodes"]),
            sorted((r["source"], r["type"], r["target"]) for r in kg["relationships"]))
