"""Grounded reasoning (Graph-ToT × agent) from Python: a question over a domain graph, the thought graph that
answers it, and a resumed thread.

    python examples/grounded.py                     # offline: a scripted model (no LLM is called)
    python examples/grounded.py openai:gpt-4o-mini  # any model kgagents takes (OPENAI_API_KEY set)

The graph is the GRBench-shaped DBLP fixture shipped with kgagents. Your own graph: ``"graph": NAME`` for a
graph imported with ``kgagents graph import`` (triples, GRBench graph.json, a STaRK-style KB), or a path.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from kgagents.core.runs import open_checkpointer
from kgagents.evals.grbench import fixture_graph, fixture_questions
from kgagents.graphs.grounded import compile_graph
from kgagents.nodes.grounded import GroundedContext
from kgagents.tools.pgraph import open_graph


def scripted_model(folder: Path, row: dict, graph: str) -> str:
    """An offline model that walks the question's gold path (the same script as ``kgagents demo``)."""
    from kgagents.cli.grounded import gold_path_steps

    script = folder / "script.json"
    script.write_text(json.dumps({"name": "example", "steps": gold_path_steps(row, open_graph(graph))}))
    return f"scripted:{script}"


async def main(model: str | None = None) -> dict:
    """Run the question, stopping once after the first depth's selection and resuming; returns the final
    state."""
    row = fixture_questions("dblp")[0]
    graph = str(fixture_graph("dblp"))
    with tempfile.TemporaryDirectory() as tmp:
        # 1. the inputs: the question and the graph to ground every step in (a name or a path)
        inputs = {"question": row["question"], "graph": graph}
        # 2. the runtime context: the strategy (cot | tot | got), the interaction (agent | explore) and the
        #    paper's settings (n = 10 steps, k = t = 3)
        context = GroundedContext(model=model or scripted_model(Path(tmp), row, graph), strategy="tot",
                                  interaction="agent")
        config = {"configurable": {"thread_id": "grounded-example"}, "recursion_limit": 200}
        async with open_checkpointer(Path(tmp) / "checkpoints.sqlite") as saver:
            # 3. invoke; here the run stops once the first depth's states are selected, as a crash would
            await compile_graph(saver, interrupt_after=["select_states"]).ainvoke(inputs, config, context=context)
            graph = compile_graph(saver)
            stopped = (await graph.aget_state(config)).values  # the thread's whole state, as checkpointed
            print(f"stopped with {len(stopped['thoughts'])} thought(s) in the graph")
            # 4. resume the same thread: no input (None), the same config and context
            out = await graph.ainvoke(None, config, context=context)  # the output: answer, cost, path, exit
            print(f"exit: {out['exit_reason']}; evidence: {out['evidence']}")
            state = (await graph.aget_state(config)).values
    # 5. the answer and its evidence: the thoughts on its path, each with the graph calls that grounded it
    print(f"answer: {state['final_answer']} (gold: {row['answer']})")
    thoughts, node = state["thoughts"], state.get("best")
    path = []
    while node:
        path.append(node)
        node = (thoughts[node].get("parents") or [None])[0]
    for node in reversed(path):
        t = thoughts[node]
        actions = t.get("actions") or []
        calls = "; ".join(f"{a['name']}({', '.join(map(str, (a.get('args') or {}).values()))})"
                          for a in actions[:2])
        more = f" and {len(actions) - 2} more" if len(actions) > 2 else ""
        print(f"  {node}: {t.get('thought', '')[:60]!r} grounded by {calls or 'no call'}{more}")
    return state


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
