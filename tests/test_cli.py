"""The command line, run as a user runs it: real subprocesses, SQLite checkpoints, a scripted model file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import kgot_script as S

pytestmark = pytest.mark.slow

QUESTION = "Sort the numbers 42, 23, 2, 88, 37, 15 and add the third and fifth of the sorted list."

# Two enhance iterations (Numbers, then Total), then solve. Every step is chosen by what the prompt shows,
# so a resumed process (with a fresh script) answers exactly as the first one would have.
SLOW_SUM = "import time\ntime.sleep(4)\nprint('sum of third and fifth:', 23 + 42)"
STEPS = [
    *S.votes("INSERT", 0, unless="Label: Numbers"),
    *S.votes("INSERT", 0, when_extra="Label: Numbers", unless="Label: Total"),
    *S.votes("RETRIEVE", 0, when_extra="Label: Total"),
    *S.merge(times=0),
    S.step(S.DEFINE_TOOLS, unless="Label: Numbers", times=0,
           tool_calls=[{"name": "run_python_code", "args": {"code": "print(sorted([42, 23, 2, 88, 37, 15]))"}}]),
    S.step(S.DEFINE_TOOLS + ".*Label: Numbers", times=0,
           tool_calls=[{"name": "run_python_code", "args": {"code": SLOW_SUM}}]),
    S.step(S.WRITE, unless="Label: Numbers", times=0,
           structured={"code": "G.add_node('nums', label='Numbers', sorted=[2, 15, 23, 37, 42, 88])"}),
    S.step("Label: Numbers.*" + S.WRITE, times=0,
           structured={"code": "G.add_node('total', label='Total', value=65)\n"
                               "G.add_edge('nums', 'total', relationship='SUMS_TO')"}),
    S.step(S.RETRIEVE, times=0, structured={"code": "result = G.nodes['total']['value']"}),
    *S.need_math(False, times=0),
    S.step(S.PARSE, times=0, structured={"final_answer": "65"}),
]


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGAGENTS_", "OPENAI_", "ANTHROPIC_"))}
    env["KGAGENTS_HOME"] = str(tmp_path / "kgagents-home")  # never the user's data folder
    env.update(KGAGENTS_NO_DOTENV="1", KGAGENTS_RUNS_DIR=str(tmp_path / "runs"), OLLAMA_HOST="http://127.0.0.1:9")
    env.update(extra)
    return env


def kgagents(tmp_path: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kgagents.cli", *args], env=cli_env(tmp_path), cwd=tmp_path,
                          capture_output=True, text=True, timeout=180, **kw)


@pytest.fixture()
def script(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"name": "cli-test", "steps": STEPS}))
    return path


def show_json(tmp_path: Path, thread: str) -> dict:
    out = kgagents(tmp_path, "show", thread, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def thread_of(stderr: str) -> str:
    return next(line.split()[1] for line in stderr.splitlines() if line.startswith("thread: "))


def test_demo_prints_65(tmp_path):
    out = kgagents(tmp_path, "demo")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "65"
    assert "scripted" in out.stderr.lower()


def test_ask_runs_show(tmp_path, script):
    out = kgagents(tmp_path, "ask", QUESTION, "--model", f"scripted:{script}", "--thread", "t-one")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "65"
    runs = kgagents(tmp_path, "runs")
    assert "t-one" in runs.stdout and "done" in runs.stdout
    shown = kgagents(tmp_path, "show", "t-one")
    assert shown.returncode == 0
    for needle in ("Answer: 65", "Votes:", "Tool calls:", "KG writes:", "Label: Total", "Usage:", "scripted"):
        assert needle in shown.stdout
    state = show_json(tmp_path, "t-one")
    assert [w["status"] for w in state["kg_writes"]] == ["applied", "applied"]


def test_ask_without_a_model_names_the_variables(tmp_path):
    out = kgagents(tmp_path, "ask", "What is 2 + 2?")
    assert out.returncode == 2
    assert "KGAGENTS_MODEL" in out.stderr and "Traceback" not in out.stderr


def test_unknown_thread_is_a_clear_error(tmp_path):
    out = kgagents(tmp_path, "resume", "nope")
    assert out.returncode == 2 and "no run with thread id" in out.stderr


def test_killed_run_resumes_to_the_same_answer_and_kg_without_duplicates(tmp_path, script):
    # The uninterrupted reference run.
    ref = kgagents(tmp_path, "ask", QUESTION, "--model", f"scripted:{script}", "--thread", "ref")
    assert ref.returncode == 0, ref.stderr
    reference = show_json(tmp_path, "ref")

    # The same task, killed with SIGKILL while the second iteration's (slow) tool call runs.
    proc = subprocess.Popen([sys.executable, "-m", "kgagents.cli", "ask", QUESTION, "--model", f"scripted:{script}",
                             "--thread", "victim"], env=cli_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen_define = 0
    deadline = time.monotonic() + 120
    assert proc.stderr is not None
    for line in proc.stderr:
        if "define_tool_calls" in line:
            seen_define += 1
            if seen_define == 2:
                break
        assert time.monotonic() < deadline
    time.sleep(1.0)  # the slow tool call is running now
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    runs = kgagents(tmp_path, "runs")
    assert "victim" in runs.stdout and "interrupted" in runs.stdout
    partial = show_json(tmp_path, "victim")
    assert len(partial["kg_writes"]) == 1 and "final_answer" not in partial

    resumed = kgagents(tmp_path, "resume", "victim")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "65"
    final = show_json(tmp_path, "victim")
    assert final["kg"] == reference["kg"]
    assert [w["status"] for w in final["kg_writes"]] == ["applied", "applied"]
    assert [w["code"] for w in final["kg_writes"]] == [w["code"] for w in reference["kg_writes"]]
    assert len(final["tool_calls"]) == len(reference["tool_calls"]) == 2
    assert final["iteration"] == reference["iteration"] == 2
    assert "done" in kgagents(tmp_path, "runs").stdout.split("victim")[1].splitlines()[0]


# --- a CLI that starts at once: the parser reads light data only (kgagents/cli/flags.py) ---

_HEAVY = ("langgraph", "langchain_core", "langchain", "torch", "httpx", "openai", "kgagents.graphs.kgot",
          "kgagents.graphs.grounded", "kgagents.nodes.grounded", "kgagents.nodes.kgot", "kgagents.core.runs")


@pytest.mark.parametrize("argv", [["--help"], ["ask", "--help"], ["ask", "--workflow", "grounded", "--help"],
                                  ["ask", "--workflow", "agent-g", "--help"], ["eval", "ark", "--help"],
                                  ["doctor", "--help"], ["replay", "--help"], ["trust", "--help"]])
def test_help_imports_no_workflow(argv):
    """``--help`` builds the parser without LangGraph, LangChain, the workflows' graphs and nodes or torch."""
    code = ("import sys\nfrom kgagents.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"heavy = {_HEAVY!r}\n"
            "print(sorted(m for m in sys.modules if m in heavy or m.startswith(tuple(h + '.' for h in heavy))))")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert "usage: kgagents" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_committed_flags_are_every_workflows_own():
    """The committed catalogue is what the contexts give (`make flags` writes it again) and the flags in help are
    the same either way."""
    from kgagents.cli import flags
    from kgagents.graphs import registry

    committed = flags.catalogue()
    assert set(committed) == set(registry.names())
    for name in registry.names():
        live = flags.flags_of(registry.get(name).context)
        assert committed[name] == live, f"kgagents/cli/workflow_flags.json is stale for {name}: run `make flags`"
        assert flags.current(committed[name])


def test_stale_flags_are_read_from_the_context(monkeypatch):
    """A catalogue whose sources changed is not used: the workflow's flags come from its context."""
    from kgagents.cli import flags
    from kgagents.graphs import registry

    entry = flags.catalogue()["grounded"]
    forged = flags.ContextFlags(context=entry.context, flags=entry.flags[:1],
                                sources={m: "0" * 64 for m in entry.sources})
    monkeypatch.setattr(flags, "catalogue", lambda: {"grounded": forged})
    assert flags.workflow_flags("grounded") == flags.flags_of(registry.get("grounded").context)
