"""Agent-G from Python: a question over web pages plus a knowledge graph, the references and critic verdicts
behind its answer, and a resumed thread.

    python examples/agent_g.py                      # offline: a scripted model (no LLM is called)
    python examples/agent_g.py openai:gpt-4o-mini   # any model kgagents takes (OPENAI_API_KEY set)

The question is one of CRAG's sample questions with its five web pages (shipped with kgagents); the graph
module asks CRAG's mock KG API, here its saved answers served on a loopback port. Your own documents:
``"pages": [{"name", "url", "text" or "html"}]``; your own graph: ``"graph": NAME`` (imported with
``kgagents graph import``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from kgagents.core.runs import open_checkpointer
from kgagents.evals.datasets import load_dataset
from kgagents.graphs.agent_g import compile_graph
from kgagents.nodes.agent_g import AgentGContext
from kgagents.tools.crag_api import CragMockServer

QUESTION = "is dreamworks animation owned by time warner or universal pictures?"


def scripted_model(folder: Path) -> str:
    """An offline model making the decisions of ``kgagents demo --workflow agent-g``: a first answer the
    critic rejects, corrective feedback, then the answer the retrieved pages support."""
    from kgagents.cli.agent_g import demo_steps

    script = folder / "script.json"
    script.write_text(json.dumps({"name": "example", "steps": demo_steps()}))
    return f"scripted:{script}"


async def main(model: str | None = None) -> dict:
    """Run the question, stopping once after the first critic verdict and resuming; returns the final
    state."""
    item = next(i for i in load_dataset("crag", None).items if i.question.strip().lower() == QUESTION)
    with tempfile.TemporaryDirectory() as tmp, CragMockServer() as kg_api:
        # 1. the inputs: the question, when it was asked, and its web pages (the text module's documents)
        inputs = {"question": item.question, "query_time": item.inputs["query_time"],
                  "pages": item.inputs["pages"]}
        # 2. the runtime context: the task mode (generation | retrieval), the graph module's KG API, T = 5
        context = AgentGContext(model=model or scripted_model(Path(tmp)), task="generation",
                                crag_api_url=kg_api.url)
        config = {"configurable": {"thread_id": "agent-g-example"}, "recursion_limit": 200}
        async with open_checkpointer(Path(tmp) / "checkpoints.sqlite") as saver:
            # 3. invoke; here the run stops after the validator's first verdict, as a crash would stop it
            await compile_graph(saver, interrupt_after=["validator"]).ainvoke(inputs, config, context=context)
            graph = compile_graph(saver)
            stopped = (await graph.aget_state(config)).values  # the thread's whole state, as checkpointed
            print(f"stopped after iteration 1: answer {stopped['iterations'][-1].get('answer')!r}")
            # 4. resume the same thread: no input (None), the same config and context
            out = await graph.ainvoke(None, config, context=context)  # the output: answer, cost, retrieved ids
            print(f"exit: {out['exit_reason']}; evidence: {out['evidence']}")
            state = (await graph.aget_state(config)).values
    # 5. the answer and its evidence: each iteration's retrieval, answer, verdict and feedback
    print(f"answer: {state['final_answer']} (gold: {item.gold})")
    for it in state["iterations"]:
        retrieval = it.get("retrieval") or {}
        verdict = "accepted" if it.get("accepted") else "rejected"
        count = len(retrieval.get("references") or [])
        print(f"  iteration {it['t']}: {retrieval.get('module')} module, {count} reference(s); "
              f"answer {it.get('answer')!r}, {verdict}")
        for ref in (retrieval.get("references") or [])[:2]:
            print(f"      [{ref['kind']} {ref['id']}] {str(ref['text'])[:90]!r}")
        if it.get("feedback"):
            print(f"      feedback: {it['feedback']}")
    return state


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
