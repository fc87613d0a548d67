"""ARK-V1 from Python: a yes/no question over a knowledge graph, its evidence, and a resumed thread.

    python examples/ark.py                          # offline: a scripted model (no LLM is called)
    python examples/ark.py openai:gpt-4o-mini       # any model kgagents takes (OPENAI_API_KEY set)

The question is the ARK-V1 paper's example (CoLoTa S2) over its 32-edge Wikidata subgraph, shipped with
kgagents. Your own graph: ``{"graph": "NAME"}`` for a graph imported with ``kgagents graph import``, or
``{"kg_file": PATH}`` for a file in ARK-V1 format, instead of the packaged file.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from importlib import resources
from pathlib import Path

from kgagents.core.runs import open_checkpointer
from kgagents.graphs.ark import compile_graph
from kgagents.nodes.ark import ArkContext

DATA = resources.files("kgagents") / "data" / "ark"


async def main(model: str | None = None) -> dict:
    """Run the question, stopping once after its first reasoning step and resuming; returns the final
    state."""
    with resources.as_file(DATA / "example_data.json") as graph_file, \
            resources.as_file(DATA / "demo_ark_yui.json") as script, tempfile.TemporaryDirectory() as tmp:
        # 1. the inputs: the question and its knowledge graph (by name, path, inline edges or an ARK-V1 file)
        inputs = {"question": "Is Yui Yuigahama's pet a corgi?", "kg_file": str(graph_file)}
        # 2. the runtime context: the model and ARK-V1's settings (the paper's c_max = 5, k_max = 8)
        context = ArkContext(model=model or f"scripted:{script}")
        config = {"configurable": {"thread_id": "ark-example"}, "recursion_limit": 200}
        async with open_checkpointer(Path(tmp) / "checkpoints.sqlite") as saver:
            # 3. invoke; here the run stops after its first reasoning step, as Ctrl-C or a crash would stop it
            await compile_graph(saver, interrupt_after=["clean_up"]).ainvoke(inputs, config, context=context)
            graph = compile_graph(saver)
            stopped = (await graph.aget_state(config)).values  # the thread's whole state, as checkpointed
            print(f"stopped after step 1: {stopped['steps'][0]['implication']}")
            # 4. resume the same thread: no input (None), the same config and context; finished steps are kept
            out = await graph.ainvoke(None, config, context=context)  # the output: answer, cost, path, exit
            print(f"exit: {out['exit_reason']}; evidence: {out['evidence']}")
            state = (await graph.aget_state(config)).values  # the whole run, read back from its checkpoints
    # 5. the answer ("True", "False", or "None" to abstain) and its evidence: the triples each step selected
    print(f"answer: {state['final_answer']} ({state['exit_reason']}): {state['justification']}")
    for step in state["steps"]:
        print(f"  step {step['k']}: {step['anchor']} -[{step['relation']}]-> "
              f"{len(step['selected'])} triple(s); {step['implication']}")
        for t in step["selected"]:
            qualifiers = f" {t['qualifiers']}" if t["qualifiers"] else ""
            print(f"      ({t['head']}, {t['relation']}, {t['tail']}){qualifiers}")
    return state


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
