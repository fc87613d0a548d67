"""KGoT on the command line: the offline demo.

    kgagents demo [--backend networkx|neo4j|falkordb|sparql]
        the KGoT paper's Figure 9 task, run through the real graph, knowledge graph, sandbox and SQLite checkpoints
        with a scripted chat model (no LLM is called)
"""

from __future__ import annotations

import argparse
import tempfile
from importlib import resources
from pathlib import Path

from kgagents.cli.common import _run, demo_intro, demo_model, demo_outro
from kgagents.nodes.kgot import KGoTContext

QUESTION = ("A C++ script holds the array [42, 23, 2, 88, 37, 15]. Sort the array and return the sum of the third "
            "and fifth integers of the sorted list.")


def run_demo(args: argparse.Namespace) -> int:
    """``kgagents demo``: the Figure 9 task with a scripted model, on the chosen task-KG backend."""
    from kgagents.tools.kg.stores import backend_language

    backend = getattr(args, "backend", None) or "networkx"
    suffix = {"python": ""}.get(backend_language(backend), f"_{backend_language(backend)}")
    script = resources.files("kgagents") / "data" / f"demo_kgot_figure9{suffix}.json"
    demo_intro("Scripted demo: the KGoT paper's Figure 9 task, run through the real graph, knowledge graph, "
               "sandbox and SQLite checkpoints with a scripted chat model (no LLM is called).", QUESTION)
    with tempfile.TemporaryDirectory(prefix="kgagents-demo-") as tmp, resources.as_file(script) as path:
        values = {"model": f"scripted:{path}", "backend": backend, "num_next_steps_decision": 5}
        ctx = KGoTContext.from_mapping({**values, "model": demo_model(path), "work_dir": str(Path(tmp) / "work")})
        thread_id, state = _run("kgot", args, {"question": QUESTION}, None, values, context_override=ctx)
        print(state.get("final_answer", "(no answer)"))
    demo_outro(thread_id, picture=True)
    return 0
