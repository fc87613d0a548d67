"""A ToT run killed (SIGKILL) in the middle of a depth — some candidate branches saved, others not — resumes from
its checkpoint in a new process and finishes with the same thought graph as an uninterrupted run."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from kgagents.cli.grounded import gold_path_steps
from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.grbench import fixture_graph, fixture_questions
from kgagents.graphs.grounded import compile_graph
from kgagents.graphs.io import final_state
from kgagents.nodes.grounded import GroundedContext
from kgagents.tools.pgraph import open_graph

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = {"strategy": "tot", "interaction": "agent", "evaluator": "select"}

KILLER = textwrap.dedent("""
    import asyncio, json, os, signal, sys, time
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from kgagents.graphs.grounded import compile_graph
    from kgagents.core.scripted import ScriptedChatModel
    from kgagents.nodes.grounded import GroundedContext

    class Killer(ScriptedChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            stage = (run_manager.metadata or {}).get("kgagents_stage") if run_manager else None
            if stage == "agent thought, step 2, candidate 3 of 3":
                time.sleep(1.5)                       # the other branches of this depth finish and are saved
                os.kill(os.getpid(), signal.SIGKILL)
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    db, script, question, graph, context = sys.argv[1:6]
    steps = json.loads(open(script).read())
    async def main():
        async with AsyncSqliteSaver.from_conn_string(db) as saver:
            ctx = GroundedContext(model=Killer(steps=steps), **json.loads(context))
            config = {"configurable": {"thread_id": "killed"}, "recursion_limit": ctx.recursion_limit}
            await compile_graph(saver).ainvoke({"question": question, "graph": graph}, config, context=ctx)
    asyncio.run(main())
""")


def _shape(state: dict) -> dict:
    """What the thought graph says: per thought its parents, text, actions, grounding and fate."""
    return {i: (t.get("parents"), t.get("thought"), json.dumps(t.get("actions"), sort_keys=True),
                t.get("kept"), t.get("finished"), t.get("answer")) for i, t in state["thoughts"].items()}


async def test_a_killed_tot_run_resumes_to_the_same_thought_graph(tmp_path):
    row = next(r for r in fixture_questions("dblp") if r["qid"] == "0")
    source = str(fixture_graph("dblp"))
    steps = gold_path_steps(row, open_graph(source))
    script = tmp_path / "steps.json"
    script.write_text(json.dumps(steps), encoding="utf-8")
    db = tmp_path / "runs.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", KILLER, str(db), str(script),
                                                     row["question"], source, json.dumps(CONTEXT)],
                                   cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == -9, proc.stderr[-2000:]

    config = {"configurable": {"thread_id": "killed"}}
    async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
        graph = compile_graph(saver)
        snapshot = await graph.aget_state(config)
        assert snapshot.next == ("generate_step",) * 9 or set(snapshot.next) == {"generate_step"}
        saved = [t for t in snapshot.tasks if t.result is not None]
        assert 0 < len(saved) < len(snapshot.tasks)  # killed mid-depth: some branches done, some not
        ctx = GroundedContext(model=ScriptedChatModel(steps=steps), **CONTEXT)
        resumed = await final_state(graph,
                                    None, {**config, "recursion_limit": ctx.recursion_limit}, context=ctx)

        reference_ctx = GroundedContext(model=ScriptedChatModel(steps=steps), **CONTEXT)
        reference = await final_state(
            graph, {"question": row["question"], "graph": source},
            {"configurable": {"thread_id": "whole"},
            "recursion_limit": reference_ctx.recursion_limit}, context=reference_ctx)
    assert resumed["final_answer"] == reference["final_answer"] == row["answer"]
    assert _shape(resumed) == _shape(reference)
    assert resumed["selections"] == reference["selections"]
