"""KGoT from Python: a task answered through a knowledge graph of thoughts, its evidence, a resumed thread.

    python examples/kgot.py                         # offline: a scripted model (no LLM is called)
    python examples/kgot.py openai:gpt-4o-mini      # any model kgagents takes (OPENAI_API_KEY set)

The task is the KGoT paper's Figure 9 example. LLM-written code runs in the sandbox (bubblewrap; without it
set KGAGENTS_ALLOW_WEAK_SANDBOX=1). Attach files with ``"attachments": [path, ...]``; web search needs
SERPAPI_API_KEY.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from importlib import resources
from pathlib import Path

from kgagents.core.runs import open_checkpointer
from kgagents.graphs.kgot import compile_graph
from kgagents.nodes.kgot import KGoTContext

QUESTION = ("A C++ script holds the array [42, 23, 2, 88, 37, 15]. Sort the array and return the sum of the "
            "third and fifth integers of the sorted list.")


async def main(model: str | None = None) -> dict:
    """Run the task, stopping once after its first KG write and resuming; returns the final state."""
    script = resources.files("kgagents") / "data" / "demo_kgot_figure9.json"
    with resources.as_file(script) as script_path, tempfile.TemporaryDirectory() as tmp:
        # 1. the inputs: the question and the files it refers to
        inputs = {"question": QUESTION, "attachments": []}
        # 2. the runtime context: the model of every role and KGoT's limits (the paper's appendix B.2 by
        #    default);
        #    work_dir keeps the tools' files (here in a temporary folder)
        context = KGoTContext(model=model or f"scripted:{script_path}", num_next_steps_decision=5,
                              work_dir=str(Path(tmp) / "work"))
        config = {"configurable": {"thread_id": "kgot-example"}, "recursion_limit": 200}
        async with open_checkpointer(Path(tmp) / "checkpoints.sqlite") as saver:
            # 3. invoke; here the run stops after its first KG write, as Ctrl-C or a crash would stop it
            await compile_graph(saver, interrupt_after=["integrate_new_information"]).ainvoke(
                inputs, config, context=context)
            graph = compile_graph(saver)
            stopped = (await graph.aget_state(config)).values  # the thread's whole state, as checkpointed
            writes, nodes = len(stopped["kg_writes"]), len(stopped["kg"]["nodes"])
            print(f"stopped after {writes} KG write(s): {nodes} node(s)")
            # 4. resume the same thread: no input (None), the same config and context; nothing runs twice
            out = await graph.ainvoke(None, config, context=context)  # the output: answer, cost, tokens, evidence
            print(f"cost: {out['cost_usd']}, tokens: {out['tokens']}, evidence: {len(out['evidence']['triples'])} "
                  "triple(s)")
            state = (await graph.aget_state(config)).values
    # 5. the answer and its evidence: the tool calls, the knowledge graph they built, the solve queries
    print(f"answer: {state['final_answer']}")
    for call in state["tool_calls"]:
        print(f"  tool {call['name']}({call['args']}) -> {call['output'][:80]!r}")
    for node in state["kg"]["nodes"]:
        print(f"  node {node['id']} {node['labels']} {node['properties']}")
    for rel in state["kg"]["relationships"]:
        print(f"  ({rel['source']}) -[{rel['type']}]-> ({rel['target']})")
    return state


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
