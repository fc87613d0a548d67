"""An Agent-G run started with ``kgagents ask`` and killed (SIGKILL) in its second iteration resumes with
``kgagents resume`` in a new process and ends exactly like an uninterrupted run: the same iterations (actions,
references, answers, verdicts, feedback) and the same ranking."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kgagents.cli import main
from kgagents.core.runs import RunRegistry
from kgagents.graphs.workflows import thread_state
from tests.agent_g.conftest import QUESTION, comment, decide, validate

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BOTH = [("CYP3A4", "gene/protein"), ("strongyloidiasis", "disease")]
STEPS = [decide(1, entities=[BOTH[0]], relations=["enzyme"]), validate(1, "no"),
         comment(1, "missing entity", "the question also names a disease"),
         decide(2, entities=BOTH, relations=["enzyme", "indication"], context=".*only one entity"),
         validate(2, "yes")]

#: Runs ``kgagents ask`` and kills its own process when the second validator call arrives: iteration 1 is
#: checkpointed, and so are iteration 2's agent, retrieval and generator steps (checkpoints are written
#: asynchronously while the next step runs, hence the pause before the kill); its verdict is not.
KILLER = textwrap.dedent("""
    import os, signal, sys, time
    from kgagents import cli
    from kgagents.core.scripted import ScriptedChatModel

    generate = ScriptedChatModel._generate
    def killing(self, messages, stop=None, run_manager=None, **kwargs):
        if run_manager is not None and (run_manager.metadata or {}).get("kgagents_stage") == "validator, iteration 2":
            time.sleep(1.0)  # the checkpoints of the steps before are written (asynchronously)
            os.kill(os.getpid(), signal.SIGKILL)
        return generate(self, messages, stop=stop, run_manager=run_manager, **kwargs)
    ScriptedChatModel._generate = killing
    sys.exit(cli.main(sys.argv[1:]))
""")


def _ask(runs: Path, script: Path, graph: str, thread: str) -> list[str]:
    return ["--runs-dir", str(runs), "ask", QUESTION, "--workflow", "agent-g", "--graph", graph, "--thread", thread,
            "--model", f"scripted:{script}", "--set", "task=retrieval", "--quiet"]


def _shape(state: dict) -> list:
    return [(i["t"], json.dumps(i.get("action"), sort_keys=True), [r["id"] for r in i["retrieval"]["references"]],
             i.get("ranked_ids"), i.get("accepted"), i.get("error_type"), i.get("feedback"))
            for i in state["iterations"]]


async def test_a_killed_run_resumes_like_an_uninterrupted_one(prime, tmp_path, capsys):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": STEPS}), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    killed_runs = tmp_path / "killed"
    proc = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", KILLER,
                                                     *_ask(killed_runs, script, prime, "k1")],
                                   cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == -9, proc.stderr[-2000:]
    state, nxt = await thread_state("agent-g", killed_runs, "k1")
    assert nxt == ("validator",) and len(state["iterations"]) == 1 and state["t"] == 2
    assert RunRegistry(killed_runs).get("k1").status == "interrupted"  # its process is gone

    # a new process (this one) resumes from the checkpoint with the recorded context
    assert await asyncio.to_thread(main, ["--runs-dir", str(killed_runs), "resume", "k1", "--quiet"]) == 0
    resumed, _ = await thread_state("agent-g", killed_runs, "k1")
    second = tmp_path / "script-2.json"  # a model string's script is loaded once per process: a fresh copy
    second.write_text(script.read_text(encoding="utf-8"), encoding="utf-8")
    assert await asyncio.to_thread(main, _ask(tmp_path / "whole", second, prime, "w1")) == 0
    whole, _ = await thread_state("agent-g", tmp_path / "whole", "w1")
    assert _shape(resumed) == _shape(whole)
    assert resumed["ranked_ids"] == whole["ranked_ids"] == ["0"]
    assert resumed["exit_reason"] == "accepted at iteration 2"
    assert RunRegistry(killed_runs).get("k1").status == "done"
    assert capsys.readouterr().out.splitlines().count('["0"]') == 2  # both printed the ranking
