"""Every script in examples/ runs, offline with its scripted model, to its paper's answer: they cannot rot.

Each example stops its run once (``interrupt_after``) and resumes the same thread, so these also show that a
resumed run ends where an uninterrupted one does.
"""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kgagents.nodes.models

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.fixture(autouse=True)
def fresh_models(monkeypatch):
    """Each example gets its own scripted model instance (a script counts the uses of its steps)."""
    monkeypatch.setattr(kgagents.nodes.models, "_cache", {})


def test_every_example_is_tested_and_imports_from_the_one_namespace():
    scripts = {p.stem for p in EXAMPLES.glob("*.py")}
    assert scripts == {"kgot", "ark", "grounded", "agent_g"}
    for name in scripts:
        text = (EXAMPLES / f"{name}.py").read_text(encoding="utf-8")
        assert f"from kgagents.graphs.{name} import compile_graph" in text
        assert "from graphs" not in text and "from nodes" not in text and "from tools" not in text
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    assert all(f"{name}.py" in readme for name in scripts)


def test_kgot_example(capsys):
    state = asyncio.run(load("kgot").main())
    assert state["final_answer"] == "65"
    out = capsys.readouterr().out
    assert "stopped after 1 KG write(s)" in out and "answer: 65" in out and "-[SORTED_AS]->" in out


def test_ark_example(capsys):
    state = asyncio.run(load("ark").main())
    assert state["final_answer"] == "False"
    out = capsys.readouterr().out
    assert "stopped after step 1" in out and "(Sablé, animal breed, dachshund)" in out


def test_grounded_example(capsys):
    state = asyncio.run(load("grounded").main())
    out = capsys.readouterr().out
    gold = out.split("(gold: ")[1].split(")")[0]
    assert state["final_answer"] == gold and "grounded by RetrieveNode(" in out


def test_agent_g_example(tmp_path):
    """Run as a user runs it, in a process of its own (its CRAG mock KG server and page embeddings are its own,
    whatever the tests before it left in this process)."""
    proc = subprocess.run([sys.executable, str(EXAMPLES / "agent_g.py")], check=False, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "answer: universal pictures" in proc.stdout
    assert "rejected" in proc.stdout and "accepted" in proc.stdout and "feedback:" in proc.stdout


@pytest.mark.slow
def test_an_example_runs_as_a_script(tmp_path):
    """As a user runs it: ``python examples/ark.py`` from any folder."""
    proc = subprocess.run([sys.executable, str(EXAMPLES / "ark.py")], check=False, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "answer: False" in proc.stdout
